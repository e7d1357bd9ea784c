"""Multi-card and run-vs-run comparison: which rank, which tensor, which iteration diverged first.

- :func:`compare_ranks` (:mod:`.ranks`): every rank of one dump against a base rank, on the tensors data
  parallelism keeps equal (weights, optimizer state, collective outputs and what is computed
  from them only).
  Under a parallel layout each tensor is compared within its own group (:mod:`.peers`,
  :mod:`.layout_ranks`): a shard only with its replicas, a collective's result within its process group.
- :func:`compare_runs` (:mod:`.runs`): dump A (under test) against dump B (baseline), the same rank and
  iteration on both sides; tensors matched (:mod:`.match`) by full name, then by aligned execution orders,
  then by an optional mapping.
- :func:`compare_logical` (:mod:`.logical_runs`): two runs of different layouts, as logical parameters,
  gradients, optimizer state and loss assembled from every rank's shard (:mod:`.localize` names the shard
  that differs).

Tolerances follow the dtypes (:mod:`.precision`): a bfloat16 or float16 side is graded at its precision.

Both return a :class:`CompareResult` (:mod:`.pairs`): :class:`Pair` objects graded (:mod:`.evaluate`,
:mod:`.grades`) from msprobe's metrics (:mod:`.outcome`, computed in :mod:`.values` and :mod:`.accumulator`,
or from statistics in :mod:`.statistics_only`; kept in the cache as :mod:`.cachecodec` says) and the
first divergence (:mod:`.divergence`).
"""
from __future__ import annotations

from .grades import ERROR, PASS, WARNING, GradeThresholds, grade
from .outcome import Metrics, Outcome
from .pairs import CompareResult, Pair, Side
from .logical_runs import compare_logical
from .ranks import compare_ranks, invariant_nodes, is_invariant
from .runs import compare_runs
from .values import compare_arrays, compare_sources

__all__ = ["compare_ranks", "compare_runs", "compare_logical", "CompareResult", "Pair", "Side", "GradeThresholds", "Metrics",
           "Outcome", "compare_sources", "compare_arrays", "grade", "invariant_nodes", "is_invariant", "PASS",
           "WARNING", "ERROR"]
