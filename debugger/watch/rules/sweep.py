"""The non-finite sweep as a watchpoint: it runs in every scan (debugger/watch/sweep.py) and plans nothing."""
from __future__ import annotations

from ..batch import Batch
from ..coverage import Coverage
from ..registry import Watchpoint
from ..results import ScanResult
from .base import NONFINITE, Needs, Planned, Rule, Step


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
