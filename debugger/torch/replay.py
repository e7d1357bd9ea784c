"""Level "ops" at the cost of its statistics: an iteration that repeats a recorded one is replayed.

Building an iteration's graph costs tens of microseconds of Python per operator (edges, scopes,
stacks, kinds). Training repeats the same operators every step, so once a fully recorded iteration
has the graph of an earlier one (the run repeats), the recorder keeps that iteration's *trace*: per
operator call, which of its tensors were captured and which the graph's nodes made. The next
iterations are replayed against it: each call checks that the same operator runs, captures the
same tensors and keeps a weak reference to what it made, with no graph work.

When a call differs (another operator, another shape, a new leaf, fewer calls), the iteration is not
lost: the graph so far is rebuilt from the trace (its nodes up to that call, the producers of the
tensors still alive from the weak references) and the rest of the iteration is recorded in full,
as a graph of its own. Only a run that repeats again is replayed again.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

from ..formats.records import Kind, NodeRecord
from . import capture as C
from .devstats import saturated_row, stats_row
from .output import rows_of
from .sink import Job
from .stepfacts import iteration_facts


@dataclass
class Take:
    """One capture of a call: the tensor at ``where`` among the call's tensors, as a node's slot."""

    where: int
    node: str
    op_type: str
    io: str
    slot: int
    shape: tuple[int, ...]
    exact: bool
    reuse: bool
    activation: str = ""        # an asymptotic activation: its saturated count is taken too


@dataclass
class Call:
    """One operator call of the trace: captures before it runs (its inputs) and after (outputs), the
    tensors its nodes made ((where, node, slot, a view) as the tracker registered them), and where
    the graph stood when it started."""

    func: Any
    before: list[Take] = field(default_factory=list)
    after: list[Take] = field(default_factory=list)
    made: list[tuple[int, str, int, bool]] = field(default_factory=list)
    first_node: int = 0
    first_order: int = 0
    backward: bool = False

    @property
    def optional(self) -> bool:
        """A bare alias (``detach``) with nothing captured or made: torch issues these itself around a
        dispatch mode's factory results, and not always alike under two modes."""
        return not self.before and not self.after and not self.made and is_alias(self.func)


def is_alias(func: Any) -> bool:
    """Whether ``func`` only makes an alias of its input (``detach``, ``alias``)."""
    return func is not None and C.op_hints(func)[0] in C.ALIASES


BARE = Call(None)


@dataclass
class Trace:
    """The calls of one fully recorded iteration, and what its graph ended as."""

    calls: list[Call] = field(default_factory=list)
    nodes: list[NodeRecord] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    names: frozenset[str] = frozenset()
    invariant: frozenset[str] = frozenset()
    losses: list[str] = field(default_factory=list)
    loss_slots: dict[str, set[int]] = field(default_factory=dict)


def call_tensors(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any = None) -> list[torch.Tensor]:
    """The tensors of a call in a fixed order: arguments, keyword arguments, then outputs (the order of
    :func:`capture.flat_tensors`, without its generators: this runs for every operator call)."""
    flat: list[torch.Tensor] = []
    _flatten(args, flat)
    if kwargs:
        _flatten(tuple(kwargs.values()), flat)
    if out is not None:
        _flatten((out,), flat)
    return flat


def _flatten(items: Any, flat: list[torch.Tensor]) -> None:
    for v in items:
        if isinstance(v, torch.Tensor):
            flat.append(C.local(v))
        elif isinstance(v, (list, tuple)):
            _flatten(v, flat)


def where_in(t: torch.Tensor, tensors: list[torch.Tensor]) -> int:
    """The position of ``t`` itself (not an equal tensor) in ``tensors``; -1 when absent."""
    for i, x in enumerate(tensors):
        if x is t:
            return i
    return -1


