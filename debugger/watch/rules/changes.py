"""Rules over a tensor and its previous value: unchanged weights and the update ratio."""
from __future__ import annotations

import math

from ...errors import DumpError
from ...model import TensorRef, history
from ...stats.core import Stats
from ..batch import Batch
from ..compute import pair_mismatch
from ..registry import HISTORY, Watchpoint
from ..results import Hit, ScanResult
from .base import COUNTED, ByDesign, Check, Needs, NotApplicable, PerTensor, RunStart, add_error, add_hit, compare, has_param, unsupplied
from .stored import excess_from_update, stored_update, unchanged_from_statistics


class Chain(PerTensor):
    """Conditions over a tensor and its earlier values: the previous run of the graph (PREVIOUS) or
    the last dumped iterations (HISTORY)."""

    @staticmethod
    def earlier(wp: Watchpoint) -> int:
        """How many earlier values the chain holds."""
        return int(wp.setting("num_steps")) - 1 if wp.condition.needs == HISTORY else 1

    def plan_check(self, chk: Check, batch: Batch) -> bool:
        """Find the earlier values; ask for element-wise comparisons where both sides have values."""
        chain = self.chain(chk)
        if chain is None:
            return True
        chk.extra = chain[1:]
        rtol = chk.wp.params.get("rtol")
        for a, b in zip(chain, chain[1:]):
            if a.source.has_values and b.source.has_values:
                batch.want_pair(a, b, rtol)
            else:
                batch.want_stats(a)
                batch.want_stats(b)
        return True

    def chain(self, chk: Check) -> list[TensorRef] | None:
        """[this, previous, ...] (:func:`debugger.model.history.earlier_values`): the previous runs of the graph
        (PREVIOUS), or the last num_steps dumped iterations (HISTORY, as SageMaker); None with
        ``chk.error`` set when an earlier value is missing."""
        count = self.needs(chk.wp).earlier + 1
        dumped = chk.wp.condition.needs == HISTORY
        spans: list[int] = []
        chain, why = history.earlier_values(chk.step.rank, chk.ref, count, dumped=dumped, spans=spans)
        if chain is None:
            # the run's first step, or a tensor's first (a layer added mid-run), has nothing before it to
            # compare with: no gap in the dump
            chk.error = RunStart(why) if history.first_value(chk.step.rank, chk.ref) else why
        chk.steps = max(spans, default=1)
        return chain

    def needs(self, wp: Watchpoint) -> Needs:
        """The counts of every value of the chain; the values where a pair is compared element-wise."""
        return Needs(COUNTED, earlier=self.earlier(wp))

    def ready(self, chk: Check, batch: Batch, out: ScanResult, needs: Needs | None = None) -> Stats | None:
        """The current value's statistics when every value of the chain is finite and readable."""
        needs = needs or self.needs(chk.wp)
        stats = self.usable(chk, chk.ref, batch, out, needs)
        if stats is None:
            return None
        for older in chk.extra:
            _, problem = self.checked(older, batch, needs, "previous value: ")
            if problem:
                add_error(out, chk.wp, chk.step, chk.ref.node, problem)
                return None
        return stats


class Unchanged(Chain):
    """allclose of a tensor with its earlier values: every |cur - prev| <= atol + rtol * |prev|.

    From values when both sides have them; otherwise equal digests mean no change at all, and
    statistics can prove a change too large (see :func:`unchanged_from_statistics`).
    """

    def evaluate_check(self, chk: Check, batch: Batch, out: ScanResult) -> None:
        """Hit when every pair of the chain is within tolerance."""
        if self.ready(chk, batch, out) is None:
            return
        wp = chk.wp
        rtol, atol = wp.setting("rtol"), wp.setting("atol")
        chain = [chk.ref] + chk.extra
        excess: list[float | None] = []    # per pair: max(|d| - rtol*|p|), or None when undecided
        undecided: str | None = None
        for a, b in zip(chain, chain[1:]):
            if a.source.has_values and b.source.has_values:
                p = batch.pair_results[(a.identity, b.identity)]
                if p.error:
                    add_error(out, wp, chk.step, chk.ref.node, p.error)
                    return
                excess.append(p.excess.get(rtol, math.inf))
                continue
            try:
                mismatch = pair_mismatch(a.source, b.source)
                verdict, why = (None, None) if mismatch else self._from_statistics(a, b, batch, rtol, atol)
            except DumpError as exc:
                mismatch = str(exc)
            if mismatch:
                add_error(out, wp, chk.step, chk.ref.node, mismatch)
                return
            if isinstance(verdict, float):     # the excess itself, from stored update statistics
                excess.append(verdict)
                continue
            excess.append(None if verdict is None else (0.0 if verdict else math.inf))
            undecided = undecided or why
        if any(e is not None and e > atol for e in excess):
            return           # some step changed by more than the tolerance: what values would say
        if undecided:
            add_error(out, wp, chk.step, chk.ref.node, undecided)
            return
        worst = max(max(e or 0.0, 0.0) for e in excess)
        th = {"atol": atol, "rtol": rtol}
        if wp.condition.needs == HISTORY:
            th["num_steps"] = float(len(chain))
        over = chk.steps > 1 and stored_update(chk.ref, chk.extra[0]) is None
        note = f"unchanged over {chk.steps} iterations (the dump holds none between)" if over else ""
        add_hit(out, wp, chk.order, chk.step, chk.ref, {"atol": worst}, th, note)

    @staticmethod
    def _from_statistics(cur: TensorRef, prev: TensorRef, batch: Batch, rtol: float,
                         atol: float) -> tuple[bool | float | None, str | None]:
        """(allclose verdict, or the excess max(|d| - rtol |p|) when stored update statistics give it;
        why it is undecided) for two comparable tensors, one without values."""
        hc, hp = cur.source.header(), prev.source.header()
        dc, dp = cur.source.digest(), prev.source.digest()
        same = dc is not None and dc == dp and hc.dtype == hp.dtype
        sc, _ = batch.stats(cur)
        sp, _ = batch.stats(prev)
        assert sc is not None and sp is not None   # ready() checked them
        update = stored_update(cur, prev)
        excess = None if update is None or same else excess_from_update(update, sp, rtol, atol)
        if excess is not None:
            return excess, None
        verdict = unchanged_from_statistics(sc, sp, hc.size, same, rtol, atol)
        if verdict is not None:
            return verdict, None
        if dc is not None and dp is not None:
            return None, NotApplicable("digests differ but statistics cannot tell whether the change is "
                                       "within tolerance")
        lacking = cur if not cur.source.has_values else prev
        lack = unsupplied(batch, lacking, values=True)
        return None, lack if lacking is cur else f"previous value: {lack}"


