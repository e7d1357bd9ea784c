"""The vocabulary every rule shares: what a scan step holds, the checks and searches rules plan, the
findings they add, the statistics each comparison reads, and the rule interface itself."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Iterable, Union

from ...model import Rank, TensorRef, history
from ...model.graph import Graph
from ...model.locate import position, user_location
from ...stats.core import STAT_NAMES, Stats
from ..batch import Batch
from ..bookkeeping import BOOKKEEPING, BOOKKEEPING_RULES, bookkeeping
from ..compute import UnitSpec
from ..coverage import Coverage
from ..registry import OPS, Condition, Watchpoint
from ..results import ErrorRecord, Hit, ScanResult
from ..select import matches
from ..undumped import NOT_IN_DUMP

NONFINITE = frozenset({"nan", "pos_inf", "neg_inf"})
# The non-finite rule and the empty-tensor rule that every value condition applies first.
COUNTED = NONFINITE | {"count"}
# The statistics each comparison reads; range_percentage and the update ratio need values.
READS = {"abs_mean": {"abs_mean"}, "max": {"max"}, "min": {"min"}, "mean": {"mean"},
          "zero_percentage": {"zeros", "count"}, "max_min": {"max", "min"}}
# Element counts stay exact beside NaN/Inf: a check reading only these (the zero share of
# tensor_all_zero) is answered on a tensor that holds some, such as attention scores masked with -inf.
COUNTS = COUNTED | {"zeros", "positives", "negatives"}
# SageMaker's non-saturated input ranges of tanh and sigmoid.
ACTIVE_INPUT = {"tanh": (-9.4999, 9.4999), "sigmoid": (-23.0, 16.99999)}


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


def counts_only(needs: Needs) -> bool:
    """Whether a check reads element counts only (a zero share), which NaN/Inf beside them leave exact."""
    return "zeros" in needs.statistics and needs.statistics <= COUNTS and not needs.values and not needs.earlier


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
        if stats.has_nonfinite and not counts_only(needs):
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


def has_param(cond: Condition, name: str) -> bool:
    return any(p.name == name for p in cond.params)