class Replaying:
    """Where an iteration being replayed is in its trace, and weak references to what it made."""

    def __init__(self, trace: Trace, graph_id: int) -> None:
        self.trace = trace
        self.graph_id = graph_id
        self.k = 0
        self.live: list[tuple[int, list[Any]]] = []

    def next_call(self, func: Any) -> Call | None:
        """The traced call for the next operator, when it is ``func`` (a bare alias either side is
        passed over: see :attr:`Call.optional`); None when the operators differ."""
        calls = self.trace.calls
        k = self.k
        while k < len(calls) and calls[k].func is not func and calls[k].optional:
            k += 1
        if k < len(calls) and calls[k].func is func:
            self.k = k + 1
            return calls[k]
        return BARE if is_alias(func) else None

    def keep(self, g: C.IterationGraph, call: Call, tensors: list[torch.Tensor]) -> None:
        """Weak references to the tensors ``call``'s nodes made (the graph is rebuilt from them); a
        forward call's autograd nodes are tagged with its node as a full recording tags them."""
        refs = []
        for where, node, _, _ in call.made:
            try:
                ref = weakref.ref(tensors[where])
            except (IndexError, TypeError):
                ref = None
            refs.append(ref)
            if ref is not None and not call.backward:
                g.pending_tags.append((ref, node))
        self.live.append((self.k - 1, refs))

    def complete(self) -> bool:
        """Whether every traced call ran (but bare aliases)."""
        return all(c.optional for c in self.trace.calls[self.k:])

    def done_calls(self) -> int:
        """How many traced calls ran alike."""
        return self.k


def rebuild(g: C.IterationGraph, tracker: C.Tracker, replaying: Replaying) -> None:
    """Fill ``g`` and ``tracker`` as a full recording of the calls replayed so far would have left them."""
    trace, k = replaying.trace, replaying.done_calls()
    replayed = {key: v for key, v in g.counters.items() if key[0] == ""}     # gradients taken so far
    fresh = C.IterationGraph()
    for name in ("counters", "by_view", "by_storage", "seq", "leaves", "inputs_seen", "input_count", "value_of",
                 "info", "constants", "made"):
        setattr(g, name, getattr(fresh, name))
    first_node = trace.calls[k].first_node if k < len(trace.calls) else len(trace.nodes)
    first_order = trace.calls[k].first_order if k < len(trace.calls) else len(trace.order)
    g.nodes = [replace(n) for n in trace.nodes[:first_node]]    # copies: the suffix may change kinds
    _drop_untaken_gradients(g.nodes, replayed)
    names = {n.name for n in g.nodes}
    g.order = [o for o in trace.order[:first_order] if o in names]
    for n in g.nodes:
        _restore_node(g, n)
    g.invariant = {n for n in trace.invariant if n in names}
    g.losses = [n for n in trace.losses if n in names]
    g.loss_slots = {n: set(s) for n, s in trace.loss_slots.items() if n in names}
    for j, refs in replaying.live:
        call = trace.calls[j]
        for (_, node, slot, view), ref in zip(call.made, refs):
            t = ref() if ref is not None else None
            if t is None or node not in names:
                continue
            tracker.register(t, node, view=view, slot=slot)
            if node.startswith("input-"):
                g.inputs_seen[C.storage_ptr(t)] = node
    g.input_count = sum(1 for n in g.nodes if n.op_type == "Input")    # data inputs are numbered by count


def _drop_untaken_gradients(nodes: list[NodeRecord], replayed: dict[tuple[str, str], int]) -> None:
    """The Gradient nodes the trace made as an optimizer step began, at the end of the replayed part,
    belong to a step this iteration has not begun (unless their gradients were replayed already)."""
    counts: dict[str, int] = {}
    for n in nodes:
        if n.op_type == "Gradient":
            counts[f"{n.param}.grad"] = counts.get(f"{n.param}.grad", 0) + 1
    while nodes and nodes[-1].op_type == "Gradient":
        base = f"{nodes[-1].param}.grad"
        if counts[base] <= replayed.get(("", base), 0):
            break
        counts[base] -= 1
        nodes.pop()


def _restore_node(g: C.IterationGraph, n: NodeRecord) -> None:
    """What a full recording notes about node ``n`` beside the node itself."""
    if n.is_parameter:
        g.leaves[n.name] = n
        return
    if n.op_type == "Gradient":
        base = f"{n.param}.grad"
        g.counters[("", base)] = g.counters.get(("", base), 0) + 1
        return
    g.counters[(n.scope, n.op_type)] = g.counters.get((n.scope, n.op_type), 0) + 1
    if n.kind == Kind.CONSTANT:
        g.constants.add(n.name)
    if n.is_routing and n.value_inputs:
        g.value_of[n.name] = n.value_inputs[0]
    if not n.is_backward:
        g.info[n.name] = (n.scope, n.stack, n.module)


