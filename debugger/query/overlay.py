"""Numbers on the graph: one value per node at one iteration (a statistic of its outputs, its
watchpoint hits, or how far it is from the same node on another rank or in another run), and the
scale they are drawn on. A scope or folded group takes the worst of its nodes (scopes.scope_rollup)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from ..errors import InvalidQueryError
from ..formats.records import Kind
from ..model.graph import Graph
from ..model.rank import Rank
from ..model.tensors import TensorRef
from ..stats.core import ASYMPTOTES, SATURATION_TOLERANCE, Stats, saturated_count, update_stats

StatsOf = Callable[[TensorRef], Stats]


@dataclass(frozen=True)
class Metric:
    """What an overlay colours by: its words, and whether its scale is a share (0-1) or logarithmic."""

    name: str
    label: str
    about: str
    log: bool = False
    share: bool = False
    needs: str = ""         # "rank" | "run": another rank or dump to compare with


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("max_abs", "max |x|", "largest finite magnitude among the node's outputs", log=True),
    Metric("nonfinite", "NaN/Inf count", "NaN and ±Inf elements in the node's outputs", log=True),
    Metric("zero_share", "zero share", "share of the outputs' elements that are exactly zero", share=True),
    Metric("saturated", "saturated share", "share of a tanh/sigmoid output within 1e-3 of an asymptote", share=True),
    Metric("grad_norm", "gradient norm", "L2 norm of a gradient", log=True),
    Metric("update_ratio", "update ratio", "mean |w - w_before| / mean |w_before| of a weight", log=True),
    Metric("hits", "watchpoint hits", "hits of the watchpoints set on this dump"),
    Metric("rank_diff", "difference from rank", "largest relative difference of the outputs' statistics "
           "(mean, mean |x|, min, max, L2 norm) from the same node on another rank", log=True, needs="rank"),
    Metric("run_diff", "difference from run", "largest relative difference of the outputs' statistics "
           "(mean, mean |x|, min, max, L2 norm) from the same node in another dump", log=True, needs="run"),
)}

_DIFF_STATS = ("mean", "abs_mean", "min", "max", "l2norm")
_TINY = 1e-30


def metric(name: str) -> Metric:
    """The metric called ``name`` (InvalidQueryError naming the known ones otherwise)."""
    m = METRICS.get(name)
    if m is None:
        raise InvalidQueryError(f"bad overlay {name!r}: expected one of {', '.join(METRICS)}")
    return m


def _outputs(rank: Rank, graph: Graph, iteration: int) -> dict[str, list[TensorRef]]:
    """The dumped outputs of each node of ``graph`` in ``iteration``."""
    out: dict[str, list[TensorRef]] = {}
    for ref in rank.tensor_map(graph.graph_id, iteration).values():
        if ref.io == "output" and ref.node in graph:
            out.setdefault(ref.node, []).append(ref)
    return out


def _worst(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None and not math.isnan(v)]
    return max(got) if got else None


def _stat_value(name: str, graph: Graph, ref: TensorRef, s: Stats) -> float | None:
    """One output's value of a statistic metric (None: it does not apply to this output)."""
    if name == "max_abs":
        return None if s.max is None or s.min is None else max(abs(s.max), abs(s.min))
    if name == "nonfinite":
        return float(s.nan + s.pos_inf + s.neg_inf)
    if name == "zero_share":
        return s.zeros / s.count if s.count else None
    if name == "grad_norm":
        kind = graph.record_of(ref.node).kind
        return s.l2norm if kind == Kind.GRADIENT else None
    raise AssertionError(name)


def _saturated(graph: Graph, ref: TensorRef, s: Stats) -> float | None:
    """Share of a tanh/sigmoid output near an asymptote: stored by a statistics-only dump, else counted."""
    act = graph.record_of(ref.node).activation
    if act not in ASYMPTOTES or not s.count:
        return None
    if not ref.source.has_values:
        extras = ref.source.stored_extras()
        near = extras.get("saturated") if extras.get("saturated_tolerance") == SATURATION_TOLERANCE else None
        return None if near is None else near / s.count
    return saturated_count(ref.value(), act)["saturated"] / s.count


