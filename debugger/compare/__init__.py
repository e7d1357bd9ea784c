"""Multi-card and run-vs-run comparison: which rank, which tensor, which iteration diverged first.

- :func:`compare_ranks`: every rank of one dump against a base rank, on the tensors data
  parallelism keeps equal (weights, optimizer state, collective outputs and what is computed
  from them only).
- :func:`compare_runs`: dump A (under test) against dump B (baseline), the same rank and
  iteration on both sides; tensors matched by full name, then by aligned execution orders, then
  by an optional mapping.

Both return a :class:`CompareResult`: graded :class:`Pair` objects (msprobe's metrics, see
:mod:`debugger.compare.metrics`) and the first divergence.
"""
from __future__ import annotations

from .metrics import ERROR, PASS, WARNING, Metrics, Outcome, Thresholds, compare_arrays, compare_sources, grade
from .ranks import compare_ranks, invariant_nodes, is_invariant
from .runs import CompareResult, Pair, Side, compare_runs

__all__ = ["compare_ranks", "compare_runs", "CompareResult", "Pair", "Side", "Thresholds", "Metrics", "Outcome",
           "compare_sources", "compare_arrays", "grade", "invariant_nodes", "is_invariant", "PASS", "WARNING", "ERROR"]