def replay_call(rec: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                full: Callable[..., Any]) -> Any:
    """One operator call of an iteration being replayed. Once the iteration stops repeating its trace
    the call is recorded in full: ``full(func, args, kwargs)`` runs and records it, ``full(func, args,
    kwargs, out)`` records one that ran already (its outputs differ from the trace's)."""
    replaying = rec._replay.replaying
    g = rec._graph
    if g.pending_tags:
        C.tag_pending(g)
    call = replaying.next_call(func)
    if call is None:
        rec._replay.resume_full()
        return full(func, args, kwargs)
    captured = len(g.captured)
    tensors = None
    if call.before:
        tensors = call_tensors(args, kwargs)
        if not _alike(call.before, tensors):
            replaying.k -= 1
            rec._replay.resume_full()
            return full(func, args, kwargs)
        _take(rec, call.before, tensors)
    out = func(*args, **kwargs)
    if C.op_hints(func)[2]:
        with rec._own_work():       # as a full recording does: the reduced value is what is captured
            C.wait_collective(out, func)
    if rec._in_step is not None:
        rec._ops.count_writes(C.arg_groups(func, args, kwargs))     # as a full recording does (reuse keys)
    if (call.after or call.made) and rec._replay.replaying is replaying:
        # the arguments' tensors are listed once per call: the outputs are added to them
        tensors = call_tensors(args, kwargs, out) if tensors is None else tensors + call_tensors((), {}, out)
        if not _alike(call.after, tensors):
            del g.captured[captured:]      # recorded again, in full
            replaying.k -= 1
            rec._replay.resume_full()
            full(func, args, kwargs, out)
            return out
        if call.made:
            replaying.keep(g, call, tensors)
        if call.after:
            _take(rec, call.after, tensors)
    return out


def _alike(takes: list[Take], tensors: list[torch.Tensor]) -> bool:
    """Whether the tensors the trace captured are there, with their traced shapes."""
    n = len(tensors)
    return all(take.where < n and tensors[take.where].shape == take.shape for take in takes)


def _take(rec: Any, takes: list[Take], tensors: list[torch.Tensor]) -> None:
    rec._busy = True
    try:
        with torch._C._DisableTorchDispatch():
            for take in takes:
                rec._replay.replay_take(take, tensors[take.where])
    except Exception as exc:      # never break the training: leave this iteration out
        rec._drop(exc)
    finally:
        rec._busy = False


