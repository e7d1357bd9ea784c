"""Level "ops": every ATen operator of an iteration as a graph node, seen by a dispatch mode.

:class:`OpsMode` sees each call below autograd (forward, backward and the optimizer step) and either
replays it against a trace (replay.py) or records it in full: :class:`OpsLevel` (a part of the
Recorder) names the node after its module scope, finds its inputs' producers, tells its kind and
captures its tensors.
"""
from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..formats.records import Kind, NodeRecord, OutputType, StackFrame
from ..stats.core import ASYMPTOTES
from . import activations as A
from . import capture as C
from . import optstate
from . import replay as R
from .devstats import saturated_row
from .stacks import user_stack

NOT_RUN = object()      # the operator of a call has not run yet


class OpsMode(TorchDispatchMode):
    """Sees every ATen call below autograd (forward, backward and the optimizer step)."""

    def __init__(self, rec: Any) -> None:
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        rec = self.rec
        if rec._busy or rec._graph is None or func.namespace == "profiler":
            return func(*args, **kwargs)
        if rec._replay.replaying is not None:
            return R.replay_call(rec, func, args, kwargs, self._full)     # no closure per call: hot path
        return self._full(func, args, kwargs)

    def _full(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], ran: Any = NOT_RUN) -> Any:
        """Run ``func`` (unless it ``ran`` already, with that output) and record it as a graph node."""
        rec = self.rec
        rec._busy = True
        rec._replay.call_begin(func, args, kwargs)
        try:
            with C.OWN_OPS():
                pre = rec._ops.before(func, args, kwargs)
        except Exception as exc:     # never break the training: drop this iteration instead
            rec._drop(exc)
            pre = None
        finally:
            rec._busy = False
        out = func(*args, **kwargs) if ran is NOT_RUN else ran
        if pre is None or rec._graph is None:
            rec._replay.call_end()
            return out
        rec._busy = True
        rec._replay.call_out = out
        try:
            with C.OWN_OPS():
                rec._ops.after(pre, func, args, kwargs, out)
        except Exception as exc:
            rec._drop(exc)
        finally:
            rec._busy = False
            rec._replay.call_end()
        return out


