"""Condition rules: each plans what its checks need from the dump and evaluates them.

A rule is named by the registry's ``Condition.rule``. It declares what it reads from each tensor
(named statistics, the values, previous iterations, per-unit values); when a dump cannot supply
that, for instance because it stores statistics only, the check is an error record that says what
is missing, never a hit and never a silent pass.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Iterable, Union

from ..errors import DumpError
from ..formats.records import Kind
from ..model import history
from ..model.graph import Graph
from ..model.locate import position, user_location
from ..model import Rank, TensorRef
from ..stats.core import STAT_NAMES, Stats
from .batch import Batch
from .bookkeeping import BOOKKEEPING, BOOKKEEPING_RULES, bookkeeping
from .compute import UnitSpec, pair_mismatch
from .coverage import Coverage
from .registry import HISTORY, OPS, Condition, Watchpoint
from .results import ErrorRecord, Hit, ScanResult
from .select import activation, matches
from .undumped import NOT_IN_DUMP

NONFINITE = frozenset({"nan", "pos_inf", "neg_inf"})
# The non-finite rule and the empty-tensor rule that every value condition applies first.
COUNTED = NONFINITE | {"count"}
# The statistics each comparison reads; range_percentage and the update ratio need values.
_READS = {"abs_mean": {"abs_mean"}, "max": {"max"}, "min": {"min"}, "mean": {"mean"},
          "zero_percentage": {"zeros", "count"}, "max_min": {"max", "min"}}
# Element counts stay exact beside NaN/Inf: a check reading only these (the zero share of
# tensor_all_zero) is answered on a tensor that holds some, such as attention scores masked with -inf.
_COUNTS = COUNTED | {"zeros", "positives", "negatives"}
# SageMaker's non-saturated input ranges of tanh and sigmoid.
_ACTIVE_INPUT = {"tanh": (-9.4999, 9.4999), "sigmoid": (-23.0, 16.99999)}


# -- what rules plan over ----------------------------------------------------------------------
@dataclass
class Step:
    """One (rank, graph, iteration) of a scan: its floating-point tensors and the checks planned on them."""

    rank: Rank
    gid: int
    graph: Graph | None
    iteration: int
    tmap: dict[tuple[str, str, int], TensorRef]
    floats: list[TensorRef]                      # the floating-point tensors selected (--where applied)
    outputs: dict[str, list[TensorRef]] = field(default_factory=dict)   # floating outputs by node kind
    planned: list["Planned"] = field(default_factory=list)
    coverage: dict[int, Coverage] = field(default_factory=dict)     # by watchpoint order: what it met
    swept: list[TensorRef] = field(default_factory=list)     # what the non-finite sweep reads (watch/sweep.py)
    inputs_of: dict[str, list[TensorRef]] | None = None      # node -> its captured inputs (watch/zeros.py)
    undumped: dict[str, list[TensorRef]] = field(default_factory=dict)  # the graph's outputs no file holds, by kind


@dataclass
class Check:
    """One watchpoint on one tensor, with the other tensors it compares with."""

    wp: Watchpoint
    order: int
    step: Step
    ref: TensorRef
    extra: list[TensorRef] = field(default_factory=list)   # previous values, history, initial value, unit source
    error: str | None = None
    units: UnitSpec | None = None   # the unit-activity spec this check asked for
    steps: int = 1      # training steps between two values of its chain: over iterations the dump lacks, more


@dataclass
class Search:
    """One overflow watchpoint over every selected tensor of a step."""

    wp: Watchpoint
    order: int
    step: Step
    refs: list[TensorRef]
    left_out: list[str] = field(default_factory=list)    # bookkeeping nodes not searched (watch/bookkeeping.py)


Planned = Union[Check, Search]


@dataclass(frozen=True)
class Needs:
    """What a watchpoint reads from each tensor it looks at."""

    statistics: frozenset[str] = frozenset()   # names of debugger.stats.STAT_NAMES
    values: bool = False                       # the values themselves (range counts, differences, units)
    earlier: int = 0                           # earlier values of the same tensor it compares with


# -- findings -------------------------------------------------------------------------------------
def add_hit(out: ScanResult, wp: Watchpoint, order: int, step: Step, ref: TensorRef, actual: dict[str, float],
            threshold: dict[str, float], note: str = "") -> Hit:
    """Record a hit on ``ref``, located in its graph."""
    hit = make_hit(wp.name, order, step, ref, actual, threshold, note)
    out.hits.append(hit)
    return hit


def make_hit(name: str, order: int, step: Step, ref: TensorRef, actual: dict[str, float],
             threshold: dict[str, float], note: str = "") -> Hit:
    """A hit of the watchpoint ``name`` on ``ref``, located in its graph (not recorded)."""
    g = step.graph
    return Hit(
        name, step.rank.rank, step.gid, step.iteration, ref.node, ref.kind, ref.param, ref.io, ref.slot,
        actual, threshold, user_location(g, ref.node) if g is not None else None,
        position(g, ref.node) if g is not None and ref.node in g else 0, ref.op_type, order,
        g is not None and ref.node in g and g.node(ref.node).is_collective, tuple(p.rank for p in ref.pieces),
        note)


class NotApplicable(str):
    """Why a rule does not apply to a tensor (not why it failed): said once in the scan's summary.

    A prefix added in front keeps the type (``"previous value: " + reason``), so every path that
    passes the reason on reports it as such.
    """

    def __radd__(self, other: str) -> "NotApplicable":
        return type(self)(str.__add__(other, self))


class ByDesign(NotApplicable):
    """A check that does not apply by design (a loop's bookkeeping, a constant mask, an undefined ratio):
    not a gap in what the dump holds, so it leaves the scan's coverage whole (watch/coverage.py)."""


class RunStart(str):
    """Why a check of the run's first step could not run (it has no previous value): an error record like
    any, but no gap in the scan's coverage, since no dump could hold more."""


def add_error(out: ScanResult, wp: Watchpoint, step: Step, node: str, msg: str) -> None:
    """Record that a watchpoint could not be checked on a node, and why (a rule that does not apply is
    counted in ``out.skipped`` instead, once per watchpoint and reason)."""
    out.pending.append(msg)      # the check's coverage (watch/run.py tallies it)
    if isinstance(msg, NotApplicable):
        out.skip(wp.name, str(msg), step.rank.rank, step.iteration, node, gap=not isinstance(msg, ByDesign))
        return
    order = next((i for i, w in enumerate(out.watchpoints) if w is wp), 0)   # which one, when two share a name
    out.errors.append(ErrorRecord(wp.name, step.rank.rank, step.iteration, node, msg, step.gid, order))


def nonfinite_text(s: Stats) -> str:
    """``tensor contains 2 NaN, 1 +Inf``."""
    parts = [f"{n} {w}" for n, w in ((s.nan, "NaN"), (s.pos_inf, "+Inf"), (s.neg_inf, "-Inf")) if n]
    return "tensor contains " + ", ".join(parts)


def nonfinite_counts(s: Stats) -> dict[str, float]:
    """The ``actual`` of a non-finite hit."""
    return {"nan": float(s.nan), "pos_inf": float(s.pos_inf), "neg_inf": float(s.neg_inf)}


def unsupplied(batch: Batch, ref: TensorRef, statistics: Iterable[str] = (), values: bool = False) -> str | None:
    """What a statistics-only tensor lacks for a check (None when it has values or every statistic named)."""
    if ref.source.has_values:
        return None
    have = batch.names(ref)
    held = ", ".join(have) or "none"
    if values:
        return NotApplicable(f"needs tensor values; this dump holds statistics only: {held}")
    wanted = set(statistics)
    lacking = [n for n in STAT_NAMES if n in wanted and n not in have]
    if not lacking:
        return None
    plural = "s" if len(lacking) > 1 else ""
    return NotApplicable(f"needs statistic{plural} {', '.join(lacking)}; this dump holds statistics only: {held}")


def _counts_only(needs: Needs) -> bool:
    """Whether a check reads element counts only (a zero share), which NaN/Inf beside them leave exact."""
    return "zeros" in needs.statistics and needs.statistics <= _COUNTS and not needs.values and not needs.earlier


# -- the rule statistics can decide for unchanged tensors ----------------------------------------------
def change_lower_bound(cur: Stats, prev: Stats, n: int) -> float | None:
    """A lower bound on max|cur - prev| from statistics alone (None when no pair of them is known).

    Each term is at most max|d|: the max and the min of two tensors cannot move further apart than
    their largest element difference, |mean(cur) - mean(prev)| = |mean(d)|, and by the triangle
    inequality |l2(cur) - l2(prev)| <= l2(d) <= sqrt(n) * max|d|.
    """
    terms = [abs(a - b) for a, b in ((cur.max, prev.max), (cur.min, prev.min), (cur.mean, prev.mean))
             if a is not None and b is not None]
    if cur.l2norm is not None and prev.l2norm is not None and n > 0:
        terms.append(abs(cur.l2norm - prev.l2norm) / math.sqrt(n))
    return max(terms) if terms else None


def unchanged_from_statistics(cur: Stats, prev: Stats, n: int, same_digest: bool, rtol: float,
                              atol: float) -> bool | None:
    """Whether every |cur - prev| <= atol + rtol * |prev|, decided without values.

    True for equal digests (the change is exactly 0). False when the statistics prove the change
    larger: max(|d| - rtol * |p|) >= max|d| - rtol * max|p|, so a lower bound of max|d| with
    rtol * max|p| taken off that still exceeds atol settles it. None when they cannot tell.
    """
    if same_digest:
        return True
    bound = change_lower_bound(cur, prev, n)
    if bound is None or prev.max is None or prev.min is None:
        return None
    if bound - rtol * max(abs(prev.max), abs(prev.min)) > atol:
        return False
    return None


# -- statistics a dump stores to answer a watchpoint without values (debugger.stats.EXTRA_STAT_NAMES) --
def stored_update(cur: TensorRef, prev: TensorRef) -> dict[str, float] | None:
    """The update statistics stored with a statistics-only ``cur``, when they were taken against the
    value ``prev`` holds: the same tensor at the end of the iteration before, or the value this
    iteration's forward pass read before the update; or the same weight at an earlier run of its graph
    when ``cur``'s own update is stored (the recorder takes it against the iteration before, whatever
    graph that iteration ran: a step whose operators differ, the first one that creates the optimizer's
    state, is another graph). None otherwise: another previous value."""
    if cur.source.has_values:
        return None
    extras = dict(cur.source.stored_extras())
    if "update_max" not in extras:
        return None
    same = (prev.iteration < cur.iteration and prev.key == cur.key) or \
        (prev.iteration == cur.iteration and prev.io == "input")
    return extras if same else None


def excess_from_update(update: dict[str, float], prev: Stats, rtol: float, atol: float) -> float | None:
    """max(|cur - prev| - rtol * |prev|) from stored update statistics, or a stand-in on the same side
    of ``atol`` (unchanged exactly when it is <= atol): the stored value at its own rtol; 0 when
    max|d| <= atol (within tolerance at any rtol); inf when max|d| - rtol * max|p| > atol (a change
    at any rtol). None when they cannot tell."""
    if update.get("update_rtol") == rtol and "update_excess" in update:
        return update["update_excess"]
    if update["update_max"] <= atol:
        return 0.0
    if prev.max is not None and prev.min is not None and \
            update["update_max"] - rtol * max(abs(prev.max), abs(prev.min)) > atol:
        return math.inf
    return None


def stored_saturation(ref: TensorRef, tolerance: float) -> float | None:
    """The stored count of a statistics-only tanh/sigmoid output near an asymptote, when counted at
    ``tolerance``."""
    if ref.source.has_values:
        return None
    extras = ref.source.stored_extras()
    if "saturated" not in extras or extras.get("saturated_tolerance") != tolerance:
        return None
    return extras["saturated"]


# -- rules ---------------------------------------------------------------------------------------------
class Rule(ABC):
    """How the conditions naming it behave: it plans the tensor work its watchpoints need and evaluates it."""

    @abstractmethod
    def needs(self, wp: Watchpoint) -> Needs:
        """What the watchpoint reads; a tensor that cannot supply it gets an error record saying so."""

    @abstractmethod
    def plan(self, wp: Watchpoint, order: int, step: Step, batch: Batch) -> None:
        """Add this watchpoint's work on one step to ``step.planned`` and ask ``batch`` for its tensors."""

    @abstractmethod
    def evaluate(self, item: Planned, batch: Batch, out: ScanResult) -> None:
        """Turn the computed results of one planned item into hits and error records."""


class PerTensor(Rule):
    """Rules that check each selected tensor on its own (every rule but the overflow search)."""

    def plan(self, wp: Watchpoint, order: int, step: Step, batch: Batch) -> None:
        """One check per selected floating output of the watchpoint's target kinds; what it met is counted
        in the step's coverage (a check that does not apply here, such as an initial-value check after the
        first iteration, as not applicable)."""
        met = step.coverage.setdefault(order, Coverage())
        for kind in wp.condition.scan_keys:
            for ref in step.outputs.get(kind, ()):
                met.of_kind += 1
                if not matches(wp, ref, step.graph):
                    continue
                met.candidates += 1
                chk = Check(wp, order, step, ref)
                if wp.condition.name in BOOKKEEPING_RULES and ref.node in bookkeeping(step.graph):
                    chk.error = ByDesign(BOOKKEEPING)    # said once, in the scan's "skipped"
                    step.planned.append(chk)
                elif self.plan_check(chk, batch):
                    step.planned.append(chk)
                else:
                    met.not_applicable += 1
            for ref in step.undumped.get(kind, ()):
                met.of_kind += 1
                if matches(wp, ref, step.graph):
                    met.candidates += 1
                    met.gap(NOT_IN_DUMP)

    def plan_check(self, chk: Check, batch: Batch) -> bool:
        """Ask ``batch`` for what one check needs; False drops the check (it does not apply here)."""
        batch.want_stats(chk.ref)
        return True

    def evaluate(self, item: Planned, batch: Batch, out: ScanResult) -> None:
        """An error found while planning, else :meth:`evaluate_check`."""
        assert isinstance(item, Check)
        if item.error:
            add_error(out, item.wp, item.step, item.ref.node, item.error)
            return
        self.evaluate_check(item, batch, out)

    @abstractmethod
    def evaluate_check(self, chk: Check, batch: Batch, out: ScanResult) -> None:
        """Evaluate one planned check that found what it needed."""

    @staticmethod
    def checked(ref: TensorRef, batch: Batch, needs: Needs, prefix: str = "") -> tuple[Stats | None, str | None]:
        """A tensor's statistics, or why a check cannot use them: unreadable, not supplied by its dump,
        or not finite (the reason starts with ``prefix``)."""
        stats, err = batch.stats(ref)
        if err or stats is None:
            return None, err or prefix + "no statistics"
        lack = unsupplied(batch, ref, needs.statistics, needs.values)
        if lack:
            return None, prefix + lack
        if stats.has_nonfinite and not _counts_only(needs):
            return None, prefix + nonfinite_text(stats)
        return stats, None

    @classmethod
    def usable(cls, chk: Check, ref: TensorRef, batch: Batch, out: ScanResult, needs: Needs,
               prefix: str = "") -> Stats | None:
        """Statistics of a finite, non-empty tensor; else None, with an error record when it is not finite,
        not readable, or its dump cannot supply what the check needs."""
        stats, problem = cls.checked(ref, batch, needs, prefix)
        if problem:
            add_error(out, chk.wp, chk.step, chk.ref.node, problem)
            return None
        if stats is None or stats.finite == 0:
            return None
        return stats


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
        only_nan = _has_param(chk.wp.condition, "only_nan") and chk.wp.setting("only_nan") >= 0.5
        if stats.nan or (not only_nan and stats.has_nonfinite):
            add_hit(out, chk.wp, chk.order, chk.step, chk.ref, nonfinite_counts(stats), {})


class StatisticComparisons(PerTensor):
    """Comparisons of statistics with thresholds (``max_gt``, ``zero_percentage_ge``...)."""

    def needs(self, wp: Watchpoint) -> Needs:
        """The statistics the set comparisons read and the counts; values for range_percentage."""
        stats = set(COUNTED)
        for p, _ in wp.comparisons():
            stats |= _READS.get(p.statistic or "", set())
        return Needs(frozenset(stats), values=any(p.statistic not in _READS for p, _ in wp.comparisons()))

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


class _Chain(PerTensor):
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


class Unchanged(_Chain):
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


class UpdateRatio(_Chain):
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
        if _has_param(wp.condition, "large_threshold"):
            large, small = wp.setting("large_threshold"), wp.setting("small_threshold")
            if ratio > large:
                add_hit(out, wp, chk.order, chk.step, chk.ref, {"large_threshold": ratio}, {"large_threshold": large})
            elif ratio < small:
                add_hit(out, wp, chk.order, chk.step, chk.ref, {"small_threshold": ratio}, {"small_threshold": small})
            return
        compare(out, chk, {"abs_mean_update_ratio": ratio})


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
        if op in _ACTIVE_INPUT:
            lo, hi = _ACTIVE_INPUT[op]
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


class OverflowOrigin(Rule):
    """Kernels whose inputs are finite and whose outputs are not, and data inputs that are not finite."""

    def needs(self, wp: Watchpoint) -> Needs:
        """The non-finite counts of every selected input and output."""
        return Needs(NONFINITE)

    def plan(self, wp: Watchpoint, order: int, step: Step, batch: Batch) -> None:
        """Inputs and outputs of the selected nodes: --node and --scope narrow the search too; a loop's
        bookkeeping (an evaluation buffer, a loss accumulator: watch/bookkeeping.py) is left out."""
        mine = step.floats if not (wp.node or wp.scope) else [r for r in step.floats if matches(wp, r, step.graph)]
        met = step.coverage.setdefault(order, Coverage())
        met.of_kind += len(step.floats)
        met.candidates += len(mine)
        kept = bookkeeping(step.graph)
        left_out = sorted({r.node for r in mine if r.node in kept})
        mine = [r for r in mine if r.node not in kept] if left_out else mine
        for ref in mine:
            batch.want_stats(ref)
        step.planned.append(Search(wp, order, step, mine, left_out))

    def evaluate(self, item: Planned, batch: Batch, out: ScanResult) -> None:
        """Hits at the origins, in execution order; unreadable tensors are error records. A weight, gradient,
        state or loss that turns non-finite where the dump holds no operator that made it is a hit too."""
        assert isinstance(item, Search)
        for node in item.left_out:
            add_error(out, item.wp, item.step, node, ByDesign(BOOKKEEPING))
        bad = self._nonfinite(item, batch, out)
        if not bad:
            return
        hits_before = len(out.hits)
        if not self._origins(item, batch, out, bad) and len(out.hits) == hits_before:
            _turned_in_update(item, out, bad)

    def _nonfinite(self, item: Search, batch: Batch, out: ScanResult) -> dict[tuple[str, str, int], Stats]:
        """The selected tensors holding NaN/Inf; error records for those that cannot be read."""
        bad: dict[tuple[str, str, int], Stats] = {}
        for ref in item.refs:
            stats, err = batch.stats(ref)
            err = err or unsupplied(batch, ref, self.needs(item.wp).statistics)
            if err:
                add_error(out, item.wp, item.step, ref.node, err)
            elif stats is not None and stats.has_nonfinite:
                bad[ref.key] = stats
        return bad

    def _origins(self, item: Search, batch: Batch, out: ScanResult, bad: dict[tuple[str, str, int], Stats]) -> bool:
        """The kernels in execution order up to the first read of a weight or state that was already
        non-finite when the iteration began (what comes after it is its consequence); True when there
        is such a read, which settles the iteration."""
        wp, step = item.wp, item.step
        by_node: dict[str, list[tuple[str, int]]] = {}
        for node, io, slot in bad:
            by_node.setdefault(node, []).append((io, slot))
        graph = step.graph
        order_idx = graph.execution_index if graph is not None else {}
        inherited = min((ref for ref in item.refs if ref.key in bad and _read_at_start(graph, ref)),
                        key=lambda ref: order_idx.get(ref.node, 1 << 30), default=None)
        inherited_at = _position_of_read(graph, inherited, order_idx)
        hits_before = len(out.hits)
        for node, ios in sorted(by_node.items(), key=lambda kv: order_idx.get(kv[0], 1 << 30)):
            if inherited is not None and inherited_at <= order_idx.get(node, 1 << 30):
                if len(out.hits) == hits_before:    # else a NaN made earlier in this iteration reached the read
                    _judge_inherited(item, batch, out, inherited, bad[inherited.key])
                return True
            outs = sorted(s for io, s in ios if io == "output")
            if not outs:
                continue
            has_bad_input = any(io == "input" for io, _ in ios) or _reads_nonfinite(graph, node, by_node)
            ref = step.tmap[(node, "output", outs[0])]
            is_data = ref.kind == Kind.INPUT
            if has_bad_input or (node not in order_idx and not is_data):
                continue
            if not is_data and ref.kind != Kind.LOSS and graph is not None and node in graph \
                    and not graph.node(node).inputs:
                # made from no tensor at all (torch.full(-inf), an attention mask's scalar -inf): written on
                # purpose, and softmax absorbs it; a kernel that computes Inf from finite inputs is an origin.
                # A loss without inputs is a recording level that saw no operator: it is what went wrong
                add_error(out, wp, step, node, ByDesign(
                    "a non-finite constant made from no input (an attention mask's -inf) is no overflow origin"))
                continue
            add_hit(out, wp, item.order, step, ref, nonfinite_counts(bad[(node, "output", outs[0])]), {})
        return False


EARLIER_ORIGIN = ("weights or optimizer state were already non-finite when the iteration began: the origin "
                  "is in an earlier iteration")


def _judge_inherited(item: Search, batch: Batch, out: ScanResult, ref: TensorRef, stats: Stats) -> None:
    """A weight or state read non-finite as the iteration began: its origin is an earlier iteration's only
    when the dump holds it non-finite at that iteration's end (whose search reported it). Otherwise it
    turned non-finite where no recorded operator ran (written between steps, or before the dump's first
    iteration): the read is the finding, said as such."""
    step = item.step
    param = _read_param(step.graph, ref)
    earlier = _end_of_earlier_iteration(step, param) if param else None
    then = batch.stats_now(earlier[1]) if earlier is not None else None
    if then is not None and then[0] is not None and then[0].has_nonfinite:
        add_error(out, item.wp, step, ref.node, ByDesign(EARLIER_ORIGIN))
        return
    hit = add_hit(out, item.wp, item.order, step, ref, nonfinite_counts(stats), {},
                  _outside_note(param or ref.node, step.iteration, earlier, then))
    record = step.graph.record_of(param) if step.graph is not None and param else None
    if record is not None:    # named as the weight it is, read by the node the hit locates
        hit.kind, hit.param = record.kind, record.param or param


def _outside_note(param: str, iteration: int, earlier: tuple[int, TensorRef] | None,
                  then: tuple[Stats | None, str | None] | None) -> str:
    """Why a weight read non-finite has its origin outside the dump: its value an iteration earlier."""
    if earlier is None:
        return (f"{param} was non-finite when iteration {iteration} began and the dump holds no earlier value "
                "of it: the origin is not in the dump")
    if then is None or then[0] is None:
        return (f"{param} was non-finite when iteration {iteration} began; its value at the end of iteration "
                f"{earlier[0]} could not be read ({then[1] if then else 'no statistics'}): the origin was not found")
    return (f"{param} was finite at the end of iteration {earlier[0]} and non-finite when iteration {iteration} "
            "began: changed outside the recorded operators (between steps); the origin is not in the dump")


def _turned_in_update(item: Search, out: ScanResult, bad: dict[tuple[str, str, int], Stats]) -> None:
    """No operator the dump holds made the NaN, yet a weight or optimizer state ends the iteration
    non-finite: the update that made it was not recorded (level "parameters" or "modules"). The first
    such tensor is the finding."""
    step, graph = item.step, item.step.graph
    order_idx = graph.execution_index if graph is not None else {}
    if any(io == "output" and node in order_idx for node, io, _ in bad):
        return     # a recorded operator's output is non-finite: the NaN came through it (judged above)
    turned = [step.tmap[k] for k in bad
              if k[1] == "output" and step.tmap[k].kind in (Kind.WEIGHT, Kind.OPTIMIZER_STATE)]
    if not turned:
        return
    first = min(turned, key=lambda r: (position(graph, r.node) if graph is not None and r.node in graph else 0, r.node))
    add_hit(out, item.wp, item.order, step, first, nonfinite_counts(bad[first.key]), {},
            f"turned non-finite in iteration {step.iteration}, made by no operator the dump holds (the optimizer "
            "step, at a level that does not record it)")


def _end_of_earlier_iteration(step: Step, node: str) -> tuple[int, TensorRef] | None:
    """(iteration, value) of ``node``'s output at the end of the nearest earlier iteration the rank's dump
    holds it in, whatever graph that iteration ran (the first step, which creates the optimizer's state,
    is a graph of its own). None when no earlier iteration holds it."""
    rank = step.rank
    runs = sorted(((it, gid) for gid in set(rank.graph_ids) for it in rank.iterations(gid) if it < step.iteration),
                  reverse=True)
    for it, gid in runs:
        ref = rank.tensor_map(gid, it).get((node, "output", 0))
        if ref is not None:
            return it, ref
    return None


def _position_of_read(graph: Graph | None, ref: TensorRef | None, order_idx: dict[str, int]) -> int:
    """Where in the iteration ``ref``, a read of a weight as it began, happened: a Gradient node's read
    (a recording level that saw no operator) stands for the forward pass's, before everything."""
    if ref is None:
        return 0
    if graph is not None and graph.record_of(ref.node).kind == Kind.GRADIENT:
        return -1
    return order_idx.get(ref.node, 1 << 30)


def _read_at_start(graph: Graph | None, ref: TensorRef) -> bool:
    """Whether ``ref`` is a weight or optimizer state as the forward pass read it: its value when the
    iteration began (not as the optimizer's own kernels read it after this iteration's gradients)."""
    if ref.io != "input" or graph is None or ref.node not in graph:
        return False
    a = graph.record_of(ref.node)
    # a Gradient node that reads its weight (a recording level that saw no operator) read it before the step
    if (a.is_backward and a.kind != Kind.GRADIENT) or a.input_roles or a.kind == Kind.OPTIMIZER_STATE:
        return False
    return _read_param(graph, ref) is not None


def _read_param(graph: Graph | None, ref: TensorRef) -> str | None:
    """The weight or optimizer state node whose value the input ``ref`` is (None: another value)."""
    if graph is None or ref.node not in graph:
        return None
    values = graph.value_inputs(ref.node)
    s = graph.get(values[ref.slot]) if ref.slot < len(values) and values[ref.slot] else None
    return s.name if s is not None and s.is_parameter and s.kind in (Kind.WEIGHT, Kind.OPTIMIZER_STATE) else None


def _reads_nonfinite(graph: Graph | None, node: str, bad_nodes: dict[str, list[tuple[str, int]]]) -> bool:
    """Whether a node reads (through routing nodes) the output of a kernel found non-finite: an input that
    was not dumped (the recorder stores a kernel's outputs) is judged by its producer's. Not parameters:
    their output is the value after the iteration's update, not the one the forward read (an input)."""
    if graph is None or node not in graph:
        return False
    return any(any(io == "output" for io, _ in bad_nodes.get(src, ())) for src in graph.value_inputs(node)
               if src and src in graph and not graph.record_of(src).is_parameter)


def compare(out: ScanResult, chk: Check, values: dict[str, float | None]) -> None:
    """Hit when any set comparison ``<statistic>_<op>`` holds; report only those."""
    actual: dict[str, float] = {}
    threshold: dict[str, float] = {}
    for p, thr in chk.wp.comparisons():
        v = values.get(p.statistic or "")
        if v is not None and OPS[p.op or "gt"](v, thr):
            actual[p.name] = float(v)
            threshold[p.name] = thr
    if actual:
        add_hit(out, chk.wp, chk.order, chk.step, chk.ref, actual, threshold)


def value_before_update(chk: Check) -> TensorRef | None:
    """A weight's value before this iteration's update (:func:`debugger.model.history.value_before_update`)."""
    return history.value_before_update(chk.step.rank, chk.ref)


def _has_param(cond: Condition, name: str) -> bool:
    return any(p.name == name for p in cond.params)


class Sweep(Rule):
    """The non-finite sweep's entry: it runs in every scan (watch/sweep.py), so as a watchpoint it plans nothing."""

    def needs(self, wp: Watchpoint) -> Needs:
        """The three counts, read by the sweep."""
        return Needs(NONFINITE)

    def plan(self, wp: Watchpoint, order: int, step: Step, batch: Batch) -> None:
        """Nothing more than the sweep reads; counted as what the sweep swept."""
        met = step.coverage.setdefault(order, Coverage())
        met.of_kind += len(step.floats)
        met.candidates += len(step.floats)
        met.not_applicable += len(step.floats)

    def evaluate(self, item: Planned, batch: Batch, out: ScanResult) -> None:
        """Nothing: :func:`debugger.watch.sweep.apply_sweep` adds the findings."""


RULES: dict[str, Rule] = {
    "nonfinite": NonFinite(), "thresholds": StatisticComparisons(), "range": Range(), "initial": InitialWeights(),
    "saturated": Saturated(),
    "unchanged": Unchanged(), "update_ratio": UpdateRatio(), "units": UnitActivity(),
    "loss_history": LossHistory(), "overflow_origin": OverflowOrigin(), "sweep": Sweep(),
}


def rule_of(cond: Condition) -> Rule:
    """The rule that plans and evaluates a condition (named by ``Condition.rule``)."""
    return RULES[cond.rule]
