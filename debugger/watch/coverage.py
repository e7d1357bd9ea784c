"""What each watchpoint of a scan checked and what it could not: the part of every verdict that says
whether "no hit" means "clean" (issue 37: a verdict is never wrong by silence).

A watchpoint meets tensors of its target kinds (``of_kind``), of which its filters (activation functions,
``node``, ``scope``) admit some (``candidates``); each admitted tensor is a check that either reached a
verdict (``checked``: a hit or a pass), could not run for lack of data (``gaps``, by reason: not dumped,
statistics only, no previous iteration, unreadable, not finite), or does not apply by design
(``not_applicable``: a loop's bookkeeping, a constant mask). A watchpoint whose target kinds were not
dumped at all, or whose every check lacked data, answered nothing: the scan is then *incomplete*.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

# One step's coverage of one watchpoint, small enough to keep per (rank, iteration) of a long run:
# (of_kind, candidates, checked, not_applicable, ((reason, checks), ...)); its iterations and ranks are
# the step's own when it checked something.
StepCounts = tuple[int, int, int, int, tuple[tuple[str, int], ...]]

COMPLETE, PARTIAL, UNANSWERED, INAPPLICABLE = "complete", "partial", "unanswered", "not_applicable"
_REASONS_KEPT = 8     # distinct reasons kept per watchpoint (the most frequent; the rest are counted)


@dataclass
class Coverage:
    """One watchpoint's coverage in a scan (or a worker's part of it)."""

    of_kind: int = 0            # tensors of its target kinds the scan met
    candidates: int = 0         # of those, the ones its filters admit: its checks
    checked: int = 0            # checks that reached a verdict
    not_applicable: int = 0     # checks that do not apply by design
    gaps: dict[str, int] = field(default_factory=dict)    # reason -> checks that could not run
    iterations: set[int] = field(default_factory=set)     # where it checked something
    ranks: set[int] = field(default_factory=set)

    @property
    def unchecked(self) -> int:
        """Checks that could not run for lack of data."""
        return sum(self.gaps.values())

    @property
    def status(self) -> str:
        """complete | partial | unanswered (nothing checked for lack of data) | not_applicable."""
        if self.checked:
            return PARTIAL if self.gaps else COMPLETE
        if self.of_kind == 0 or self.gaps:
            return UNANSWERED
        return INAPPLICABLE

    def gap(self, reason: str, count: int = 1) -> None:
        """Count checks that could not run, by reason (a file path in front is dropped: one reason, many files)."""
        key = reason.split(": ", 1)[1] if reason.startswith("/") and ": " in reason else reason
        self.gaps[key] = self.gaps.get(key, 0) + count

    def add(self, other: "Coverage") -> None:
        """Add a worker's part."""
        self.of_kind += other.of_kind
        self.candidates += other.candidates
        self.checked += other.checked
        self.not_applicable += other.not_applicable
        for reason, n in other.gaps.items():
            self.gap(reason, n)
        self.iterations |= other.iterations
        self.ranks |= other.ranks

    def to_dict(self) -> dict[str, Any]:
        """The documented COVERAGE entry of one watchpoint (without its name and index)."""
        reasons = sorted(self.gaps.items(), key=lambda kv: (-kv[1], kv[0]))
        return {"status": self.status, "of_kind": self.of_kind, "candidates": self.candidates,
                "checked": self.checked, "unchecked": self.unchecked, "not_applicable": self.not_applicable,
                "reasons": [{"reason": r, "checks": n} for r, n in reasons[:_REASONS_KEPT]],
                "iterations": sorted(self.iterations), "ranks": sorted(self.ranks)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Coverage":
        """Inverse of :meth:`to_dict`."""
        c = cls(int(d["of_kind"]), int(d["candidates"]), int(d["checked"]), int(d["not_applicable"]),
                iterations=set(d["iterations"]), ranks=set(d["ranks"]))
        for r in d["reasons"]:
            c.gap(r["reason"], int(r["checks"]))
        kept = sum(c.gaps.values())
        if int(d["unchecked"]) > kept:      # reasons beyond the kept ones still count
            c.gap("other reasons", int(d["unchecked"]) - kept)
        return c


def step_counts(c: Coverage) -> StepCounts:
    """One step's coverage as counts."""
    return (c.of_kind, c.candidates, c.checked, c.not_applicable, tuple(sorted(c.gaps.items())))


def sum_counts(a: StepCounts, b: StepCounts | None) -> StepCounts:
    """Two parts' counts of one step added (its graphs, or two workers' parts); ``b`` None: ``a``."""
    if b is None:
        return a
    gaps = dict(a[4])
    for reason, n in b[4]:
        gaps[reason] = gaps.get(reason, 0) + n
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], tuple(sorted(gaps.items())))


def read_counts(n: Sequence[Any]) -> StepCounts:
    """Step counts read back from their JSON lists."""
    of_kind, candidates, checked, not_applicable, gaps = n
    return (int(of_kind), int(candidates), int(checked), int(not_applicable), tuple((str(r), int(c)) for r, c in gaps))


def add_step(total: Coverage, counts: StepCounts, rank: int, iteration: int) -> None:
    """Add one step's counts (:func:`step_counts`) of ``rank``'s ``iteration`` to ``total``."""
    of_kind, candidates, checked, not_applicable, gaps = counts
    total.of_kind += of_kind
    total.candidates += candidates
    total.checked += checked
    total.not_applicable += not_applicable
    for reason, n in gaps:
        total.gap(reason, n)
    if checked:     # as the scan counts it (watch/run.py): where it checked something
        total.iterations.add(iteration)
        total.ranks.add(rank)


def scan_status(coverage: Iterable[Coverage], strict: bool = False) -> str:
    """complete, partial (some checks could not run) or incomplete (a watchpoint answered nothing; with
    ``strict``, any check that could not run)."""
    statuses = [c.status for c in coverage]
    if UNANSWERED in statuses or (strict and PARTIAL in statuses):
        return "incomplete"
    return PARTIAL if PARTIAL in statuses else COMPLETE


def why_unanswered(name: str, kinds: Iterable[str], c: Coverage) -> str:
    """One line: why a watchpoint answered nothing."""
    if c.of_kind == 0:
        return (f"{name}: no {' or '.join(str(k) for k in kinds)} tensor in the scanned iterations (none in the dump: "
                "its level or its configuration keeps none, or the model has none)")
    return f"{name}: none of its {c.candidates} check(s) could run: {most_common(c)}"


def most_common(c: Coverage, shown: int = 2) -> str:
    """The most frequent reasons a watchpoint's checks could not run, with their counts."""
    reasons = sorted(c.gaps.items(), key=lambda kv: (-kv[1], kv[0]))
    text = "; ".join(f"{n} x {r}" for r, n in reasons[:shown])
    return text + (f"; {len(reasons) - shown} more reason(s)" if len(reasons) > shown else "")
