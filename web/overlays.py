"""The graph's overlay: one metric's value per node at one iteration (debugger.query.overlay), worked out
once per (dump as served, rank, graph, iteration, metric, what it is compared with) and rolled up to the
children of the scope the page shows."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from debugger import Graph, Rank, query
from debugger.stats import service
from debugger.errors import InvalidQueryError
from debugger.query import overlay as ov

from .session import Workspace

_KEEP = 64          # overlays kept per app: a replay over 64 iterations redraws without reading again
_memo: "OrderedDict[tuple[Any, ...], tuple[Any, dict[str, float]]]" = OrderedDict()
_lock = threading.Lock()


def _remember(key: tuple[Any, ...], owner: tuple[Any, ...], fn: Any) -> dict[str, float]:
    """``fn()`` once per key while the ``owner`` objects (the dumps served) stay the same."""
    with _lock:
        got = _memo.get(key)
        if got is not None and len(got[0]) == len(owner) and all(a is b for a, b in zip(got[0], owner)):
            _memo.move_to_end(key)
            return got[1]
    values = fn()
    with _lock:
        _memo[key] = (owner, values)
        while len(_memo) > _KEEP:
            _memo.popitem(last=False)
    return values


def _stats_fn(ws: Workspace, dump_id: str) -> Any:
    cache = ws.cache(dump_id)
    return lambda ref: service.statistics(ref.source, cache)


def _other(ws: Workspace, dump_id: str, rank: Rank, vs_rank: int | None, vs_dump: str | None) -> tuple[str, Rank]:
    """The dump id and rank a difference is taken against."""
    if vs_dump is not None:
        other_id = ws.resolve(vs_dump)
        if other_id == dump_id and vs_rank in (None, rank.rank):
            raise InvalidQueryError("run_diff needs another dump than the one shown (vs_dump)")
        return other_id, ws.dump(other_id).rank(rank.rank if vs_rank is None else vs_rank)
    if vs_rank is None or vs_rank == rank.rank:
        raise InvalidQueryError("rank_diff needs another rank than the one shown (vs_rank)")
    return dump_id, ws.dump(dump_id).rank(vs_rank)


def _values(ws: Workspace, dump_id: str, rank: Rank, graph: Graph, it: int, m: ov.Metric,
            vs: tuple[int | None, str | None]) -> dict[str, float]:
    """Per node, its value of ``m`` in iteration ``it`` (statistics read through the dump's cache)."""
    if m.name == "hits":
        w = ws.watch(dump_id)
        w.check(rank.rank, ws.readable(dump_id, rank.rank, [it]))
        counts: dict[str, int] = {}
        for h in w.hits(rank.rank, it):
            if h.hit.graph == graph.graph_id:
                for n in query.hit_nodes(graph, [h.to_dict()]):
                    counts[n] = counts.get(n, 0) + 1
        return ov.hit_values(counts)       # not remembered: hits change as watchpoints do
    if m.needs:
        other_id, other = _other(ws, dump_id, rank, *vs)
        fn = lambda: ws.stats_of(dump_id, lambda _c: ov.diff_values(         # noqa: E731
            rank, graph, it, _stats_fn(ws, dump_id), other, _stats_fn(ws, other_id)))
        return _remember((dump_id, rank.rank, graph.graph_id, it, m.name, other_id, other.rank),
                         (ws.dump(dump_id), ws.dump(other_id)), fn)
    fn = lambda: ws.stats_of(dump_id, lambda _c: ov.node_values(rank, graph, it, m.name, _stats_fn(ws, dump_id)))  # noqa: E731
    return _remember((dump_id, rank.rank, graph.graph_id, it, m.name), (ws.dump(dump_id),), fn)


def scope_overlay(ws: Workspace, dump_id: str, rank: Rank, graph: Graph, it: int, name: str, path: str,
                  vs: tuple[int | None, str | None], view_opts: dict[str, Any]) -> dict[str, Any]:
    """The overlay of one scope level: the metric, its scale over the whole graph, and per child id its
    worst value and the node that has it. An iteration a job may still be writing is ``pending``."""
    m = ov.metric(name)
    head = {"metric": m.name, "label": m.label, "about": m.about, "iteration": it, "share": m.share}
    if it not in rank.iterations(graph.graph_id):        # the page's replay is on another graph's iteration
        return {**head, "missing": f"graph {graph.graph_id} did not run iteration {it}", "scale": ov.scale({}, m),
                "children": {}}
    if not ws.readable(dump_id, rank.rank, [it]):
        return {**head, "pending": True, "scale": ov.scale({}, m), "children": {}}
    if m.name == "hits" and not len(ws.watch(dump_id)):
        head["note"] = ("no watchpoint is set: add one in the Watchpoints tab, or use the triage's again "
                        "(\"Back to the triage's\" there)")
    values = _values(ws, dump_id, rank, graph, it, m, vs)
    rolled = query.scope_rollup(graph, path, values, **view_opts)
    return {**head, "pending": False, "scale": ov.scale(values, m), "nodes": len(values),
            "children": {c: {"value": v, "node": n} for c, (v, n) in rolled.items()}}