def _update_ratio(rank: Rank, graph: Graph, ref: TensorRef, iteration: int) -> float | None:
    """mean |w - w_before| / mean |w_before| of a weight: stored with a statistics-only weight, else
    from its values now and at the graph's previous run."""
    if graph.record_of(ref.node).kind != Kind.WEIGHT:
        return None
    if not ref.source.has_values:
        up = ref.source.stored_extras()
    else:
        before = rank.previous_iteration(graph.graph_id, iteration)
        prev = rank.tensor_map(graph.graph_id, before).get(ref.key) if before is not None else None
        up = update_stats(ref.value(), prev.value()) if prev is not None and prev.has_values else {}
    num, den = up.get("update_abs_mean"), up.get("previous_abs_mean")
    if num is None or not den or math.isnan(num):
        return None
    return num / den


def _rel_diff(a: Stats, b: Stats) -> float | None:
    """Largest relative difference between two outputs' statistics (0: the same)."""
    out = []
    for k in _DIFF_STATS:
        x, y = getattr(a, k), getattr(b, k)
        if x is None or y is None:
            continue
        out.append(abs(x - y) / max(abs(x), abs(y), _TINY))
    if a.has_nonfinite != b.has_nonfinite:
        out.append(1.0)
    return _worst(out)


def node_values(rank: Rank, graph: Graph, iteration: int, name: str, stats_of: StatsOf) -> dict[str, float]:
    """Per node of ``graph``, its value of the statistic metric ``name`` in ``iteration`` (the worst of
    its outputs; nodes it does not apply to are left out)."""
    out: dict[str, float] = {}
    for node, refs in _outputs(rank, graph, iteration).items():
        if name == "update_ratio":
            v = _worst(_update_ratio(rank, graph, r, iteration) for r in refs)
        elif name == "saturated":
            v = _worst(_saturated(graph, r, stats_of(r)) for r in refs)
        elif name == "nonfinite":
            v = sum(_stat_value(name, graph, r, stats_of(r)) or 0.0 for r in refs)
        else:
            v = _worst(_stat_value(name, graph, r, stats_of(r)) for r in refs)
        if v is not None:
            out[node] = v
    return out


def diff_values(rank: Rank, graph: Graph, iteration: int, stats_of: StatsOf, other: Rank,
                other_stats_of: StatsOf) -> dict[str, float]:
    """Per node, the largest relative difference of its outputs' statistics from the same outputs
    (same iteration, node name, slot) on ``other``; nodes the other lacks are left out."""
    theirs: dict[tuple[str, str, int], TensorRef] = {}
    # The same graph id when it ran the iteration there; else every graph that did (a run recorded
    # apart numbers its graphs in the order it met them)
    gids = [graph.graph_id] if iteration in other.iterations(graph.graph_id) else other.graph_ids
    for gid in gids:
        if iteration in other.iterations(gid):
            theirs.update(other.tensor_map(gid, iteration))
    out: dict[str, float] = {}
    for node, refs in _outputs(rank, graph, iteration).items():
        pairs = [(r, theirs[r.key]) for r in refs if r.key in theirs]
        v = _worst(_rel_diff(stats_of(a), other_stats_of(b)) for a, b in pairs)
        if v is not None:
            out[node] = v
    return out


def hit_values(hit_nodes: Mapping[str, int]) -> dict[str, float]:
    """Per node, its number of watchpoint hits."""
    return {n: float(c) for n, c in hit_nodes.items() if c}


def scale(values: Mapping[str, float], m: Metric) -> dict[str, float | bool | None]:
    """The range the legend draws: a share is 0-1; a log metric spans its positive values."""
    if m.share:
        return {"lo": 0.0, "hi": 1.0, "log": False}
    finite = [v for v in values.values() if math.isfinite(v)]
    if m.log:
        pos = [v for v in finite if v > 0]
        return {"lo": min(pos) if pos else None, "hi": max(pos) if pos else None, "log": True}
    return {"lo": min(finite, default=0.0), "hi": max(finite, default=0.0), "log": False}


__all__ = ["METRICS", "Metric", "diff_values", "hit_values", "metric", "node_values", "scale"]