class UpdateRatio(Chain):
    """mean|cur - prev| / (mean|prev| + epsilon) against thresholds; needs the values of both."""

    def needs(self, wp: Watchpoint) -> Needs:
        """The values of both: mean|cur - prev| is not a function of the two tensors' statistics."""
        return Needs(COUNTED | {"zeros", "abs_mean"}, values=True, earlier=1)

    def evaluate_check(self, chk: Check, batch: Batch, out: ScanResult) -> None:
        """Hit when the ratio crosses a threshold; an all-zero previous value has no ratio."""
        update = stored_update(chk.ref, chk.extra[0]) if chk.extra else None
        if update is not None and "update_abs_mean" in update:
            # the update statistics stored with the weight stand in for the values of both
            if self.ready(chk, batch, out, Needs(COUNTED | {"zeros", "abs_mean"}, earlier=1)) is None:
                return
            diff_abs_mean: float | None = update["update_abs_mean"]
        else:
            if chk.steps > 1:      # the change over several steps is not one step's update: never shown as one
                add_error(out, chk.wp, chk.step, chk.ref.node, NotApplicable(
                    f"the previous value in the dump is {chk.steps} iterations earlier (those between were not "
                    "dumped, nor the value before this step's update): one step's update cannot be told"))
                return
            if self.ready(chk, batch, out) is None:
                return
            pair = batch.pair_results[(chk.ref.identity, chk.extra[0].identity)]
            if pair.error:
                add_error(out, chk.wp, chk.step, chk.ref.node, pair.error)
                return
            diff_abs_mean = pair.diff_abs_mean
        wp = chk.wp
        prev_stats, _ = batch.stats(chk.extra[0])
        assert prev_stats is not None
        if prev_stats.zeros == prev_stats.count:
            # epsilon guards the division; it is not meant to turn a zero-initialised bias into a hit
            add_error(out, wp, chk.step, chk.ref.node,
                      ByDesign("previous value is all zero (a zero-initialised bias): update ratio undefined"))
            return
        ratio = (diff_abs_mean or 0.0) / ((prev_stats.abs_mean or 0.0) + wp.setting("epsilon"))
        if has_param(wp.condition, "large_threshold"):
            large, small = wp.setting("large_threshold"), wp.setting("small_threshold")
            if ratio > large:
                add_hit(out, wp, chk.order, chk.step, chk.ref, {"large_threshold": ratio}, {"large_threshold": large})
            elif ratio < small:
                add_hit(out, wp, chk.order, chk.step, chk.ref, {"small_threshold": ratio}, {"small_threshold": small})
            return
        hits = len(out.hits)
        compare(out, chk, {"abs_mean_update_ratio": ratio})
        if len(out.hits) > hits:
            _edited_between_steps(chk, batch, out.hits[-1])


def _edited_between_steps(chk: Check, batch: Batch, hit: Hit) -> None:
    """A weight that its iteration's forward pass already read that far from the previous iteration's end
    was changed between the steps, outside the optimizer (a weight scaled by hand, a checkpoint loaded
    wrong): the cause of what its step then does to the other weights (an unadapted optimizer such as RAdam's
    first steps or SGD moves them by as much), so its hit is placed before the iteration's operators and
    says so. The change between the steps is bounded below by |mean|read| - mean|prev||, from statistics."""
    limit = hit.threshold.get("abs_mean_update_ratio_gt")
    prev = chk.extra[0] if chk.extra else None
    if limit is None or prev is None or prev.iteration >= chk.ref.iteration:
        return
    read = history.value_before_update(chk.step.rank, chk.ref)
    if read is None:
        return
    now, _ = batch.stats_now(read)
    then, _ = batch.stats(prev)
    if now is None or then is None or now.abs_mean is None or then.abs_mean is None:
        return
    between = abs(now.abs_mean - then.abs_mean) / (then.abs_mean + chk.wp.setting("epsilon"))
    if between > limit:
        hit.position = -1
        hit.note = (f"changed between iterations {prev.iteration} and {chk.ref.iteration}, outside the optimizer: "
                    f"the forward pass read it at an update ratio of at least {between:.4g} from its value at the "
                    f"end of iteration {prev.iteration}")
