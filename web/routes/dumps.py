"""The dumps served, their triage, `tdbg info`, the node kinds and the ranks (the Ranks tab's rows and bands)."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from debugger import KINDS, QueryError, Rank, query
from debugger.errors import InvalidQueryError
from debugger.model import serialize
from debugger.stats.cache import StatsCache
from debugger.views import export
from debugger.views import ranks as rank_views
from debugger.views import triage as _triage
from debugger.watch import summary

from ..params import current_dump_id, flag_arg, int_arg, need_arg, paged, workspace

dumps_bp = Blueprint("dumps", __name__, url_prefix="/api")
RANK_ROWS = 100     # rows of the Ranks tab a page holds when the request gives no end


@dumps_bp.get("/dumps")
def dumps() -> dict[str, Any]:
    """The dumps found at the app's path."""
    ws = workspace()
    items = []
    for k, v in ws.ids.items():
        t = ws.peek_triage(k)     # health only when known: the chooser asks /triage for the others
        items.append({"id": k, "path": v, "where": ws.shown(v), "ranks": ws.dump(k).rank_ids,
                      "health": t["health"] if t else None})
    return paged(items, path=ws.path)


@dumps_bp.get("/triage")
def triage() -> dict[str, Any]:
    """What is wrong with the dump: ``{"state": "running", "progress"}`` while the background job
    works (poll again), then ``{"state": "done", "result"}`` (:func:`debugger.views.triage.triage`). Of a dump
    a running job is writing, the iterations it may still be writing are ``left_out`` and the warnings that
    appeared since it was last quiet are ``pending_warnings``, as in ``GET info``. With ``start=0`` no job
    is started: ``{"state": "idle"}`` when neither this server nor the cache knows it (the graph's offer of
    the findings asks so, not to compete with the page it draws)."""
    dump_id = current_dump_id()
    out = workspace().triage(dump_id, start=flag_arg("start", True))
    res = out.get("result")
    if res and res.get("below") is not None:     # made while a job was writing
        res = dict(res)
        res["warnings"], res["pending_warnings"] = workspace().settled_warnings(dump_id, res["warnings"])
        res["warning_count"] -= len(res["pending_warnings"])
        res["health"] = _triage.health(res)
        out = {**out, "result": res}
    return out


@dumps_bp.get("/info")
def info() -> dict[str, Any]:
    """Overview of one dump: `tdbg info --json`, plus the watchpoint summary; while a job is writing it,
    the warnings that may be about a file still being written are ``pending_warnings``."""
    dump_id = current_dump_id()
    out = serialize.dump_info(workspace().dump(dump_id))
    out["id"] = dump_id
    out["warnings"], out["pending_warnings"] = workspace().settled_warnings(dump_id, out["warnings"])
    out["watch"] = summary.session_summary(workspace().watch(dump_id))
    return out


@dumps_bp.get("/kinds")
def kinds() -> dict[str, Any]:
    """The library's node kinds, in its order: the front end draws its legends and colours from them."""
    return {"items": [str(getattr(k, "value", k)) for k in KINDS], "colors": dict(export.KIND_COLORS)}


@dumps_bp.get("/ranks")
def ranks() -> dict[str, Any]:
    """Ranks of the dump, `tdbg info` objects, paged by ``begin`` and ``end``; with ``q`` or ``sort``: the rows
    of the Ranks tab, those matching ``q`` (rank, host, group), sorted (rank | problems | hits | divergent |
    warnings), 100 a page unless ``end`` says otherwise, each with its problem counts from the triage and
    ``first``, the tensor its first problem opens (the Ranks tab at 1,000 ranks)."""
    if "q" not in request.args and "sort" not in request.args:
        return paged([serialize.rank_info(r) for r in workspace().dump(current_dump_id()).ranks])
    sort = request.args.get("sort", "rank")
    if sort not in rank_views.SORTS:
        raise InvalidQueryError(f"bad sort {sort!r}: expected one of {', '.join(rank_views.SORTS)}")
    dump_id = current_dump_id()
    d, t = workspace().dump(dump_id), workspace().peek_triage(dump_id)
    rows = _rank_rows(d, t)
    matching = rank_views.select_rows(rows, request.args.get("q", ""), sort)
    page = query.page(matching, int_arg("begin", 0) or 0, int_arg("end"), RANK_ROWS)
    return {**page.to_dict(count=len(rows), sort=sort, triaged=t is not None),
            "items": [{**_rank_summary(d.rank(x["rank"])), **x} for x in page.items]}


def _rank_summary(r: Rank) -> dict[str, Any]:
    """What a row of the Ranks tab shows of a rank (its `tdbg info` object less the parameters, the
    metadata and the per-graph details: a page of 100 rows stays small)."""
    return {"rank": r.rank, "path": r.path, "iterations": r.iterations(), "graphs": r.graph_ids,
            "tensor_files": r.tensor_file_count(), "tensor_bytes": r.tensor_bytes(), "saved": r.info.saved,
            "nodes_by_kind": dict(sorted(r.kind_counts().items()))}


def _rank_rows(d: Any, t: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per rank: its group, host and problem counts, from the triage when it is known (no rank is
    listed again: at 1,000 ranks that takes seconds), else from the ranks' own metadata."""
    heat = (t or {}).get("heatmap")
    if heat:
        group = {heat["rows"][i]: g["name"] for g in heat["groups"] for i in range(g["start"], g["start"] + g["count"])}
        hosts, problems = heat.get("hosts", {}), heat.get("problems", {})
    else:
        infos = {r.rank: r.info for r in d.ranks}
        named = {k: h for k, i in infos.items() if (h := (i.raw or {}).get("host") or (i.raw or {}).get("hostname"))}
        group = {r: g["name"] for g in rank_views.rank_groups(d.rank_ids, {k: i.layout for k, i in infos.items()}, named)
                 for r in g["ranks"]}
        hosts = {str(k): h for k, h in named.items()}
        problems = {}
    rows = []
    for r in d.ranks:
        p = problems.get(str(r.rank), {})
        rows.append({"rank": r.rank, "group": group.get(r.rank), "host": hosts.get(str(r.rank)),
                     "hits": p.get("hits", 0), "divergent": p.get("divergent", 0), "warnings": len(r.warnings),
                     "first": rank_views.first_tensor(heat, p) if heat else None})
    return rows


@dumps_bp.get("/band")
def band() -> dict[str, Any]:
    """One statistic of one tensor across the ranks, per iteration, as a band with its outlier ranks
    named (debugger.rank_views.band): the server sends a summary, never one series per rank."""
    graph, node = int_arg("graph", 0) or 0, need_arg("node")
    io, slot, stat = request.args.get("io", "output"), int_arg("slot", 0) or 0, request.args.get("stat", "mean")
    if stat not in _triage.BAND_STATS:
        raise InvalidQueryError(f"bad stat {stat!r}: expected one of {', '.join(_triage.BAND_STATS)}")
    dump_id = current_dump_id()
    d = workspace().dump(dump_id)
    series = workspace().stats_of(dump_id, lambda c: _triage.stat_series(d, graph, node, io, slot, stat,
                                                                          c or StatsCache(enabled=False)))
    if not series:
        raise QueryError(d.root, f"no rank holds {node} {io}:{slot} in graph {graph}")
    out = rank_views.band(series)
    out.update({"graph": graph, "node": node, "io": io, "slot": slot, "stat": stat})
    if len(series) < rank_views.LINES_BELOW:      # a band of a few ranks says little: their lines too
        out["series"] = [{"rank": r, "points": p} for r, p in sorted(series.items())]
    return out
