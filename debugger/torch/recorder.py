"""Recorder: three lines in a PyTorch training loop write a tdbg-h5 dump of every iteration.

What one iteration holds (see docs/pytorch.md): every ATen operator that ran (forward, backward,
optimizer step) as a node with data edges, module scope and user source stack; parameters, buffers,
optimizer state, gradients and data inputs as leaf nodes; and per tensor its values or statistics.

"The weight at iteration i" is the parameter's node output, taken at ``rec.step()``, i.e. after
iteration i's optimizer step; the value the forward pass read (before the update) is the input of
the weight's readers (the first one is what tdbg's "previous value" uses for the first iteration).
"""
from __future__ import annotations

import contextlib
from dataclasses import replace
import fnmatch
import hashlib
import os
import warnings
import weakref
from typing import Any, Iterator, Mapping, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..formats.records import LEVEL_MODULES, LEVEL_OPS, GraphRecord, Kind, NodeRecord, OutputType, StackFrame
from ..formats.tdbg_h5.writer import DumpWriter
from ..stats import ASYMPTOTES, compiled_kernel
from . import capture as C
from . import activations as A
from . import optstate
from .levels import LevelPlan, Selection
from .modulelevel import ModuleLevel
from .devstats import extras_to_host, rows_to_dicts, saturated_row, stats_row, update_row
from .sink import DigestBox, Job, Row, Sink
from .stacks import user_stack
from .stepfacts import iteration_facts, mark_loss_scaler

_SAVE = {"tensors": "values", "values": "values", "statistics": "statistics", "both": "values+statistics"}
_NUMPY_OK = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
             torch.float32, torch.float64, torch.complex64, torch.complex128}
_MAX_GRAPHS = 64


# The recorder's own tensor calls (detach, copies, device statistics) skip every dispatch mode, its
# own included: each would otherwise make a round trip through Python (about 5 us, a thousand times
# an iteration). ``_busy`` still guards the paths this does not cover.
_own_ops = torch._C._DisableTorchDispatch


class _Mode(TorchDispatchMode):
    """Sees every ATen call below autograd (forward, backward and the optimizer step)."""

    def __init__(self, rec: "Recorder") -> None:
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        rec = self.rec
        if rec._busy or rec._graph is None or func.namespace == "profiler":
            return func(*args, **kwargs)
        rec._busy = True
        try:
            with _own_ops():
                pre = rec._before(func, args, kwargs)
        except Exception as exc:     # never break the training: drop this iteration instead
            rec._drop(exc)
            pre = None
        finally:
            rec._busy = False
        out = func(*args, **kwargs)
        if pre is None or rec._graph is None:
            return out
        rec._busy = True
        try:
            with _own_ops():
                rec._after(pre, func, args, kwargs, out)
        except Exception as exc:
            rec._drop(exc)
        finally:
            rec._busy = False
        return out


