"""Rules that compare one tensor's statistics with thresholds: non-finite values, the comparisons of
the registry's conditions, value ranges, saturation, initial weights."""
from __future__ import annotations

import math

from ...model import TensorRef
from ...stats.core import Stats
from ..batch import Batch
from ..registry import Watchpoint
from ..results import ScanResult
from ..select import activation
from .base import (
    COUNTED,
    NONFINITE,
    READS,
    Check,
    Needs,
    PerTensor,
    add_error,
    add_hit,
    compare,
    has_param,
    nonfinite_counts,
    unsupplied,
    value_before_update,
)
from .stored import stored_saturation


class NonFinite(PerTensor):
    """Hits a tensor with NaN or +-Inf (only NaN when ``only_nan`` is set)."""

    def needs(self, wp: Watchpoint) -> Needs:
        """The three counts."""
        return Needs(NONFINITE)

    def evaluate_check(self, chk: Check, batch: Batch, out: ScanResult) -> None:
        """Hit when the counts say so."""
        stats, err = batch.stats(chk.ref)
        if err or stats is None:
            add_error(out, chk.wp, chk.step, chk.ref.node, err or "no statistics")
            return
        lack = unsupplied(batch, chk.ref, self.needs(chk.wp).statistics)
        if lack:
            add_error(out, chk.wp, chk.step, chk.ref.node, lack)
            return
        only_nan = has_param(chk.wp.condition, "only_nan") and chk.wp.setting("only_nan") >= 0.5
        if stats.nan or (not only_nan and stats.has_nonfinite):
            add_hit(out, chk.wp, chk.order, chk.step, chk.ref, nonfinite_counts(stats), {})


class StatisticComparisons(PerTensor):
    """Comparisons of statistics with thresholds (``max_gt``, ``zero_percentage_ge``...)."""

    def needs(self, wp: Watchpoint) -> Needs:
        """The statistics the set comparisons read and the counts; values for range_percentage."""
        stats = set(COUNTED)
        for p, _ in wp.comparisons():
            stats |= READS.get(p.statistic or "", set())
        return Needs(frozenset(stats), values=any(p.statistic not in READS for p, _ in wp.comparisons()))

    def subject(self, chk: Check) -> TensorRef:
        """The tensor whose statistics are compared."""
        return chk.ref

    def evaluate_check(self, chk: Check, batch: Batch, out: ScanResult) -> None:
        """Hit when any set comparison holds; report those only."""
        ref = self.subject(chk)
        stats = self.usable(chk, ref, batch, out, self.needs(chk.wp))
        if stats is None:
            return
        values = {"abs_mean": stats.abs_mean, "max": stats.max, "min": stats.min, "mean": stats.mean,
                  "zero_percentage": None if stats.zeros is None else stats.zero_percentage,
                  "max_min": None if stats.max is None or stats.min is None else stats.max - stats.min}
        values.update(self.more_values(chk, batch, stats))
        # weight_initialization compares the value before the first update (a forward kernel's input)
        # but the hit is the weight's: node, kind and param name the weight
        compare(out, chk, values)

    def more_values(self, chk: Check, batch: Batch, stats: Stats) -> dict[str, float | None]:
        """Values of comparisons beyond the plain statistics."""
        return {}


class Range(StatisticComparisons):
    """Statistic comparisons plus the share of values inside [range_start_inclusive, range_end_inclusive]."""

    @staticmethod
    def bounds(wp: Watchpoint) -> tuple[float, float]:
        """The closed range (open ends are infinite)."""
        return wp.params.get("range_start_inclusive", -math.inf), wp.params.get("range_end_inclusive", math.inf)

    def plan_check(self, chk: Check, batch: Batch) -> bool:
        """The range count is asked for only when a range_percentage comparison is set."""
        batch.want_stats(chk.ref, ranges=[self.bounds(chk.wp)] if self.needs(chk.wp).values else ())
        return True

    def more_values(self, chk: Check, batch: Batch, stats: Stats) -> dict[str, float | None]:
        """range_percentage = 100 * count(lo <= x <= hi) / N."""
        count = batch.file_results[chk.ref.identity].ranges.get(self.bounds(chk.wp))
        return {"range_percentage": None if count is None else 100.0 * count / stats.count}


class Saturated(StatisticComparisons):
    """The share of a tanh/sigmoid layer's outputs within ``tolerance`` of an asymptote."""

    ASYMPTOTES = {"tanh": (-1.0, 1.0), "sigmoid": (0.0, 1.0)}

    def needs(self, wp: Watchpoint) -> Needs:
        """Counts of values near the asymptotes: the values themselves."""
        return Needs(frozenset(COUNTED), values=True)

    def ranges(self, chk: Check) -> list[tuple[float, float]]:
        """The two closed ranges next to the asymptotes of the layer's function."""
        lo, hi = self.ASYMPTOTES[activation(chk.ref, chk.step.graph)]
        tol = chk.wp.setting("tolerance")
        return [(lo, lo + tol), (hi - tol, hi)]

    def plan_check(self, chk: Check, batch: Batch) -> bool:
        """Ask for the two counts (a non tanh/sigmoid op of the activation kind does not apply)."""
        if activation(chk.ref, chk.step.graph) not in self.ASYMPTOTES:
            return False
        batch.want_stats(chk.ref, ranges=self.ranges(chk))
        return True

    def evaluate_check(self, chk: Check, batch: Batch, out: ScanResult) -> None:
        """From the values; a statistics-only output from the count stored at the same tolerance."""
        near = stored_saturation(chk.ref, chk.wp.setting("tolerance"))
        if near is None:
            super().evaluate_check(chk, batch, out)
            return
        stats = self.usable(chk, chk.ref, batch, out, Needs(frozenset(COUNTED)))
        if stats is not None and stats.count:
            compare(out, chk, {"saturated_percentage": 100.0 * near / stats.count})

    def more_values(self, chk: Check, batch: Batch, stats: Stats) -> dict[str, float | None]:
        """saturated_percentage = 100 * (count near the lower + count near the upper asymptote) / N."""
        got = batch.file_results[chk.ref.identity].ranges
        counts = [got.get(r) for r in self.ranges(chk)]
        if any(c is None for c in counts) or not stats.count:
            return {"saturated_percentage": None}
        return {"saturated_percentage": 100.0 * sum(counts) / stats.count}   # type: ignore[arg-type]


class InitialWeights(StatisticComparisons):
    """Statistic comparisons on a weight's value before its first update, in the first iteration its graph ran."""

    def plan_check(self, chk: Check, batch: Batch) -> bool:
        """Only the first run of the graph; the value the forward kernels read, else the weight's own."""
        if chk.step.rank.previous_iteration(chk.step.gid, chk.step.iteration) is not None:
            return False
        src = value_before_update(chk) or chk.ref
        chk.extra = [src]
        batch.want_stats(src)
        return True

    def subject(self, chk: Check) -> TensorRef:
        """The value before the update."""
        return chk.extra[0]
