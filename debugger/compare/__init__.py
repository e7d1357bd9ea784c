"""Multi-card and run-vs-run comparison: which rank, which tensor, which iteration diverged first.

- :func:`compare_ranks`: every rank of one dump against a base rank, on the tensors data
  parallelism keeps equal (weights, optimizer state, collective outputs and what is computed
  from them only).
- :func:`compare_runs`: dump A (under test) against dump B (baseline), the same rank and
  iteration on both sides; tensors matched by full name, then by aligned execution orders, then
  by an optional mapping.

Both return a :class:`CompareResult`: graded :class:`Pair` objects (msprobe's metrics, see
:mod:`debugger.compare.metrics`) and the first divergence.

The names load on first use (PEP 562): building the command line does not load numpy.
"""
from __future__ import annotations

from ..lazy import lazy_names

__all__ = ["compare_ranks", "compare_runs", "CompareResult", "Pair", "Side", "Thresholds", "Metrics", "Outcome",
           "compare_sources", "compare_arrays", "grade", "invariant_nodes", "is_invariant", "PASS", "WARNING", "ERROR"]

_WHERE = {**dict.fromkeys(("ERROR", "PASS", "WARNING", "Metrics", "Outcome", "Thresholds", "compare_arrays",
                           "compare_sources", "grade"), "metrics"),
          **dict.fromkeys(("compare_ranks", "invariant_nodes", "is_invariant"), "ranks"),
          **dict.fromkeys(("CompareResult", "Pair", "Side", "compare_runs"), "runs")}

__getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