class OpsLevel:
    """A Recorder's per-operator recording at level "ops": each operator :class:`OpsMode` sees becomes a
    node, named after its module scope, with its inputs' producers, its kind and its captures (the
    iteration being recorded and its leaves are the Recorder's)."""

    def __init__(self, rec: Any) -> None:
        self.rec = rec

    def _pass_capture(self, g: C.IterationGraph, op: str, name: str, src: torch.Tensor, out: torch.Tensor) -> None:
        """Let the view ``out`` of ``src`` share ``src``'s capture when it holds the same elements: an
        alias (AccumulateGrad's detach of a gradient) entirely; a view of the same memory span in
        another layout (``t``, ``view``, ``permute``) its statistics, never a digest (that of ``src``'s
        layout)."""
        same = self.same_bits(g, src)
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

    def same_bits(self, g: C.IterationGraph, t: torch.Tensor) -> tuple[int | None, tuple[Any, ...], C.Captured] | None:
        """(version, view, capture) of this iteration's capture of ``t``'s bits, if any: that of the node
        that made ``t`` (alive, so its memory was not reused), as the same view at the same version."""
        e = self.rec._tracker.newest(t)
        made = None if e is None else g.made.get((e[1], e[3]))
        if made is None or made[0] is None or made[0] != C.version(t) or made[1] != C.view_key(t):
            return None
        return made

    def _scope(self) -> tuple[str, str, tuple[StackFrame, ...], bool]:
        """(scope, module path, source stack, backward) of the operator about to run."""
        if self.rec._in_backward or torch._C._current_autograd_node() is not None:
            node = torch._C._current_autograd_node()
            meta: dict[str, Any] | None = node.metadata if node is not None else None   # type: ignore[assignment]
            fwd = meta.get("tdbg") if meta is not None else None
            g = self.rec._graph
            info = g.info.get(fwd) if (fwd and g is not None) else None
            if info is not None:
                scope, src, path = info
                # a backward kernel's frames are those of the forward operator it derives from
                return (f"{C.BACKWARD_SCOPE}/{scope}", path,
                        tuple(replace(f, forward_candidate=True) for f in src), True)
            micro = self.rec._micro.scope()      # a pipeline stage's backward of one micro-batch
            return (f"{C.BACKWARD_SCOPE}/{micro}" if micro else C.BACKWARD_SCOPE), "", self.rec._backward_source, True
        if self.rec._in_step is not None:
            return f"optimizer-{type(self.rec._in_step).__name__}", "", user_stack(4), False
        if self.rec._scopes:
            _, scope, path = self.rec._scopes[-1]
            return scope, path, user_stack(4), False
        return C.GLOBAL_SCOPE, "", user_stack(4), False

    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        g = self.rec._graph
        assert g is not None
        C.tag_pending(g)
        op, routing, collective, per_rank = C.op_hints(func)
        scope, path, source, backward = self._scope()
        groups = C.arg_groups(func, args, kwargs)
        lists = [v for v, _, _ in groups if isinstance(v, list) and v]
        n = len(lists[0]) if lists else 0
        elements = range(n) if lists else range(1)
        want = self.rec._want(path, op)
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
            forward = not backward and self.rec._in_step is None
            for slot, t in enumerate(ins):
                read = id(t) not in overwritten
                src, leaf = self.rec._tracker.source(t, data=forward, read=read and want)
                srcs.append(src)
                if leaf is not None and want and read:
                    self.rec._capture(name, op, "input", slot, t, exact=True, reuse=True)
            nodes.append((name, ins, writes, srcs, overwritten))
        return (op, routing, collective, per_rank, scope, path, source, backward, nodes, lists, want)

    def after(self, pre: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        op, routing, collective, per_rank, scope, path, source, backward, nodes, lists, want = pre
        g = self.rec._graph
        assert g is not None
        group: tuple[int, ...] = ()
        if collective:
            C.wait_collective(out, func)
            group = C.collective_group(args, kwargs)
        returned = [t for t in C.flat_tensors(out)]
        for _, _, writes, _, _ in nodes:
            self.count_writes((w, True, False) for w in writes)
        unset = self._track_unset(g, nodes[0][0], op, collective, returned, [t for n in nodes for t in n[1]],
                                  [w for n in nodes for w in n[2]])
        for e, (name, ins, writes, srcs, overwritten) in enumerate(nodes):
            if lists:
                outs = [returned[e]] if len(returned) == len(nodes) else writes
            else:
                outs = returned if returned else writes
            if routing and len(ins) == 1 and len(outs) == 1 and (op in C.ALIASES or not self.rec.values):
                self._pass_capture(g, op, name, ins[0], outs[0])
            roles: tuple[str, ...] = ()
            if self.rec._in_step is not None and any(C.storage_ptr(w) in self.rec._leaves.param_ptrs or
                                                 C.storage_ptr(w) in self.rec._leaves.state_ptrs for w in writes):
                roles = tuple(self._role(t) for t in ins)
            forward = not backward and self.rec._in_step is None
            is_routing = routing or op in C.PASS_THROUGH
            traced = tuple(g.value_of.get(s, s) for s in srcs)      # through views to the value's maker
            kind, activation = Kind.OTHER, ""
            if forward:
                data_in = [v for v, t in zip(traced, ins) if id(t) not in overwritten] or list(traced)
                kind, activation = self._forward_kind(g, op, args, kwargs, scope, per_rank, data_in, bool(lists))
            value_inputs = traced[:1] if is_routing else traced
            if is_routing and traced:
                g.value_of[name] = traced[0]
            node = NodeRecord(name, op, scope, inputs=[(s, "control" if id(t) in overwritten else "data")
                                                      for s, t in zip(srcs, ins)],
                             outputs=[OutputType(C.dtype_name(t.dtype), tuple(t.shape)) for t in outs],
                             stack=source, module=path or "", kind=kind, is_backward=backward,
                             is_routing=is_routing, stops_gradient=op in C.DETACHES,
                             is_collective=collective, group=group,
                             per_rank=per_rank, input_roles=roles, value_inputs=value_inputs,
                             activation=activation)
            g.nodes.append(node)
            if kind == Kind.CONSTANT:
                g.constants.add(name)
            elif activation in A.PART_OF_COMPOSITE and self.rec._scopes and outs and \
                    self.rec._composites.needs_check(self.rec._scopes[-1][0]):
                self.rec._composites.add(self.rec._scopes[-1][0], node, outs[0])
            g.order.append(name)
            if not backward:
                g.info[name] = (scope, source, path)
            if self.rec._in_step is not None:
                out_ptrs = tuple(C.storage_ptr(t) for t in outs if isinstance(t, torch.Tensor))
                in_ptrs = {C.storage_ptr(t) for t in ins}
                g.step_ops.append(optstate.StepOp(node, out_ptrs, not any(p in in_ptrs for p in out_ptrs)))
            # Equal on every data-parallel rank when made only from weights, optimizer state and
            # collectives' results (what `tdbg compare --ranks` checks): stored with an exact digest.
            data = [v for v, (_, e) in zip(traced, node.inputs) if e == "data"]
            invariant = not per_rank and (collective or (bool(data) and all(v in g.invariant for v in data)))
            if invariant:
                g.invariant.add(name)
            for slot, t in enumerate(outs):
                if not isinstance(t, torch.Tensor):
                    continue
                self.rec._tracker.register(t, name, view=routing, slot=slot)
                if not backward and self.rec._in_step is None and t.requires_grad is not None:
                    try:
                        g.pending_tags.append((weakref.ref(t), name))
                    except TypeError:
                        pass
                if want and not routing and not roles and op not in C.UNINITIALISED and id(t) not in unset:
                    c = self.rec._capture(name, op, "output", slot, t, exact=invariant)
                    if c is not None:
                        g.made[(name, slot)] = (C.version(t), C.view_key(t), c)
                        if activation in ASYMPTOTES and not self.rec.values and t.dtype.is_floating_point:
                            c.extra = saturated_row(t, activation)
                            call = self.rec._replay.call
                            if call is not None and call.after:
                                call.after[-1].activation = activation

    @staticmethod
    def _track_unset(g: C.IterationGraph, name: str, op: str, collective: bool, returned: list[torch.Tensor],
                     ins: list[torch.Tensor], writes: list[torch.Tensor]) -> set[int]:
        """Keep ``g.unset`` (storages from torch.empty not wholly written since); the ids of the outputs that
        hold bytes nobody wrote: an output aliasing such a storage that is not itself a written argument
        (FSDP2's all_gather_copy_in returns its whole all-gather buffer with only this rank's chunk filled)."""
        if op in C.UNINITIALISED:
            g.unset.update((C.storage_ptr(t), name) for t in returned)
            return set()
        if not g.unset:
            return set()
        known = {C.storage_ptr(t) for t in ins}
        # new memory an operator computed its result in (freed memory comes back at the same address)
        for ptr in [p for p in map(C.storage_ptr, returned) if p not in known]:
            g.unset.pop(ptr, None)
        filled = writes + returned if collective else writes     # a collective fills what it returns
        for t in filled:
            if C.covers_storage(t):
                g.unset.pop(C.storage_ptr(t), None)
        written = {C.view_key(t) for t in filled}
        return {id(t) for t in returned if C.storage_ptr(t) in g.unset and C.view_key(t) not in written}

    def count_writes(self, groups: Any) -> None:
        """Count the in-place writes to leaves (and gradients) of (tensor or list, written, out=) groups:
        some kernels under a dispatch mode do not bump the version counter, and reuse keys count these."""
        for v, written, _ in groups:
            if not written:
                continue
            for w in (v if isinstance(v, list) else (v,)):
                if w is None:
                    continue
                p = C.storage_ptr(w)
                if p in self.rec._leaves.leaf_by_ptr or p in self.rec._leaves.shared_ptrs or p in self.rec._leaves.grad_ptrs:
                    self.rec._leaves.writes[p] = self.rec._leaves.writes.get(p, 0) + 1

    @staticmethod
    def _forward_kind(g: C.IterationGraph, op: str, args: tuple[Any, ...], kwargs: dict[str, Any], scope: str,
                      per_rank: bool, data_in: list[str], is_list: bool) -> tuple[Kind, str]:
        """(kind, activation) of a forward operator, from what it reads and computes."""
        fixed = op in C.FIXED_VALUE
        if not data_in or fixed:
            if scope == C.GLOBAL_SCOPE and not fixed:
                return Kind.INPUT, ""      # made outside any module from nothing: the step's data (torch.randn ...)
            # made inside the model from no tensor at all (zeros, arange, full ...), or anywhere by an op whose
            # arguments fix its value (torch.zeros(n), zeros_like(out): a GAN's labels): the same every
            # iteration, not a computed value; random numbers are not
            return (Kind.OTHER if per_rank else Kind.CONSTANT), ""
        if not per_rank and all(v in g.constants for v in data_in):
            return Kind.CONSTANT, ""       # computed from constants alone (a causal mask from arange)
        activation = "" if is_list else A.activation_of(op, args, kwargs)
        return (Kind.ACTIVATION if activation else Kind.OTHER), activation

    def _role(self, t: torch.Tensor) -> str:
        ptr = C.storage_ptr(t)
        if ptr in self.rec._leaves.param_ptrs:
            return "weight"
        if ptr in self.rec._leaves.grad_ptrs:
            return "gradient"
        if ptr in self.rec._leaves.state_ptrs:
            return "state"
        return "hyper"

    def mark_losses(self, g: C.IterationGraph, roots: list[torch.Tensor]) -> None:
        """Level "ops": the operators that made ``roots`` are the iteration's losses."""
        C.tag_pending(g)
        for t in roots:
            src, _ = self.rec._tracker.source(t, data=False)
            slot = self.rec._tracker.slot_of(t)
            if slot is not None:
                g.loss_slots.setdefault(src, set()).add(slot)
            if src not in g.losses:
                g.losses.append(src)
                for n in reversed(g.nodes):
                    if n.name == src and not n.is_parameter:
                        n.kind = Kind.LOSS
                        break
