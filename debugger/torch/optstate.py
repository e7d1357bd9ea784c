"""Which operators of an optimizer step made or updated the optimizer's state, from ``opt.state``.

Inside ``opt.step()`` an optimizer makes its state (``zeros_like`` for Adam's moments, ``clone`` for
SGD's momentum buffer, ``full_like`` for Adagrad's sum, ``torch.tensor`` step counters) and updates it
in place (``mul_``, ``lerp_``, ``addcmul_``, ``_foreach_*``, one element of a fused kernel). At the
step post-hook ``opt.state[p]`` names every state tensor of every parameter; an operator of the step
whose output lives in the storage of a state tensor of ``p`` (and writes no parameter: that is the
update kernel) is that state, of ``p``. A storage address is only trusted from the last operator
that allocated it on: memory freed earlier in the step may have been reused by the state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch

from ..formats.records import Kind, NodeRecord
from . import capture as C


@dataclass
class StepOp:
    """One operator (one list element) run inside ``opt.step()``."""

    record: NodeRecord
    out_ptrs: tuple[int, ...]     # storages of what it returned or wrote
    fresh: bool                   # it allocated its output (no output storage among its inputs')


def state_owners(opt: torch.optim.Optimizer, param_name: dict[int, str]) -> dict[int, str]:
    """Storage address of every state tensor -> name of the parameter it belongs to."""
    owners: dict[int, str] = {}
    for p, st in opt.state.items():
        pname = param_name.get(id(p))
        if pname is None:
            continue
        for v in st.values():
            v = C.local(v)
            if isinstance(v, torch.Tensor) and C.is_plain(v):
                ptr = C.storage_ptr(v)
                if ptr:
                    owners[ptr] = pname
    return owners


def tag_state_ops(ops: Iterable[StepOp], owners: dict[int, str], param_ptrs: set[int]) -> int:
    """Mark the step's operators that made or updated a state tensor: kind optimizer_state, its
    parameter. Returns how many were marked."""
    ops = list(ops)
    # the last allocation at each state address: earlier users of that memory were other tensors
    since: dict[int, int] = {}
    for i, op in enumerate(ops):
        if op.fresh:
            for ptr in op.out_ptrs:
                if ptr in owners:
                    since[ptr] = i
    marked = 0
    for i, op in enumerate(ops):
        if any(p in param_ptrs for p in op.out_ptrs):
            continue        # the update kernel (it writes the weight, maybe the state too)
        owner = next((owners[p] for p in op.out_ptrs if p in owners and i >= since.get(p, 0)), None)
        if owner is not None:
            op.record.kind = Kind.OPTIMIZER_STATE
            op.record.param = owner
            marked += 1
    return marked


def tag_state_inputs(leaves: Iterable[tuple[NodeRecord, int]], owners: dict[int, str]) -> None:
    """Tensors the step read that no operator made (step counters made by ``torch.tensor``), first
    seen inside the step and living in a state tensor's storage: that state, of its parameter."""
    for rec, ptr in leaves:
        owner = owners.get(ptr)
        if owner is not None:
            rec.kind = Kind.OPTIMIZER_STATE
            rec.param = owner
