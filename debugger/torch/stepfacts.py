"""Facts about an iteration's optimizer steps: which weights' optimizer did not step, and whether a
loss scaler (``torch.amp.GradScaler``) checked the gradients, which is why a step is skipped."""
from __future__ import annotations

from typing import Collection, Iterable, Sequence

import torch

from ..formats.records import IterationFacts, Kind, NodeRecord

# the kernel GradScaler.unscale_ runs to find NaN/Inf in the scaled gradients (it then skips step())
LOSS_SCALER_CHECK = "_amp_foreach_non_finite_check_and_unscale_"


def iteration_facts(optimizers: Sequence[torch.optim.Optimizer], stepped: set[int], names: dict[int, str],
                    nodes: Iterable[NodeRecord], lr_zero: Collection[int] = ()) -> IterationFacts | None:
    """The facts of an iteration in which the optimizers whose ids are in ``stepped`` ran ``step()``, those in
    ``lr_zero`` with learning rate 0 in every group; None when every optimizer stepped with a learning rate
    and no loss scaler ran (nothing to say)."""
    def weights(opts: Iterable[torch.optim.Optimizer]) -> frozenset[str]:
        return frozenset(names.get(id(p), f"param@{id(p):x}") for opt in opts for grp in opt.param_groups
                         for p in grp["params"])

    not_stepped = weights(opt for opt in optimizers if id(opt) not in stepped)
    at_zero = weights(opt for opt in optimizers if id(opt) in stepped and id(opt) in lr_zero)
    scaler = any(n.op_type == LOSS_SCALER_CHECK for n in nodes)
    if not not_stepped and not scaler and not at_zero:
        return None
    return IterationFacts(not_stepped, scaler, at_zero)


def steps_at_lr_zero(opt: torch.optim.Optimizer) -> bool:
    """Whether ``opt`` is about to step with learning rate 0 in every parameter group (a warm-up from 0:
    its weights are not meant to move; a group at 0 beside groups that train is a finding, not this)."""
    groups = opt.param_groups
    return bool(groups) and all(_is_zero(g.get("lr")) for g in groups)


def _is_zero(lr: object) -> bool:
    if isinstance(lr, torch.Tensor):     # a tensor learning rate (capturable, compiled schedules)
        return lr.numel() == 1 and bool(lr.detach().eq(0).all())
    return isinstance(lr, (int, float)) and lr == 0


def mark_loss_scaler(nodes: list[NodeRecord]) -> None:
    """The loss scaler's check unscales the gradients in place and writes its found-inf flag: its
    inputs get the roles of an optimizer kernel's (so its in-place outputs are not checked again),
    and the flag, made zero each step, is the scaler's state, not a computed tensor."""
    by_name = {n.name: n for n in nodes}
    for n in nodes:
        if n.op_type != LOSS_SCALER_CHECK or len(n.inputs) < 3:
            continue
        n.input_roles = ("gradient", "state", "hyper") + ("hyper",) * (len(n.inputs) - 3)
        src = by_name.get(n.inputs[1][0])
        for _ in range(4):      # torch.full(0.0), then its copy to the gradients' device
            if src is None or src.kind not in ("other", "input"):
                break
            src.kind = Kind.OPTIMIZER_STATE
            src = by_name.get(src.inputs[0][0]) if len(src.inputs) == 1 else None
