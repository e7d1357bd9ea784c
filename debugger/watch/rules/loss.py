"""The loss-history rule: a loss that stops falling, or rises, over the iterations."""
from __future__ import annotations

from ..batch import Batch
from ..registry import Watchpoint
from ..results import ScanResult
from .base import COUNTED, Check, Needs, PerTensor, add_error, add_hit, nonfinite_text, unsupplied


class LossHistory(PerTensor):
    """The loss now against the dumped iteration at least num_steps earlier."""

    def needs(self, wp: Watchpoint) -> Needs:
        """The means (and counts) of both."""
        return Needs(COUNTED | {"mean"}, earlier=1)

    def plan_check(self, chk: Check, batch: Batch) -> bool:
        """Find the earlier loss."""
        rank, gid, ref = chk.step.rank, chk.step.gid, chk.ref
        n = int(chk.wp.setting("num_steps"))
        earlier = [i for i in rank.iterations(gid) if i <= chk.step.iteration - n]
        if not earlier:
            chk.error = f"no dumped iteration {n} or more iterations earlier"
            return True
        prev = rank.tensor_map(gid, max(earlier)).get(ref.key)
        if prev is None:
            chk.error = f"no loss value in iteration {max(earlier)}"
            return True
        chk.extra = [prev]
        batch.want_stats(prev)
        batch.want_stats(ref)
        return True

    def evaluate_check(self, chk: Check, batch: Batch, out: ScanResult) -> None:
        """Hit when the loss fell by at most diff_percent %."""
        wp = chk.wp
        needs = self.needs(wp)
        stats = self.usable(chk, chk.ref, batch, out, needs)
        if stats is None:
            return
        then, err = batch.stats(chk.extra[0])
        lack = None if err or then is None else unsupplied(batch, chk.extra[0], needs.statistics)
        if lack:
            add_error(out, wp, chk.step, chk.ref.node, "earlier " + lack)
            return
        if err or then is None or then.mean is None or stats.mean is None:
            add_error(out, wp, chk.step, chk.ref.node, err or "no loss value")
            return
        if then.has_nonfinite:
            add_error(out, wp, chk.step, chk.ref.node, "earlier " + nonfinite_text(then))
            return
        decrease = 100.0 * (then.mean - stats.mean) / (abs(then.mean) or 1.0)
        d = wp.setting("diff_percent")
        if decrease <= d:
            add_hit(out, wp, chk.order, chk.step, chk.ref, {"diff_percent": decrease}, {"diff_percent": d})
