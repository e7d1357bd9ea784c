"""Tolerances that follow the dtypes: a pair where either side is a low-precision float is graded against
that dtype's precision, not against float32's.

A bfloat16 run and a float32 run of the same training differ by bfloat16's rounding in every kernel:
after a few steps their weights differ by about one bfloat16 ulp relative to the weights' size
(measured on tests/parallel/layouts.py: max |a-b| up to 1.2e-2 of the weights' root mean square,
statistics up to 2e-3 after three Adam steps). So for precision ``e`` (the machine epsilon of the
coarser float: bfloat16 2^-8, float16 2^-11) the bounds become at least

- ``abs_warn = e`` and ``abs_error = 16 e`` (max |a-b|; the error rule still needs cosine < cos_error),
- ``stat_warn = e`` and ``stat_error = 16 e`` (the relative difference of statistics),
- ``ratio_warn = 0`` when e > 1e-3 (bfloat16: the share of elements within 0.1 % says nothing
  below the dtype's own resolution),

and a float dtype difference (bfloat16 against float32) is not itself an error. A pair's precision
is the coarser of its two dtypes as the graphs record them (a recorder stores bfloat16 values as
float32) and, comparing two runs, of the two runs' weights (a bfloat16 model's float32 loss carries
bfloat16's error). float32 (and
float64) pairs keep the defaults: reduction-order noise across layouts (FSDP's reduce-scatter
against DDP's all-reduce) measures at most ~1e-7 relative (6e-6 after pipeline micro-batches and
Adam), well below ``stat_warn = 1e-5`` and ``abs_warn = 1e-4``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .grades import GradeThresholds

if TYPE_CHECKING:
    from ..model import Dump
    from ..model.graph import Graph

# Machine epsilon of the floats coarser than float32 (numpy has no bfloat16)
LOW_PRECISION = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
_SPREAD = 16          # how many ulps of the coarser dtype training may drift apart before it is an error


def coarser(a: str | None, b: str | None) -> str | None:
    """The low-precision float of the two dtype names (None when neither is one)."""
    named = [d for d in (a, b) if d in LOW_PRECISION]
    return max(named, key=lambda d: LOW_PRECISION[d]) if named else None


def thresholds_for(th: GradeThresholds, precision: str | None) -> GradeThresholds:
    """The thresholds to grade a pair whose coarser side is ``precision`` (unchanged for None)."""
    e = LOW_PRECISION.get(precision or "")
    if e is None:
        return th
    return replace(th, abs_warn=max(th.abs_warn, e), abs_error=max(th.abs_error, _SPREAD * e),
                   stat_warn=max(th.stat_warn, e), stat_error=max(th.stat_error, _SPREAD * e),
                   ratio_warn=0.0 if e > 1e-3 else th.ratio_warn)


def declared_dtype(graph: "Graph | None", node: str, io: str, slot: int) -> str | None:
    """The dtype the graph gives a tensor (a recorder stores bfloat16 values as float32, but its graph
    says bfloat16); None when the graph does not say."""
    if graph is None or node not in graph:
        return None
    if io == "input":
        vi = graph.value_inputs(node)
        src = vi[slot] if slot < len(vi) else ""
        if not src or src not in graph:
            return None
        node, slot = src, 0
    outs = graph.record_of(node).outputs
    return outs[slot].dtype if slot < len(outs) else None


def weight_precision(d: "Dump") -> str | None:
    """The coarsest low-precision float among a run's weights: what a bfloat16 model computes in, also where
    it upcasts (a loss computed in float32 from bfloat16 logits carries bfloat16's error)."""
    found = {o.dtype for r in d.ranks for g in r.graphs.values() for n in g.nodes()
             if n.is_parameter and n.kind == "weight" for o in n.record.outputs[:1] if o.dtype in LOW_PRECISION}
    return max(found, key=lambda x: LOW_PRECISION[x or ""], default=None)
