"""Condition rules, one module a family: each plans what its checks need from the dump and evaluates them.

A rule is named by the registry's ``Condition.rule``. It declares what it reads from each tensor
(named statistics, the values, previous iterations, per-unit values); when a dump cannot supply
that, for instance because it stores statistics only, the check is an error record that says what
is missing, never a hit and never a silent pass.

base.py holds what every rule shares (steps, checks, findings, the rule interface); stored.py what a dump's
stored statistics decide without values; statistics.py, changes.py, activity.py, loss.py, overflow.py and
sweep.py the rules of each family.
"""
from __future__ import annotations

from ..registry import Condition
from .activity import UnitActivity
from .base import NONFINITE, ByDesign, Check, Needs, Planned, Rule, RunStart, Search, Step, make_hit, nonfinite_counts, unsupplied
from .changes import Unchanged, UpdateRatio
from .loss import LossHistory
from .overflow import OverflowOrigin
from .statistics import InitialWeights, NonFinite, Range, Saturated, StatisticComparisons
from .stored import change_lower_bound, unchanged_from_statistics
from .sweep import Sweep

RULES: dict[str, Rule] = {
    "nonfinite": NonFinite(), "thresholds": StatisticComparisons(), "range": Range(), "initial": InitialWeights(),
    "saturated": Saturated(),
    "unchanged": Unchanged(), "update_ratio": UpdateRatio(), "units": UnitActivity(),
    "loss_history": LossHistory(), "overflow_origin": OverflowOrigin(), "sweep": Sweep(),
}


def rule_of(cond: Condition) -> Rule:
    """The rule that plans and evaluates a condition (named by ``Condition.rule``)."""
    return RULES[cond.rule]


__all__ = ["ByDesign", "Check", "NONFINITE", "Needs", "Planned", "RULES", "Rule", "RunStart", "Search", "Step",
           "change_lower_bound", "make_hit", "nonfinite_counts", "rule_of", "unchanged_from_statistics",
           "unsupplied"]