class Replay:
    """A Recorder's replay: the trace a full "ops" iteration leaves, the captures a replayed one takes, and
    the switch to a full recording (the iteration being recorded and its leaves are the Recorder's)."""

    def __init__(self, rec: Any) -> None:
        self.rec = rec
        self.trace: Trace | None = None         # the calls of the full "ops" iteration being recorded
        self.call: Call | None = None           # ... and of its operator call running now
        self.call_args: tuple[Any, Any] = ((), {})
        self.call_out: Any = None
        self.call_tensors: tuple[bool, list[torch.Tensor]] | None = None
        self.repeat: tuple[int, Trace] | None = None    # the graph the run repeats, and its trace
        self.replaying: Replaying | None = None

    def forget(self) -> None:
        """An iteration left out (a failure): nothing of it is traced or replayed."""
        self.replaying = self.trace = self.call = self.repeat = None

    def resume_full(self) -> None:
        """The iteration being replayed stopped repeating its trace: rebuild its graph so far and record
        the rest in full (see replay.py); the next iterations are recorded in full until the run repeats."""
        replaying, g = self.replaying, self.rec._graph
        self.replaying = self.repeat = None
        if replaying is None or g is None:
            return
        busy = self.rec._busy
        self.rec._busy = True
        try:
            with C.OWN_OPS():
                rebuild(g, self.rec._tracker, replaying)
                params = {C.clean_name(k): v for k, v in self.rec._root.named_parameters()}
                for n in g.nodes:       # the gradients the rebuilt graph holds: their producer for the rest
                    p = params.get(n.param or "") if n.op_type == "Gradient" else None
                    if p is not None and p.grad is not None:
                        self.rec._tracker.register(C.local(p.grad), n.name)
                if self.rec._in_step is not None:
                    g.step_first = len(g.nodes)
        finally:
            self.rec._busy = busy

    def call_begin(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.trace is not None and self.rec._graph is not None:
            self.call = Call(func, first_node=len(self.rec._graph.nodes), first_order=len(self.rec._graph.order),
                                backward=bool(self.rec._in_backward or torch._C._current_autograd_node() is not None))
            self.call_args = (args, kwargs)
            self.call_out = None
            self.call_tensors = None

    def call_end(self) -> None:
        if self.call is not None and self.trace is not None:
            self.trace.calls.append(self.call)
        # no reference past the call: AccumulateGrad copies a gradient that anything else holds
        self.call = self.call_out = self.call_tensors = None
        self.call_args = ((), {})

    def trace_take(self, t: torch.Tensor, c: C.Captured, exact: bool, reuse: bool) -> None:
        """Note a capture of the running call in the trace (where the tensor is among the call's)."""
        call = self.call
        assert call is not None
        after = self.call_out is not None
        where = where_in(t, self._tensors_of_call(after))
        if where < 0:       # not one of the call's own tensors: this iteration cannot be replayed
            self.trace = None
            return
        (call.after if after else call.before).append(
            Take(where, c.node, c.op_type, c.io, c.slot, c.shape, exact, reuse))

    def _tensors_of_call(self, after: bool) -> list[torch.Tensor]:
        """The running call's tensors (``after``: with its outputs), listed once per phase."""
        if self.call_tensors is None or self.call_tensors[0] != after:
            self.call_tensors = (after, call_tensors(*self.call_args, self.call_out if after else None))
        return self.call_tensors[1]

    def note_made(self, t: torch.Tensor, node: str, view: bool, slot: int) -> None:
        """The tracker registered ``t`` as made by ``node``: note it in the trace of the running call."""
        call = self.call
        if call is None or self.trace is None:
            return
        where = where_in(t, self._tensors_of_call(True))
        if where < 0:
            self.trace = None
            return
        call.made.append((where, node, slot, view))

    def replay_take(self, take: Take, t: torch.Tensor) -> None:
        """Capture the tensor a traced call's take names (its shape checked already; the trace says it
        was a plain tensor: a statistics capture that no leaf shares takes the short way)."""
        if take.reuse or self.rec.values or type(t) is not torch.Tensor or t.dtype not in C.STATS_DTYPE:
            c = self.rec._capture(take.node, take.op_type, take.io, take.slot, t, exact=take.exact, reuse=take.reuse)
        else:
            t = t.detach()
            c = C.Captured(take.node, take.op_type, take.io, take.slot, shape=take.shape,
                           stats=stats_row(t), dtype=C.STATS_DTYPE[t.dtype])
            if take.exact:
                c.host = self.rec._digest_box(t)
            self.rec._graph.captured.append(c)
        if c is not None and take.activation and not self.rec.values and t.dtype.is_floating_point:
            c.extra = saturated_row(t, take.activation)

    def replayed_job(self, g: C.IterationGraph, replaying: Replaying) -> Job:
        """The job of an iteration replayed against the trace of graph ``replaying.graph_id``."""
        gid = replaying.graph_id
        assert self.rec._out is not None
        self.rec._out.ran(gid, self.rec.iteration)
        g.loss_slots = replaying.trace.loss_slots
        rows = rows_of(g, gid)
        facts = iteration_facts(self.rec.optimizers, self.rec._stepped, self.rec._param_name,
                                self.rec._out.graph_records[gid].nodes, self.rec._lr_zero)
        return Job(self.rec.iteration, [], [gid], rows, facts)

    def replay_gradients(self, g: C.IterationGraph, opt: torch.optim.Optimizer, trace: Trace) -> bool:
        """:meth:`_record_gradients` of an iteration being replayed: the captures, no nodes. False (and
        the graph rebuilt, nothing captured) when a gradient is not the trace's."""
        counters = dict(g.counters)
        named: list[tuple[torch.Tensor, str, str]] = []
        for grp in opt.param_groups:
            for p in grp["params"]:
                if p.grad is not None:
                    pname = self.rec._param_name.get(id(p), f"param@{C.storage_ptr(C.local(p)):x}")
                    k = counters.get(("", f"{pname}.grad"), 0)
                    counters[("", f"{pname}.grad")] = k + 1
                    named.append((C.local(p.grad), pname, f"{pname}.grad-{k}" if k else f"{pname}.grad"))
        if any(name not in trace.names for _, _, name in named):
            self.resume_full()
            return False
        g.counters = counters
        for grad, pname, name in named:
            if self.rec._want(self.rec._leaves.leaf_module(C.Leaf(pname, Kind.GRADIENT, pname)), "Gradient"):
                self.rec._capture(name, "Gradient", "output", 0, grad, exact=True)
        self.rec._leaves.grad_ptrs = {C.storage_ptr(grad) for grad, _, _ in named}
        return True