class Recorder:
    """Record a PyTorch training run as a tdbg-h5 dump (``with Recorder(path, model, optimizer) as rec``).

    ``save``: "tensors" (values), "statistics" (computed on the tensor's device) or "both".
    ``level``: how finely: "ops" (every ATen operator), "modules" (each module call's inputs, outputs
    and gradients) or "parameters" (weights, gradients, optimizer state and the loss, at ``step()``);
    or a schedule ``{"parameters": None, "ops": range(0, N, 100)}`` (an iteration takes the finest
    level that selects it). ``iterations``: which iterations to record at a single ``level``
    ("0-9,100", a range, a list; None: all). ``modules``: globs on module
    paths (``"fc1"``, ``"layer1.*"``) whose tensors are dumped; ``ops``: globs on ATen op types
    (``"conv*"``). The graph is always complete; the filters only choose which tensors are stored.
    ``rank``: the rank folder (default: ``torch.distributed.get_rank()`` when initialised, else 0).
    """

    def __init__(self, path: str | os.PathLike[str], model: torch.nn.Module,
                 optimizer: "torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None" = None, *,
                 save: str = "tensors", iterations: Selection = None, level: "str | Mapping[str, Selection]" = LEVEL_OPS,
                 modules: Sequence[str] | None = None, ops: Sequence[str] | None = None,
                 rank: int | None = None, compression: str | None = None, durable: bool = False) -> None:
        if save not in _SAVE:
            raise ValueError(f"save must be one of {', '.join(_SAVE)}, got {save!r}")
        self.path = os.fspath(path)
        self.model = model
        self.optimizers: list[torch.optim.Optimizer] = (
            [] if optimizer is None else list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer])
        self.saved = _SAVE[save]
        self.values = self.saved != "statistics"
        self.stats_on_device = self.saved == "statistics"
        self._plan = LevelPlan(level, iterations)
        self._level: str | None = None      # the level of the iteration being recorded (None: not recorded)
        self.modules = list(modules) if modules else None
        self.ops = list(ops) if ops else None
        if rank is None:
            dist = torch.distributed
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        self.rank = rank
        self.compression = compression
        self.durable = durable
        self.iteration = 0
        self._graph: C.IterationGraph | None = None
        self._busy = False
        self._mode: _Mode | None = None
        self._sink: Sink | None = None
        self._writer: DumpWriter | None = None
        self._handles: list[Any] = []
        self._scopes: list[tuple[Any, str, str]] = []     # (module, scope, model path)
        self._in_step: torch.optim.Optimizer | None = None
        self._stepped: set[int] = set()     # ids of the optimizers whose step() ran in this iteration
        self._in_backward = 0
        self._backward_source: tuple[StackFrame, ...] = ()
        self._graph_ids: dict[str, int] = {}
        self._graph_records: dict[int, GraphRecord] = {}
        self._history: dict[int, list[int]] = {}
        self._orig_backward: Any = None
        root = model.module if _is_wrapper(model) else model
        self._root = root
        self._module_path = {id(m): p for p, m in root.named_modules()}
        self._wrappers = {id(model)} if root is not model else set()
        self._param_name = {id(p): n for n, p in root.named_parameters()}
        self._buffer_name = {id(b): n for n, b in root.named_buffers()}
        self._leaf_by_ptr: dict[int, C.Leaf] = {}
        self._grad_ptrs: set[int] = set()
        self._state_ptrs: set[int] = set()
        self._param_ptrs: set[int] = set()
        self._reuse: dict[Any, Any] = {}
        # in-place writes seen per leaf storage: some kernels (foreach ops under a dispatch mode) do
        # not bump the version counter, so the reuse key counts the writes it saw as well
        self._writes: dict[int, int] = {}
        self._leaf_tensors: dict[int, torch.Tensor] = {}
        self._named: tuple[list[tuple[str, torch.Tensor]], list[tuple[str, torch.Tensor]]] | None = None
        self._composites = A.Composites()
        self._module_level = ModuleLevel(self)     # level "modules": one node per module call
        # statistics mode: each trained weight as the iteration's first optimizer step found it (its
        # value at the end of the iteration before), for the update statistics stored at step()
        self._before_step: dict[int, torch.Tensor] = {}

    # ---- public API -------------------------------------------------------------------------
    def __enter__(self) -> "Recorder":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Open the dump, install the hooks and start recording iteration 0 (when selected)."""
        dist = torch.distributed
        world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        dev = next((p.device.type for p in self._root.parameters()), "cpu")
        self._writer = DumpWriter(self.path, self.rank, self.saved, framework="PyTorch",
                                  framework_version=torch.__version__, device_target=dev.upper(),
                                  net=type(self._root).__name__, compression=self.compression,
                                  durable=self.durable,
                                  metadata={"recorder": "debugger.torch", "world_size": world,
                                            "levels": self._plan.describe()})
        self._sink = Sink(self._writer)
        if self.stats_on_device:
            # numba's start-up here, once, not in the first iteration: CPU tensors (a CPU model's, or
            # the `step` counters Adam keeps on the CPU beside a GPU model) take the compiled kernel
            compiled_kernel()
        mm = torch.nn.modules.module
        self._handles.append(mm.register_module_forward_pre_hook(self._pre_hook))
        self._handles.append(mm.register_module_forward_hook(self._post_hook, always_call=True))
        for opt in self.optimizers:
            self._handles.append(opt.register_step_pre_hook(self._step_pre))
            self._handles.append(opt.register_step_post_hook(self._step_post))
        self._orig_backward = torch.autograd.backward
        torch.autograd.backward = self._backward   # type: ignore[assignment]
        self._begin()

    def step(self) -> None:
        """End the current iteration (hands it to the writer thread) and start the next."""
        if self._writer is None:
            raise RuntimeError("Recorder.step() outside 'with Recorder(...)' (or before start())")
        self._end()
        self.iteration += 1
        self._begin()

    def capture_next(self, n: int = 1, level: str = LEVEL_OPS) -> None:
        """Record the next ``n`` iterations (from the one after the current) at ``level`` or finer."""
        self._plan.capture_next(self.iteration + 1, n, level)

    def flush(self) -> None:
        """Wait until every ended iteration is written (``step`` does not wait for its own)."""
        if self._sink is not None:
            self._sink.flush()

    def close(self) -> None:
        """Stop recording (the open iteration is dropped), write run histories, release the rank."""
        if self._writer is None:
            return
        self._stop_mode()
        self._graph = None
        if self._orig_backward is not None:
            torch.autograd.backward = self._orig_backward   # type: ignore[assignment]
            self._orig_backward = None
        for h in self._handles:
            h.remove()
        self._handles.clear()
        try:
            if self._sink is not None:
                self._sink.close()
            for gid, rec in self._graph_records.items():
                self._writer.write_graph(rec, run_history=self._history.get(gid, ()))
        finally:
            self._writer.close()
            self._writer = None

    # ---- iteration lifecycle ----------------------------------------------------------------
    def _begin(self) -> None:
        self._scopes.clear()
        self._level = self._plan.level_of(self.iteration)
        if self._level is None:
            self._graph = None
            self._stop_mode()
            return
        self._prune_reuse()
        self._stepped = set()
        self._composites.clear()
        self._graph = C.IterationGraph()
        self._tracker = C.Tracker(self._graph, self._leaf_of, self._on_input)
        self._refresh_leaves(walk=True)
        if self._level != LEVEL_OPS:
            self._stop_mode()     # the coarser levels see no operator: no dispatch mode, no cost per operator
        elif self._mode is None:
            self._mode = _Mode(self)
            self._mode.__enter__()

    def _drop(self, exc: Exception) -> None:
        """A failure while recording an operator: warn, and leave this iteration out of the dump."""
        warnings.warn(f"tdbg recorder: iteration {self.iteration} is not recorded: "
                      f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)
        self._graph = None

    def _stop_mode(self) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None

    @contextlib.contextmanager
    def _own_work(self) -> Iterator[None]:
        """The recorder's own tensor work: no dispatch mode (its own included) sees its operators."""
        self._busy = True
        try:
            with _own_ops():
                yield
        finally:
            self._busy = False

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        """:meth:`_own_work` in a hook of the user's training: a failure drops this iteration, never the
        training."""
        try:
            with self._own_work():
                yield
        except Exception as exc:
            self._drop(exc)

    def _end(self) -> None:
        g = self._graph
        if g is None:
            return
        try:
            with self._own_work():
                C.tag_pending(g)
                self._refresh_leaves()
                for ptr, leaf in list(self._leaf_by_ptr.items()):
                    t = self._leaf_tensors.get(ptr)
                    if t is None:
                        continue
                    self._tracker.make_leaf(leaf, t)
                    if self._want(self._leaf_module(leaf), "Parameter"):
                        c = self._capture(leaf.name, "Parameter", "output", 0, t, exact=True, reuse=True)
                        before = self._before_step.get(ptr)
                        if c is not None and before is not None and leaf.kind == Kind.WEIGHT:
                            c.extra = update_row(t, before)
                job = self._job(g)
        finally:
            self._graph = None
            self._before_step.clear()
        assert self._sink is not None
        self._sink.submit(job)

    def _job(self, g: C.IterationGraph) -> Job:
        mark_loss_scaler(g.nodes)
        outputs = list(g.losses)
        record = GraphRecord(0, "train_step", g.nodes, outputs, source_file="", execution_order=g.order,
                             level=self._level or LEVEL_OPS)
        sig = _signature(record)
        gid = self._graph_ids.get(sig)
        new: list[GraphRecord] = []
        if gid is None:
            gid = len(self._graph_ids)
            if gid >= _MAX_GRAPHS:
                raise RuntimeError(f"tdbg recorder: more than {_MAX_GRAPHS} different graphs; record fewer "
                                   "iterations (iterations=...) or a model whose operators repeat")
            self._graph_ids[sig] = gid
            record.graph_id = gid
            record.name = f"train_step_{gid}" if gid else "train_step"
            self._graph_records[gid] = record
            new.append(record)
        self._history.setdefault(gid, []).append(self.iteration)
        rows: list[Row] = []
        stat_rows: list[Any] = []
        # a loss node's other outputs (nll_loss's total weight) are no loss: not stored
        g.captured = [c for c in g.captured if not (c.io == "output" and c.node in g.loss_slots
                                                     and c.slot not in g.loss_slots[c.node])]
        extras: list[dict[str, Any]] = []
        for c in g.captured:
            r = Row(gid, c.node, c.op_type, c.io, c.slot, values=c.values, digest_of=c.host,
                    dtype=c.dtype, shape=c.shape)
            rows.append(r)
            if c.stats is not None:
                stat_rows.append(c.stats)
            if c.extra:
                extras.append(c.extra)
        if extras:
            hosted = iter(extras_to_host(extras))     # one host transfer per device
            for r, c in zip(rows, g.captured):
                if c.extra:
                    r.extra = next(hosted)
        if stat_rows:
            dicts = rows_to_dicts(stat_rows)        # one host transfer per device
            it = iter(dicts)
            for r, c in zip(rows, g.captured):
                if c.stats is not None:
                    r.stats = next(it)
        g.captured.clear()
        g.made.clear()      # it holds host copies in values mode: not past the hand-over
        facts = iteration_facts(self.optimizers, self._stepped, self._param_name, g.nodes)
        return Job(self.iteration, new, [gid], rows, facts)

    # ---- facts about tensors ----------------------------------------------------------------
    def _refresh_leaves(self, walk: bool = False) -> None:
        """Parameters, buffers and optimizer state by storage address (state appears at the first step);
        ``walk``: list the model's parameters and buffers anew (once an iteration: it walks every module)."""
        if walk or self._named is None:
            self._named = (list(self._root.named_buffers()), list(self._root.named_parameters()))
        buffers, params = self._named
        by: dict[int, C.Leaf] = {}
        tensors: dict[int, torch.Tensor] = {}
        trained: set[int] = {id(p) for opt in self.optimizers for grp in opt.param_groups for p in grp["params"]}
        for n, b in buffers:
            ptr = C.storage_ptr(b)
            if ptr:
                by[ptr], tensors[ptr] = C.Leaf(n, Kind.OTHER, None), b
        for n, p in params:
            ptr = C.storage_ptr(p)
            if ptr:
                by[ptr] = C.Leaf(n, Kind.WEIGHT if id(p) in trained else Kind.OTHER, n)
                tensors[ptr] = p
        self._param_ptrs = {C.storage_ptr(p) for opt in self.optimizers for grp in opt.param_groups
                            for p in grp["params"]}
        states: set[int] = set()
        for k, opt in enumerate(self.optimizers):
            for p, st in opt.state.items():
                pname = self._param_name.get(id(p), f"param{len(by)}")
                for key, v in st.items():
                    if isinstance(v, torch.Tensor) and C.is_plain(v):
                        ptr = C.storage_ptr(v)
                        if ptr and ptr not in by:
                            prefix = f"optimizer{k}." if len(self.optimizers) > 1 else ""
                            by[ptr] = C.Leaf(f"{prefix}{key}.{pname}", Kind.OPTIMIZER_STATE, pname)
                            tensors[ptr] = v
                            states.add(ptr)
        self._state_ptrs = states
        self._leaf_by_ptr = by
        self._leaf_tensors = tensors

    def _prune_reuse(self) -> None:
        """Keep reusable captures only for the leaves as they are now (bounded: one per leaf)."""
        if not self._reuse:
            return
        live = {(p, t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, t._version, self._writes.get(p, 0))
                for p, t in ((C.storage_ptr(t), t) for t in self._leaf_tensors.values())}
        self._reuse = {k: v for k, v in self._reuse.items() if k in live}

    def _leaf_of(self, t: torch.Tensor) -> C.Leaf | None:
        return self._leaf_by_ptr.get(C.storage_ptr(t))

    def _leaf_module(self, leaf: C.Leaf) -> str:
        name = leaf.param or leaf.name
        return name.rsplit(".", 1)[0] if "." in name else ""

    def _on_input(self, rec: NodeRecord, t: torch.Tensor) -> None:
        self._capture(rec.name, rec.op_type, "output", 0, t, exact=False)

    def _want(self, module_path: str, op_type: str) -> bool:
        if self.modules is not None and not any(fnmatch.fnmatchcase(module_path, m) for m in self.modules):
            return False
        if self.ops is not None and op_type not in ("Parameter", "Input", "Gradient") and \
                not any(fnmatch.fnmatchcase(op_type, o) for o in self.ops):
            return False
        return True

    def _capture(self, node: str, op_type: str, io: str, slot: int, t: torch.Tensor, exact: bool,
                 reuse: bool = False, same: C.Captured | None = None) -> C.Captured | None:
        """Keep a tensor of this iteration: host values, or a device statistics row (+ host copy to hash).
        ``same``: a capture of this iteration known to hold the same bits (its values or row are shared)."""
        if not C.is_plain(t) or t.dtype not in _NUMPY_OK and t.dtype != torch.bfloat16:
            return None
        assert self._graph is not None
        t = t.detach()
        shape = tuple(t.shape)
        c = C.Captured(node, op_type, io, slot, shape=shape)
        # Leaves (parameters, state, gradients) are read several times and kept across iterations:
        # the same memory at the same version counter holds the same bits, so its capture is reused.
        ptr = C.storage_ptr(t)
        key = (ptr, t.storage_offset(), shape, t.stride(), t.dtype, t._version,
               self._writes.get(ptr, 0)) if reuse else None
        hit = self._reuse.get(key) if key is not None else None
        if hit is not None:
            c.values, c.stats, c.host, c.dtype = hit
        elif same is not None:
            c.values, c.stats, c.host, c.dtype = same.values, same.stats, same.host, same.dtype
            if exact and c.host is None and not self.values:
                c.host = self._digest_box(t)
        elif self.values:
            h = t.to("cpu", copy=True)
            if h.dtype == torch.bfloat16:
                h = h.to(torch.float32)      # numpy has no bfloat16: stored as float32
            c.values = h.numpy()
            c.dtype = str(c.values.dtype)
        else:
            c.stats = stats_row(t)
            c.dtype = "float32" if t.dtype == torch.bfloat16 else C.dtype_name(t.dtype)
            if exact:
                c.host = self._digest_box(t)
        if key is not None and hit is None:
            self._reuse[key] = (c.values, c.stats, c.host, c.dtype)   # a device row is stacked with the rest
        self._graph.captured.append(c)
        return c

    def _pass_capture(self, g: C.IterationGraph, op: str, name: str, src: torch.Tensor, out: torch.Tensor) -> None:
        """Let the view ``out`` of ``src`` share ``src``'s capture when it holds the same elements: an
        alias (AccumulateGrad's detach of a gradient) entirely; a view of the same memory span in
        another layout (``t``, ``view``, ``permute``) its statistics, never a digest (that of ``src``'s
        layout)."""
        same = self._same_bits(g, src)
        if same is None:
            return
        if op in C.ALIASES:
            g.made[(name, 0)] = same
        elif out.dtype == src.dtype and out.numel() == src.numel() and C.storage_ptr(out) == C.storage_ptr(src) \
                and out.storage_offset() == src.storage_offset() and C.is_dense(src) and C.is_dense(out):
            c = same[2]
            g.made[(name, 0)] = (C.version(out), C.view_key(out),
                                 C.Captured(c.node, c.op_type, c.io, c.slot, stats=c.stats, dtype=c.dtype,
                                            shape=tuple(out.shape)))

    def _same_bits(self, g: C.IterationGraph, t: torch.Tensor) -> tuple[int, tuple[Any, ...], C.Captured] | None:
        """(version, view, capture) of this iteration's capture of ``t``'s bits, if any: that of the node
        that made ``t`` (alive, so its memory was not reused), as the same view at the same version."""
        e = self._tracker.newest(t)
        made = None if e is None else g.made.get((e[1], e[3]))
        if made is None or made[0] is None or made[0] != C.version(t) or made[1] != C.view_key(t):
            return None
        return made

    @staticmethod
    def _digest_box(t: torch.Tensor) -> DigestBox:
        """The exact digest of a leaf: hashed now from its own memory on the CPU (cheaper than a copy
        to hash later); elsewhere a host copy hashed by the writer thread."""
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)
        if t.device.type == "cpu":
            box = DigestBox(t.resolve_conj().resolve_neg().numpy())
            box.hexdigest()
            return box
        return DigestBox(t.to("cpu", copy=True).numpy())

    # ---- operators --------------------------------------------------------------------------
    def _scope(self) -> tuple[str, str, tuple[StackFrame, ...], bool]:
        """(scope, module path, source stack, backward) of the operator about to run."""
        if self._in_backward or torch._C._current_autograd_node() is not None:
            node = torch._C._current_autograd_node()
            fwd = node.metadata.get("tdbg") if node is not None else None
            g = self._graph
            info = g.info.get(fwd) if (fwd and g is not None) else None
            if info is not None:
                scope, src, path = info
                # a backward kernel's frames are those of the forward operator it derives from
                return (f"{C.BACKWARD_SCOPE}/{scope}", path,
                        tuple(replace(f, forward_candidate=True) for f in src), True)
            return C.BACKWARD_SCOPE, "", self._backward_source, True
        if self._in_step is not None:
            return f"optimizer-{type(self._in_step).__name__}", "", user_stack(4), False
        if self._scopes:
            _, scope, path = self._scopes[-1]
            return scope, path, user_stack(4), False
        return C.GLOBAL_SCOPE, "", user_stack(4), False

    def _before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        g = self._graph
        assert g is not None
        C.tag_pending(g)
        op, routing, collective, per_rank = C.op_hints(func)
        scope, path, source, backward = self._scope()
        groups = C.arg_groups(func, args, kwargs)
        lists = [v for v, _, _ in groups if isinstance(v, list) and v]
        n = len(lists[0]) if lists else 0
        elements = range(n) if lists else range(1)
        want = self._want(path, op)
        nodes = []
        for e in elements:
            ins: list[torch.Tensor] = []
            writes: list[torch.Tensor] = []
            # an out= argument is written whatever it held, like the destination of copy_: never read
            overwritten: set[int] = set()
            for v, w, out in groups:
                if isinstance(v, list):
                    if len(v) != n or v[e] is None:
                        continue
                    t = v[e]
                else:
                    t = v
                ins.append(t)
                if w:
                    writes.append(t)
                if out or (w and op in C.OVERWRITE):
                    overwritten.add(id(t))
            name = g.fresh_name(scope, op)
            srcs = []
            forward = not backward and self._in_step is None
            for slot, t in enumerate(ins):
                read = id(t) not in overwritten
                src, leaf = self._tracker.source(t, data=forward, read=read and want)
                srcs.append(src)
                if leaf is not None and want and read:
                    self._capture(name, op, "input", slot, t, exact=True, reuse=True)
            nodes.append((name, ins, writes, srcs, overwritten))
        return (op, routing, collective, per_rank, scope, path, source, backward, nodes, lists, want)

    def _after(self, pre: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        op, routing, collective, per_rank, scope, path, source, backward, nodes, lists, want = pre
        g = self._graph
        assert g is not None
        if collective:
            _wait(out)
        returned = [t for t in C.flat_tensors(out)]
        for _, _, writes, _, _ in nodes:
            for w in writes:
                p = C.storage_ptr(w)
                if p in self._leaf_by_ptr or p in self._grad_ptrs:
                    self._writes[p] = self._writes.get(p, 0) + 1
        for e, (name, ins, writes, srcs, overwritten) in enumerate(nodes):
            if lists:
                outs = [returned[e]] if len(returned) == len(nodes) else writes
            else:
                outs = returned if returned else writes
            if routing and len(ins) == 1 and len(outs) == 1 and (op in C.ALIASES or not self.values):
                self._pass_capture(g, op, name, ins[0], outs[0])
            roles: tuple[str, ...] = ()
            if self._in_step is not None and any(C.storage_ptr(w) in self._param_ptrs or
                                                 C.storage_ptr(w) in self._state_ptrs for w in writes):
                roles = tuple(self._role(t) for t in ins)
            forward = not backward and self._in_step is None
            is_routing = routing or op in C.PASS_THROUGH
            traced = tuple(g.value_of.get(s, s) for s in srcs)      # through views to the value's maker
            kind, activation = Kind.OTHER, ""
            if forward:
                data_in = [v for v, t in zip(traced, ins) if id(t) not in overwritten] or list(traced)
                kind, activation = self._forward_kind(g, op, args, kwargs, scope, per_rank, data_in, bool(lists))
            value_inputs = traced[:1] if is_routing else traced
            if is_routing and traced:
                g.value_of[name] = traced[0]
            rec = NodeRecord(name, op, scope, inputs=[(s, "control" if id(t) in overwritten else "data")
                                                      for s, t in zip(srcs, ins)],
                             outputs=[OutputType(C.dtype_name(t.dtype), tuple(t.shape)) for t in outs],
                             stack=source, module=path or "", kind=kind, is_backward=backward,
                             is_routing=is_routing, is_collective=collective,
                             per_rank=per_rank, input_roles=roles, value_inputs=value_inputs,
                             activation=activation)
            g.nodes.append(rec)
            if kind == Kind.CONSTANT:
                g.constants.add(name)
            elif activation in A.PART_OF_COMPOSITE and self._scopes and outs and \
                    self._composites.needs_check(self._scopes[-1][0]):
                self._composites.add(self._scopes[-1][0], rec, outs[0])
            g.order.append(name)
            if not backward:
                g.info[name] = (scope, source, path)
            if self._in_step is not None:
                out_ptrs = tuple(C.storage_ptr(t) for t in outs if isinstance(t, torch.Tensor))
                in_ptrs = {C.storage_ptr(t) for t in ins}
                g.step_ops.append(optstate.StepOp(rec, out_ptrs, not any(p in in_ptrs for p in out_ptrs)))
            # Equal on every data-parallel rank when made only from weights, optimizer state and
            # collectives' results (what `tdbg compare --ranks` checks): stored with an exact digest.
            data = [v for v, (_, e) in zip(traced, rec.inputs) if e == "data"]
            invariant = not per_rank and (collective or (bool(data) and all(v in g.invariant for v in data)))
            if invariant:
                g.invariant.add(name)
            for slot, t in enumerate(outs):
                if not isinstance(t, torch.Tensor):
                    continue
                self._tracker.register(t, name, view=routing, slot=slot)
                if not backward and self._in_step is None and t.requires_grad is not None:
                    try:
                        g.pending_tags.append((weakref.ref(t), name))
                    except TypeError:
                        pass
                if want and not routing and not roles and op not in C.UNINITIALISED:
                    c = self._capture(name, op, "output", slot, t, exact=invariant)
                    if c is not None:
                        g.made[(name, slot)] = (C.version(t), C.view_key(t), c)
                        if activation in ASYMPTOTES and not self.values and t.dtype.is_floating_point:
                            c.extra = saturated_row(t, activation)

    @staticmethod
    def _forward_kind(g: C.IterationGraph, op: str, args: tuple[Any, ...], kwargs: dict[str, Any], scope: str,
                      per_rank: bool, data_in: list[str], is_list: bool) -> tuple[str, str]:
        """(kind, activation) of a forward operator, from what it reads and computes."""
        if not data_in:
            if scope == C.GLOBAL_SCOPE:
                return Kind.INPUT, ""      # made outside any module from nothing: the step's data (torch.randn ...)
            # made inside the model from no tensor at all (zeros, arange, full ...): the same every
            # iteration, not a computed value; random numbers are not
            return (Kind.OTHER if per_rank else Kind.CONSTANT), ""
        if not per_rank and all(v in g.constants for v in data_in):
            return Kind.CONSTANT, ""       # computed from constants alone (a causal mask from arange)
        activation = "" if is_list else A.activation_of(op, args, kwargs)
        return (Kind.ACTIVATION if activation else Kind.OTHER), activation

    def _role(self, t: torch.Tensor) -> str:
        ptr = C.storage_ptr(t)
        if ptr in self._param_ptrs:
            return "weight"
        if ptr in self._grad_ptrs:
            return "gradient"
        if ptr in self._state_ptrs:
            return "state"
        return "hyper"

    # ---- hooks ------------------------------------------------------------------------------
    def _pre_hook(self, module: torch.nn.Module, inputs: Any) -> None:
        if self._graph is None or id(module) in self._wrappers:
            return
        path = self._module_path.get(id(module))
        parent_scope, parent_path = (self._scopes[-1][1], self._scopes[-1][2]) if self._scopes else ("", None)
        cls = type(module).__name__
        if path is None:
            part = cls
            path = parent_path or ""
        elif path == "":
            part = "model"
        else:
            rel = path[len(parent_path) + 1:] if parent_path and path.startswith(parent_path + ".") else path
            part = f"{rel}-{cls}"
        self._scopes.append((module, f"{parent_scope}/{part}" if parent_scope else part, path))
        if self._level == LEVEL_MODULES:
            self._module_level.enter(module, inputs)      # guarded inside: never raises

    def _post_hook(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        if self._graph is None:
            return
        if self._composites.pending:
            with self._guarded():
                self._composites.settle(module, output)
        if self._level == LEVEL_MODULES:
            self._module_level.leave(module, output)      # guarded inside: never raises
        for i in range(len(self._scopes) - 1, -1, -1):
            if self._scopes[i][0] is module:
                del self._scopes[i:]
                break

    def _backward(self, tensors: Any, *args: Any, **kwargs: Any) -> Any:
        assert self._orig_backward is not None
        g = self._graph
        if g is None or self._busy:
            return self._orig_backward(tensors, *args, **kwargs)
        with self._guarded():
            self._backward_source = user_stack(2)
            roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
            # every root is a loss (micro-batches accumulating gradients call backward often)
            roots = [t for t in roots if isinstance(t, torch.Tensor)]
            if self._level == LEVEL_OPS:
                self._mark_losses(g, roots)
            else:
                self._loss_nodes(g, roots)
        self._in_backward += 1
        try:
            return self._orig_backward(tensors, *args, **kwargs)
        finally:
            self._in_backward -= 1

    def _mark_losses(self, g: C.IterationGraph, roots: list[torch.Tensor]) -> None:
        """Level "ops": the operators that made ``roots`` are the iteration's losses."""
        C.tag_pending(g)
        for t in roots:
            src, _ = self._tracker.source(t, data=False)
            slot = self._tracker.slot_of(t)
            if slot is not None:
                g.loss_slots.setdefault(src, set()).add(slot)
            if src not in g.losses:
                g.losses.append(src)
                for n in reversed(g.nodes):
                    if n.name == src and not n.is_parameter:
                        n.kind = Kind.LOSS
                        break

    def _loss_nodes(self, g: C.IterationGraph, roots: list[torch.Tensor]) -> None:
        """The coarser levels see no operator: each root of ``backward()`` is a node of its own."""
        for t in roots:
            name = g.once_name("loss")
            made_by = self._made_by(t)
            g.nodes.append(NodeRecord(name, "Loss", "", inputs=[(made_by, "data")] if made_by else [],
                                      outputs=[OutputType(C.dtype_name(t.dtype), tuple(t.shape))],
                                      stack=self._backward_source, kind=Kind.LOSS))
            g.order.append(name)
            g.losses.append(name)
            self._capture(name, "Loss", "output", 0, t, exact=False)

    def _made_by(self, t: torch.Tensor) -> str | None:
        """The recorded node that made ``t`` at the coarser levels (None: none recorded)."""
        return self._module_level.made_by(t) if self._level == LEVEL_MODULES else None

    def _step_pre(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
        g = self._graph
        if g is None:
            return None
        self._stepped.add(id(opt))
        closure = _closure_of(args, kwargs)
        if closure is not None:
            # step(closure) (Lightning's automatic optimization, LBFGS) runs the forward and backward
            # inside step(): they are the iteration's own ops, its gradients are there once it returns
            return _with_closure(args, kwargs, self._closure_recorder(opt, closure))
        try:
            self._enter_step(g, opt)
        except Exception as exc:     # never break the training: drop this iteration instead
            self._drop(exc)
        return None

    def _closure_recorder(self, opt: torch.optim.Optimizer, closure: Any) -> Any:
        """``closure`` run outside the optimizer's scope; the gradients recorded when it returns."""
        def recorded_closure() -> Any:
            self._in_step = None
            result = closure()
            g = self._graph
            if g is not None:
                try:
                    self._enter_step(g, opt)
                except Exception as exc:     # never break the training
                    self._drop(exc)
            self._in_step = opt
            return result
        return recorded_closure

    def _enter_step(self, g: C.IterationGraph, opt: torch.optim.Optimizer) -> None:
        """Record ``opt``'s gradients and mark the ops that follow as its step."""
        with self._own_work():
            self._record_gradients(g, opt)
            self._snapshot_weights(opt)
        g.step_ops = []
        g.step_first = len(g.nodes)
        self._in_step = opt

    def _snapshot_weights(self, opt: torch.optim.Optimizer) -> None:
        """Statistics mode: a copy of each of ``opt``'s weights not yet copied in this iteration."""
        if self.values:
            return
        for grp in opt.param_groups:
            for p in grp["params"]:
                ptr = C.storage_ptr(p)
                if ptr and ptr not in self._before_step and C.is_plain(p) and p.dtype.is_floating_point:
                    self._before_step[ptr] = p.detach().clone()

    def _record_gradients(self, g: C.IterationGraph, opt: torch.optim.Optimizer) -> None:
        """A ``Gradient`` node per parameter with a gradient, as ``opt.step()`` starts."""
        self._refresh_leaves()
        grads: set[int] = set()
        for grp in opt.param_groups:
            for p in grp["params"]:
                if p.grad is None:
                    continue
                pname = self._param_name.get(id(p), f"param@{C.storage_ptr(p):x}")
                if self._level == LEVEL_OPS:
                    src, _ = self._tracker.source(p.grad, data=False)
                    sources = [src]
                    same = self._same_bits(g, p.grad)      # AccumulateGrad keeps the backward op's output
                else:       # no operator seen: the gradient of every loss backward() started from
                    sources, same = list(g.losses), None
                name = g.once_name(f"{pname}.grad")
                rec = NodeRecord(name, "Gradient", "", inputs=[(src, "data") for src in sources],
                                 outputs=[OutputType(C.dtype_name(p.grad.dtype), tuple(p.grad.shape))],
                                 kind=Kind.GRADIENT, param=pname, is_backward=True)
                g.nodes.append(rec)
                g.order.append(name)
                if all(g.value_of.get(src, src) in g.invariant for src in sources):
                    g.invariant.add(name)
                self._tracker.register(p.grad, name)
                grads.add(C.storage_ptr(p.grad))
                if self._want(self._leaf_module(C.Leaf(pname, Kind.GRADIENT, pname)), "Gradient"):
                    self._capture(name, "Gradient", "output", 0, p.grad, exact=True,
                                  same=None if same is None else same[2])
        self._grad_ptrs = grads

    def _step_post(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._in_step = None
        self._grad_ptrs = set()
        g = self._graph
        if g is None:
            return
        with self._guarded():
            self._tag_state(g, opt)

    def _tag_state(self, g: C.IterationGraph, opt: torch.optim.Optimizer) -> None:
        """The step's operators and inputs that made or updated ``opt``'s state: kind optimizer_state."""
        owners = optstate.state_owners(opt, self._param_name)
        optstate.tag_state_ops(g.step_ops, owners, self._param_ptrs)
        ptr_of = {name: ptr for ptr, name in g.inputs_seen.items()}
        optstate.tag_state_inputs(((n, ptr_of[n.name]) for n in g.nodes[g.step_first:]
                                   if n.op_type == "Input" and n.name in ptr_of), owners)
        g.step_ops = []


def _closure_of(args: Any, kwargs: Any) -> Any:
    """The closure passed to ``optimizer.step`` (``args`` starts with the optimizer), else None."""
    closure = kwargs.get("closure") if kwargs else None
    if closure is None and len(args) > 1:
        closure = args[1]
    return closure if callable(closure) else None


def _with_closure(args: Any, kwargs: Any, closure: Any) -> tuple[Any, Any]:
    """``(args, kwargs)`` of ``optimizer.step`` with ``closure`` in place of the one given."""
    if kwargs and kwargs.get("closure") is not None:
        return args, {**kwargs, "closure": closure}
    return (args[0], closure, *args[2:]), kwargs


def _is_wrapper(model: torch.nn.Module) -> bool:
    """DistributedDataParallel / DataParallel: named after the wrapped module, no scope of their own."""
    return isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel))


def _wait(out: Any) -> None:
    """Collectives return a Work handle: wait, so the recorded output is the reduced value."""
    items = out if isinstance(out, (list, tuple)) else [out]
    for v in items:
        w = getattr(v, "wait", None)
        if w is not None and not isinstance(v, torch.Tensor):
            try:
                w()
            except (RuntimeError, TypeError):
                pass


def _signature(record: GraphRecord) -> str:
    """Equal for iterations that ran the same operators with the same edges."""
    h = hashlib.blake2b(digest_size=16)
    for n in record.nodes:
        h.update(f"{n.name}\0{n.op_type}\0{n.kind}\0{','.join(s for s, _ in n.inputs)}\0"
                 f"{n.outputs and [(o.dtype, o.shape) for o in n.outputs]}\0{n.stack}\0{n.module}\n".encode("utf-8", "replace"))
    h.update(repr((record.outputs, record.level)).encode())
    return h.hexdigest()
