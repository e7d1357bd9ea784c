"""The tensors an iteration reads without making them: parameters, buffers, optimizer state and
gradients, found by storage address, and the Gradient nodes made for them as each optimizer step
begins (a part of the Recorder: :class:`Leaves`)."""
from __future__ import annotations

import collections
from typing import Any

import numpy as np
import torch

from ..formats.records import LEVEL_MODULES, LEVEL_OPS, LEVEL_PARAMETERS, Kind, NodeRecord, OutputType
from . import capture as C
from . import optstate
from .compiled import compiled_anything


class Leaves:
    """A Recorder's leaves: its table of parameters, buffers and optimizer state by storage, the captures it
    reuses, the weights kept for the next update's statistics, and the Gradient nodes of each step (the
    iteration being recorded is the Recorder's)."""

    def __init__(self, rec: Any) -> None:
        self.rec = rec
        self.leaf_by_ptr: dict[Any, C.Leaf] = {}       # by key_of
        self.shared_ptrs: set[int] = set()
        self.grad_ptrs: set[int] = set()
        self.state_ptrs: set[int] = set()
        self.param_ptrs: set[int] = set()
        self.reuse: dict[Any, Any] = {}
        # in-place writes seen per leaf storage: some kernels (foreach ops under a dispatch mode) do
        # not bump the version counter, so the reuse key counts the writes it saw as well
        self.writes: dict[int, int] = {}
        self.leaf_tensors: dict[Any, torch.Tensor] = {}
        self._named: tuple[list[tuple[str, torch.Tensor]], list[tuple[str, torch.Tensor]]] | None = None
        self._made_of: tuple[Any, ...] | None = None     # what the leaf table was last made from
        self._strangers: set[int] = set()     # ids of nn.Parameters met outside the leaf table (walked for once)
        # statistics mode: each trained weight as the previous iteration's step() left it (else as this
        # iteration's first optimizer step found it), for the update statistics stored at step(): a
        # change made between two steps, outside the optimizer, is part of the update
        self.before_step: dict[int, torch.Tensor] = {}
        self.checked: set[Any] = set()      # trained weights whose kept capture still_kept found right in this iteration
        self.snapshots: dict[int, torch.Tensor] = {}      # CPU buffers of before_step, by weight storage
        self._step_counts: dict[int, float | None] = {}     # each optimizer's step count at the last step()

    def begin(self) -> None:
        """A recorded iteration begins: the table made anew from the model, reused captures and weight
        buffers kept only for the leaves as they are now."""
        self.prune_reuse()
        self.checked.clear()
        self.refresh(walk=True)
        if self.snapshots:     # only the weights trained now keep a buffer
            self.snapshots = {k: b for k, b in self.snapshots.items()
                              if (k[0] if isinstance(k, tuple) else k) in self.param_ptrs}

    def refresh(self, walk: bool = False) -> None:
        """Parameters, buffers and optimizer state by storage address (state appears at the first step);
        ``walk``: list the model's parameters and buffers anew (once an iteration: it walks every module)."""
        if walk or self._named is None:
            self._named = (list(self.rec._root.named_buffers()), list(self.rec._root.named_parameters()))
        stamp = self._stamp()
        if stamp == self._made_of:
            return      # called up to three times an iteration: the table is rebuilt only when it changed
        self._made_of = stamp
        self._strangers.clear()
        trained: set[int] = {id(p) for opt in self.rec.optimizers for grp in opt.param_groups for p in grp["params"]}
        if not trained <= self.rec._param_name.keys():
            self._learn_names()
        buffers, params = self._named
        by: dict[int, C.Leaf] = {}
        tensors: dict[int, torch.Tensor] = {}
        for n, b in buffers:
            b = C.local(b)
            ptr = C.storage_ptr(b)
            if ptr:
                by[ptr], tensors[ptr] = C.Leaf(C.clean_name(n), Kind.OTHER, None, tuple(b.shape)), b
        # FSDP1's parameters are views of one flat parameter: a storage several of them share keys its
        # leaves by (address, offset) (:meth:`_key_of`)
        locals_ = [(n, p, C.local(p)) for n, p in params]     # a DTensor parameter: this rank's shard
        ptrs = [ptr for ptr in (C.storage_ptr(t) for _, _, t in locals_) if ptr]
        self.shared_ptrs = {ptr for ptr, n in collections.Counter(ptrs).items() if n > 1}
        for n, p, local in locals_:
            key = self.key_of(local)
            if key:
                n = C.clean_name(n)
                by[key] = C.Leaf(n, Kind.WEIGHT if id(p) in trained else Kind.OTHER, n, tuple(local.shape))
                tensors[key] = p        # a DTensor itself: its version counts the updates made through it
        self.param_ptrs = {C.storage_ptr(C.local(p)) for opt in self.rec.optimizers for grp in opt.param_groups
                            for p in grp["params"]}
        states: set[int] = set()
        for k, opt in enumerate(self.rec.optimizers):
            for p, st in opt.state.items():
                pname = self.rec._param_name.get(id(p), f"param{len(by)}")
                for key, outer in st.items():
                    v = C.local(outer)
                    if isinstance(v, torch.Tensor) and C.is_plain(v):
                        ptr = C.storage_ptr(v)
                        if ptr and ptr not in by:
                            prefix = f"optimizer{k}." if len(self.rec.optimizers) > 1 else ""
                            by[ptr] = C.Leaf(f"{prefix}{key}.{pname}", Kind.OPTIMIZER_STATE, pname, tuple(v.shape))
                            tensors[ptr] = outer
                            states.add(ptr)
        self.state_ptrs = states
        self.leaf_by_ptr = by
        self.leaf_tensors = tensors

    def _learn_names(self) -> None:
        """Walk the model again and name the parameters it gained since the recording began (a layer added
        mid-run and given to the optimizer): its state, gradients and weights are named from their first step."""
        self._named = (list(self.rec._root.named_buffers()), list(self.rec._root.named_parameters()))
        for n, p in self._named[1]:
            self.rec._param_name.setdefault(id(p), C.clean_name(n))

    def _stamp(self) -> tuple[Any, ...]:
        """Equal while the leaf table stays right: the model's tensors and their memory, the optimizers'
        groups and state tensors (state appears at the first step, a loaded state dict brings new ones).
        Ids are safe to compare: the table keeps every tensor it was made from alive, so none of their
        ids can pass to a new object while it stands; a tensor's memory may move (``p.data = ...``), and
        the model's storage addresses are compared too."""
        buffers, params = self._named or ((), ())
        return (tuple(id(t) for _, t in buffers), tuple(id(t) for _, t in params),
                tuple(C.storage_ptr(C.local(t)) for _, t in buffers), tuple(C.storage_ptr(C.local(t)) for _, t in params),
                tuple(id(p) for opt in self.rec.optimizers for grp in opt.param_groups for p in grp["params"]),
                tuple(id(v) for opt in self.rec.optimizers for st in opt.state.values() for v in st.values()),
                tuple(id(p) for opt in self.rec.optimizers for p in opt.state))

    def prune_reuse(self) -> None:
        """Keep reusable captures only for the leaves as they are now (bounded: one per leaf)."""
        if not self.reuse:
            return
        live = {C.reuse_key(t, self.writes) for t in self.leaf_tensors.values()}
        self.reuse = {k: v for k, v in self.reuse.items() if k in live}

    def after_updates(self) -> None:
        """The optimizers' steps of this iteration are done: no capture of a trained weight or of optimizer
        state from before them is reused. A fused or foreach kernel (``_fused_adamw_``, the Trainer's
        default) writes them without bumping their version counters, which the reuse keys read."""
        for ptr in self.param_ptrs | self.state_ptrs:
            self.writes[ptr] = self.writes.get(ptr, 0) + 1

    def key_of(self, t: torch.Tensor) -> Any:
        """The key of a leaf's memory: its storage address, or (address, offset) in a shared storage."""
        ptr = C.storage_ptr(t)
        return (ptr, t.storage_offset()) if ptr in self.shared_ptrs else ptr

    def leaf_of(self, t: torch.Tensor) -> C.Leaf | None:
        leaf = self.leaf_by_ptr.get(self.key_of(t))
        if leaf is None and isinstance(t, torch.nn.Parameter) and id(t) not in self._strangers:
            # a parameter the table does not know: a layer added since the iteration began and given to the
            # optimizer (the table is made again: its groups changed), or one that is no leaf of the run
            # (FSDP2's unsharded parameters during the forward: the table stands, the groups did not change)
            self._strangers.add(id(t))
            self.refresh()
            leaf = self.leaf_by_ptr.get(self.key_of(t))
        return leaf

    def leaf_module(self, leaf: C.Leaf) -> str:
        name = leaf.param or leaf.name
        return name.rsplit(".", 1)[0] if "." in name else ""

    def snapshot_weights(self, opt: torch.optim.Optimizer) -> None:
        """Statistics mode: a copy of each of ``opt``'s weights not yet copied in this iteration."""
        if self.rec.values:
            return
        for grp in opt.param_groups:
            for p in grp["params"]:
                p = C.local(p)
                key = self.key_of(p)
                if key and key not in self.before_step and C.is_plain(p) and p.dtype.is_floating_point:
                    self.before_step[key] = self._copy_of(key, p)

    def snapshot_ends(self) -> None:
        """Statistics mode: each trained weight as this iteration leaves it, the "before" of the next
        iteration's update (dropped by _begin when the next iteration is not recorded)."""
        for opt in self.rec.optimizers:
            self.snapshot_weights(opt)

    def _copy_of(self, ptr: Any, p: torch.Tensor) -> torch.Tensor:
        """``p``'s values now, in a buffer kept for it on the CPU (a fresh one each step comes from mmap,
        page faults and all: as much again as the copy); elsewhere a fresh clone (the allocator caches)."""
        if p.device.type != "cpu":
            return p.detach().clone()
        buf = self.snapshots.get(ptr)
        if buf is None or buf.shape != p.shape or buf.dtype != p.dtype:
            buf = self.snapshots[ptr] = torch.empty_like(p, requires_grad=False, memory_format=torch.contiguous_format)
        return buf.copy_(p.detach())

    def record_gradients(self, g: C.IterationGraph, opt: torch.optim.Optimizer, read: bool = True) -> None:
        """A ``Gradient`` node per parameter with a gradient, as ``opt.step()`` starts (``read``: the
        weights are as the backward pass read them, not yet updated)."""
        self.refresh()
        replaying = self.rec._replay.replaying
        if replaying is not None and self.rec._replay.replay_gradients(g, opt, replaying.trace):
            return
        grads: set[int] = set()
        # at "modules" a weight that no module call read is kept here as read: a compiled model's calls are
        # traced away, a ParameterList or ParameterDict is never called, a parent's own code reads a child's
        # weight (at an "ops" iteration recorded at a compiled model's boundary, the operators of graphs the
        # "tdbg" backend tapped read them; with any other backend no graph was tapped: as at "modules")
        coarse_modules = self.rec._level == LEVEL_MODULES and read and not self.rec._graph_nodes.tapped
        for grp in opt.param_groups:
            for p in grp["params"]:
                if p.grad is None:
                    continue
                grad = C.local(p.grad)
                pname = self.rec._param_name.get(id(p), f"param@{C.storage_ptr(C.local(p)):x}")
                name = g.once_name(f"{pname}.grad")
                same = None
                if self.rec._level == LEVEL_OPS:
                    src, _ = self.rec._tracker.source(grad, data=False)
                    same = self.rec._ops.same_bits(g, grad)      # AccumulateGrad keeps the backward op's output
                    rec = NodeRecord(name, "Gradient", "", inputs=[(src, "data")],
                                     outputs=[OutputType(C.dtype_name(grad.dtype), tuple(grad.shape))],
                                     kind=Kind.GRADIENT, param=pname, is_backward=True)
                    if g.value_of.get(src, src) in g.invariant:
                        g.invariant.add(name)
                else:
                    rec = self._coarse_gradient(g, name, pname, grad)
                g.nodes.append(rec)
                g.order.append(name)
                self.rec._tracker.register(grad, name)
                grads.add(C.storage_ptr(grad))
                if self.rec._want(self.leaf_module(C.Leaf(pname, Kind.GRADIENT, pname)), "Gradient"):
                    self.rec._capture(name, "Gradient", "output", 0, grad, exact=True,
                                  same=None if same is None else same[2])
                    if read and self._read_here(pname, coarse_modules):     # the weight as read (the step has not run: the
                        # capture at the previous step()'s end holds these bits, and is reused: see still_kept)
                        self.rec._capture(name, "Gradient", "input", len(rec.inputs) - 1, p, exact=True, reuse=True)
        self.grad_ptrs = grads

    def still_kept(self, t: torch.Tensor, hit: tuple[Any, ...]) -> bool:
        """Whether ``hit``, a capture kept for ``t``'s memory and version, still holds ``t``'s bits. A trained
        weight's is checked at its first reuse in an iteration against the copy taken at the last step()'s
        end (or the capture's own values): a write between the steps through ``.data`` (WGAN's
        ``p.data.clamp_(-c, c)``) bumps no version counter of the weight. Other leaves are trusted (Limits)."""
        ptr = C.storage_ptr(t)
        if ptr not in self.param_ptrs:
            return True
        key = self.key_of(t)
        if key in self.checked:
            return True
        was = self.before_step.get(key)
        now = t.detach()
        if was is not None and was.shape == now.shape and was.dtype == now.dtype:
            same = torch.equal(was, now)
        elif hit[0] is not None and now.device.type == "cpu" and now.dtype != torch.bfloat16:
            same = bool(np.array_equal(hit[0], C.host_view(now), equal_nan=now.is_floating_point()))
        else:
            same = False     # nothing to compare with at no cost: read anew
        if same:
            self.checked.add(key)
        return same

    def _read_here(self, pname: str, coarse_modules: bool) -> bool:
        """Whether the Gradient node keeps the weight's value as read: at "parameters" always; at "modules"
        when no module call captured it (a compiled model's calls, a ParameterList's weights, a weight
        read by its parent's code); otherwise the operators or module calls that read it do."""
        if self.rec._level == LEVEL_PARAMETERS:
            return True
        return coarse_modules and not self.rec._module_level.read_weight(pname)

    def _coarse_gradient(self, g: C.IterationGraph, name: str, pname: str, grad: torch.Tensor) -> NodeRecord:
        """A Gradient node where no operator is seen: made from every loss backward() started from and
        from the weight as the backward pass read it (its value as the iteration began: the previous value
        of the weight in a graph's first iteration, debugger.model.history); under DDP the all-reduced
        gradient, equal on every rank."""
        sources = [*g.losses, pname]
        ddp = isinstance(self.rec.model, torch.nn.parallel.DistributedDataParallel)
        if ddp:
            g.invariant.add(name)
        return NodeRecord(name, "Gradient", "", inputs=[(src, "data") for src in sources],
                          outputs=[OutputType(C.dtype_name(grad.dtype), tuple(grad.shape))],
                          kind=Kind.GRADIENT, param=pname, is_backward=True, is_collective=ddp,
                          value_inputs=tuple(sources))

    def late_gradients(self, g: C.IterationGraph) -> None:
        """At step(), the gradients of the optimizers whose step hooks did not run in this iteration but
        whose step did: an optimizer step inside ``torch.compile`` runs none (they step aside while
        Dynamo traces). A step skipped on purpose (a loss scaler's, on overflow) moves no step count."""
        # "ops" runs eagerly: its hooks ran whenever its optimizers stepped. The step count is read only
        # for an optimizer whose hooks did not run (a device count costs a synchronisation)
        silent = [opt for opt in self.rec.optimizers if id(opt) not in self.rec._stepped]
        if not silent or self.rec._level == LEVEL_OPS or not compiled_anything():
            return
        missed = [opt for opt in silent if self._step_moved(opt)]
        if not missed:
            return
        found = False
        for opt in missed:
            self.rec._stepped.add(id(opt))
            if any(p.grad is not None for grp in opt.param_groups for p in grp["params"]):
                self.record_gradients(g, opt, read=False)
                found = True
        self.rec._compile_notes.step_compiled(self.rec.iteration, found)

    def _step_moved(self, opt: torch.optim.Optimizer) -> bool:
        """Whether ``opt`` may have stepped since the last look: its state's step count moved, or it keeps
        none (SGD) and one of its weights moved since the last step() (without a copy to compare: taken as
        stepped, its gradients then read rather than lost; a step a loss scaler skipped moves none)."""
        count = next((st["step"] for st in opt.state.values() if "step" in st), None)
        count = None if count is None else float(count)
        before = self._step_counts.get(id(opt))
        self._step_counts[id(opt)] = count
        if count is None:
            return self._weights_moved(opt)
        return count != before

    def _weights_moved(self, opt: torch.optim.Optimizer) -> bool:
        """Whether a weight of ``opt`` differs from its copy at the last step() (True when one has none)."""
        for grp in opt.param_groups:
            for p in grp["params"]:
                local = C.local(p)
                was = self.before_step.get(self.key_of(local))
                if was is None or not torch.equal(was, local.detach()):
                    return True
        return False

    def tag_state(self, g: C.IterationGraph, opt: torch.optim.Optimizer) -> None:
        """The step's operators and inputs that made or updated ``opt``'s state: kind optimizer_state."""
        owners = optstate.state_owners(opt, self.rec._param_name)
        optstate.tag_state_ops(g.step_ops, owners, self.param_ptrs)
        ptr_of = {name: ptr for ptr, name in g.inputs_seen.items()}
        optstate.tag_state_inputs(((n, ptr_of[n.name]) for n in g.nodes[g.step_first:]
                                   if n.op_type == "Input" and n.name in ptr_of), owners)
        g.step_ops = []
