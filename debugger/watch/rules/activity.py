"""The per-unit activity rule: units (channels, neurons) active on too few samples."""
from __future__ import annotations

import math

from ..batch import Batch
from ..registry import Watchpoint
from ..results import ScanResult
from ..select import activation
from .base import ACTIVE_INPUT, COUNTED, Check, Needs, PerTensor, add_error, add_hit


class UnitActivity(PerTensor):
    """The share of a layer's units (all axes but the batch axis) active on too few samples."""

    def needs(self, wp: Watchpoint) -> Needs:
        """The values, unit by unit."""
        return Needs(COUNTED, values=True)

    def plan_check(self, chk: Check, batch: Batch) -> bool:
        """tanh/sigmoid: the pre-activation inside the active range; ReLU: the output positive."""
        ref = chk.ref
        op = activation(ref, chk.step.graph)
        thr = chk.wp.setting("threshold_inactivity")
        if op in ACTIVE_INPUT:
            lo, hi = ACTIVE_INPUT[op]
            src = chk.step.tmap.get((ref.node, "input", 0))
            if src is None:  # no pre-activation dumped: map the input range through the function
                f = (lambda v: 1.0 / (1.0 + math.exp(-v))) if op == "sigmoid" else math.tanh
                lo, hi, src = f(lo), f(hi), ref
            chk.extra = [src]
            chk.units = ("inside", lo, hi, thr)
        else:
            chk.extra = [ref]
            chk.units = ("positive", 0.0, 0.0, thr)
        batch.want_stats(chk.extra[0], units=[chk.units])
        return True

    def evaluate_check(self, chk: Check, batch: Batch, out: ScanResult) -> None:
        """Hit on the tensor checked (the input of tanh/sigmoid) when too many units are inactive."""
        src = chk.extra[0]
        if self.usable(chk, src, batch, out, self.needs(chk.wp)) is None:
            return
        res = batch.file_results[src.identity]
        if res.error:
            add_error(out, chk.wp, chk.step, chk.ref.node, res.error)
            return
        pct = res.units.get(chk.units) if chk.units is not None else None
        thr = chk.wp.setting("threshold_layer")
        if pct is not None and pct > thr:
            add_hit(out, chk.wp, chk.order, chk.step, src, {"threshold_layer": pct}, {"threshold_layer": thr})
