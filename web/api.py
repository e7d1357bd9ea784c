"""The /api blueprint: read the arguments, call one library function, return JSON.

Every list is a page (``begin`` inclusive, ``end`` exclusive; no end = one page of PAGE_SIZE)
echoing ``begin``, ``end`` and ``total``. Every request may name the dump with ``?dump=ID``
(ids from ``/api/dumps``; default: the first). Errors are ``{"error": message}`` with 400
(malformed argument, unusable dump) or 404 (no such rank, graph, node, tensor...).
"""
from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from debugger import KINDS, QueryError, Rank, query, watch
from debugger.model import serialize, sourceroots
from debugger.views import export, ranks as rank_views
from debugger.views import triage as _triage
from debugger.stats.cache import StatsCache
from debugger.errors import InvalidQueryError
from debugger.watch import summary
from debugger.watch.session import describe_watchpoint, watchpoints_from_request

from . import overlays, validate
from .params import (current_dump_id, flag_arg, graph_arg, int_arg, json_body, need_arg, paged, rank_arg, tensor_arg,
                     value_cap, view_options, workspace)

bp = Blueprint("api", __name__, url_prefix="/api")
RANK_ROWS = 100     # rows of the Ranks tab a page holds when the request gives no end

# -- dumps, ranks, graphs ---------------------------------------------------------------------------
@bp.get("/dumps")
def dumps() -> dict[str, Any]:
    """The dumps found at the app's path."""
    ws = workspace()
    items = []
    for k, v in ws.ids.items():
        t = ws.peek_triage(k)     # health only when known: the chooser asks /triage for the others
        items.append({"id": k, "path": v, "where": ws.shown(v), "ranks": ws.dump(k).rank_ids,
                      "health": t["health"] if t else None})
    return paged(items, path=ws.path)


@bp.get("/triage")
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


@bp.get("/info")
def info() -> dict[str, Any]:
    """Overview of one dump: `tdbg info --json`, plus the watchpoint summary; while a job is writing it,
    the warnings that may be about a file still being written are ``pending_warnings``."""
    dump_id = current_dump_id()
    out = serialize.dump_info(workspace().dump(dump_id))
    out["id"] = dump_id
    out["warnings"], out["pending_warnings"] = workspace().settled_warnings(dump_id, out["warnings"])
    out["watch"] = summary.session_summary(workspace().watch(dump_id))
    return out


@bp.get("/kinds")
def kinds() -> dict[str, Any]:
    """The library's node kinds, in its order: the front end draws its legends and colours from them."""
    return {"items": [str(getattr(k, "value", k)) for k in KINDS], "colors": dict(export.KIND_COLORS)}


@bp.get("/ranks")
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
            "tensor_files": r.tensor_file_count(), "tensor_bytes": r.tensor_bytes(),
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


@bp.get("/band")
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


@bp.get("/ranks/<int:rank>/graphs")
def graphs(rank: int) -> dict[str, Any]:
    """Graphs of one rank."""
    r = rank_arg(rank)
    items = []
    for gid in r.graph_ids:
        g = r.graphs.get(gid)
        items.append({"graph": gid, "name": g.name if g else None, "nodes": len(g) if g else 0,
                      "iterations": r.iterations(gid), "kinds": g.kind_counts() if g else {}})
    return paged(items, rank=rank)


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/scope")
def scope(rank: int, graph_id: int) -> dict[str, Any]:
    """Children of one scope, folded, with edges and marks (watchpoint hits, a code line's nodes); with
    ``overlay=METRIC`` (and ``vs_rank`` / ``vs_dump`` for a difference) each child's worst value of it in
    ``iteration`` and the scale over the whole graph (web/overlays.py)."""
    r, g = graph_arg(rank, graph_id)
    marks: dict[str, set[str]] = {}
    it = int_arg("iteration")
    dump_id = current_dump_id()
    if it is not None:
        w = workspace().watch(dump_id)
        if len(w):
            w.check(rank, workspace().readable(dump_id, rank, [it]))
            marks["hit"] = query.hit_nodes(g, [h.to_dict() for h in w.hits(rank, it) if h.hit.graph == graph_id])
    line = request.args.get("line")
    if line:
        marks.update(query.marks_for_line(workspace().dump(dump_id), r, graph_id, line, workspace().sources.statement_lines))
    path = request.args.get("path", "")
    out = query.scope_view(g, path, begin=int_arg("begin", 0) or 0, end=int_arg("end"), marks=marks, **view_options())
    name = request.args.get("overlay")
    if name and it is not None:
        vs = (int_arg("vs_rank"), request.args.get("vs_dump") or None)
        out["overlay"] = overlays.scope_overlay(workspace(), dump_id, r, g, it, name, path, vs, view_options())
    return out


@bp.get("/overlays")
def overlay_metrics() -> dict[str, Any]:
    """What the graph can be coloured by: each metric's name, words, and what it compares with."""
    return {"items": [{"name": m.name, "label": m.label, "about": m.about, "share": m.share, "needs": m.needs}
                      for m in query.overlay.METRICS.values()]}


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/search")
def search(rank: int, graph_id: int) -> dict[str, Any]:
    """Nodes whose name contains ``q``, each with the scope path to open."""
    _, g = graph_arg(rank, graph_id)
    return paged(query.search_nodes(g, need_arg("q"), **view_options()), q=request.args.get("q"))


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/node")
def node(rank: int, graph_id: int) -> dict[str, Any]:
    """One node: kind, op type, inputs, outputs, stack, tensors of ``iteration``, its hits there."""
    r, g = graph_arg(rank, graph_id)
    it = int_arg("iteration")
    name = need_arg("node")
    out = query.node_detail(r, g, name, it, **view_options())
    out["hits"] = []
    if it is not None:
        dump_id = current_dump_id()
        w = workspace().watch(dump_id)
        if len(w):
            w.check(rank, workspace().readable(dump_id, rank, [it]))
            out["hits"] = [h.to_dict() for h in w.hits(rank, it) if h.hit.node == name and h.hit.graph == graph_id]
    return out


# -- export -----------------------------------------------------------------------------------------
@bp.get("/export/formats")
def export_formats() -> dict[str, Any]:
    """The graph export formats this server can produce (svg and png only with Graphviz)."""
    return {"formats": export.available_formats(), "graphviz": export.graphviz_available()}


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/export")
def export_scope(rank: int, graph_id: int) -> Response:
    """One scope level as the graph view shows it (``scope``, ``fold``, ``framework``), as a
    ``format=dot|svg|png`` download."""
    fmt = export.check_format(request.args.get("format", "dot"))   # a bad format is a 400 before any work
    r, g = graph_arg(rank, graph_id)
    exp = export.export_scope(g, request.args.get("scope", ""), fmt, rank=r.rank, **view_options())
    return Response(exp.data, mimetype=exp.mimetype,
                    headers={"Content-Disposition": f'attachment; filename="{exp.filename}"'})


# -- tensors ----------------------------------------------------------------------------------------
@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor")
def tensor(rank: int, graph_id: int) -> dict[str, Any]:
    """Digest, statistics and histogram of one tensor in one iteration."""
    r, ref = tensor_arg(rank, graph_id)
    bins = int_arg("bins")
    if bins is not None and not 1 <= bins <= 512:
        raise InvalidQueryError(f"bad bins {bins}: expected 1 to 512")
    out = workspace().stats_of(current_dump_id(), lambda c: query.tensor_summary(ref, c, bins))
    out["previous_iteration"] = r.previous_iteration(graph_id, ref.iteration)
    return out


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/history")
def tensor_history(rank: int, graph_id: int) -> dict[str, Any]:
    """Statistics of the tensor in every dumped iteration (a page of iterations)."""
    r, ref = tensor_arg(rank, graph_id)
    begin, end = int_arg("begin", 0) or 0, int_arg("end")
    pg = workspace().stats_of(current_dump_id(), lambda c: query.tensor_history(r, ref, c, begin, end))
    return pg.to_dict(node=ref.node, io=ref.io, slot=ref.slot)


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/values")
def tensor_values(rank: int, graph_id: int) -> dict[str, Any]:
    """Values of a slice (``slice=[0, :, :]``), at most ``cap`` of them."""
    _, ref = tensor_arg(rank, graph_id)
    return query.tensor_values(ref, request.args.get("slice"), value_cap())


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/diff")
def tensor_diff(rank: int, graph_id: int) -> dict[str, Any]:
    """Current, previous-iteration and difference values of a slice, with their statistics."""
    r, ref = tensor_arg(rank, graph_id)
    return query.tensor_diff(r, ref, request.args.get("slice"), value_cap())


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/npy")
def tensor_npy(rank: int, graph_id: int) -> Response:
    """The tensor as an .npy download."""
    _, ref = tensor_arg(rank, graph_id)
    name, data = query.tensor_npy(ref)
    return Response(data, mimetype="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


# -- code ---------------------------------------------------------------------------------------------
@bp.get("/ranks/<int:rank>/code/files")
def code_files(rank: int) -> dict[str, Any]:
    """Source files whose lines created nodes (framework files with ``framework=1``)."""
    r = rank_arg(rank)
    files = query.source_files(workspace().dump(current_dump_id()), r, flag_arg("framework"), request.args.get("q"))
    return paged(sourceroots.mark_found(files, workspace().sources), rank=rank)


@bp.get("/ranks/<int:rank>/code/lines")
def code_lines(rank: int) -> dict[str, Any]:
    """The lines of one file that created nodes, with forward/backward node counts."""
    d = query.source_lines(workspace().dump(current_dump_id()), rank_arg(rank), need_arg("file"), workspace().sources.layer_lines)
    d.update(workspace().sources.describe(d["file"]))
    lines = d.pop("lines")
    return paged(lines, **d)


@bp.get("/ranks/<int:rank>/code/source")
def code_source(rank: int) -> dict[str, Any]:
    """The text of a source file named by the stacks, when it maps to a file under the source roots."""
    rank_arg(rank)
    return sourceroots.source_text(workspace().dump(current_dump_id()), workspace().sources, need_arg("file"))


@bp.get("/ranks/<int:rank>/code/nodes")
def code_nodes(rank: int) -> dict[str, Any]:
    """Nodes made by ``location=FILE:LINE`` (or ``file`` and ``line``), forward first."""
    loc = request.args.get("location") or f"{need_arg('file')}:{need_arg('line')}"
    d = query.nodes_at_location(workspace().dump(current_dump_id()), rank_arg(rank), loc, workspace().sources.statement_lines,
                                workspace().sources.layer_lines)
    nodes = d.pop("nodes")
    return paged(nodes, **d)


# -- watchpoints -------------------------------------------------------------------------------------
@bp.get("/conditions")
def conditions() -> dict[str, Any]:
    """The condition registry (forms are generated from it) and the presets."""
    return paged(watch.describe_conditions(), presets=watch.PRESETS)


@bp.get("/watchpoints")
def watchpoints() -> dict[str, Any]:
    """Watchpoints set on the dump, each with its coverage over what was checked so far (of ``rank``),
    and the verdict of those checks."""
    w = workspace().watch(current_dump_id())
    rank = int_arg("rank")
    cov = w.coverage(rank)
    items = [{**i, "coverage": summary.coverage_json(cov, i["id"])} for i in w.describe()]
    return paged(items, **summary.verdict(len(w.hits(rank)), cov))


@bp.post("/watchpoints")
def add_watchpoint() -> tuple[dict[str, Any], int]:
    """Add one (``{"name", "params", "node", "scope"}`` or ``{"spec": "name:k=v"}``) or a preset."""
    try:
        wps = watchpoints_from_request(validate.watchpoint_request(json_body()))
    except ValueError as exc:
        raise InvalidQueryError(str(exc)) from None
    w = workspace().watch(current_dump_id())
    ids = w.add(wps)
    have = w.watchpoints()
    return {"created": [describe_watchpoint(i, have[i]) for i in ids], "watchpoints": w.describe()}, 201


@bp.delete("/watchpoints/<int:wid>")
def delete_watchpoint(wid: int) -> dict[str, Any]:
    """Remove one watchpoint (its hits go with it)."""
    w = workspace().watch(current_dump_id())
    try:
        w.remove(wid)
    except KeyError:
        raise QueryError(None, f"no watchpoint {wid}") from None
    return {"deleted": wid, "watchpoints": w.describe()}


@bp.delete("/watchpoints")
def clear_watchpoints() -> dict[str, Any]:
    """Remove every watchpoint."""
    workspace().watch(current_dump_id()).clear()
    return {"deleted": "all", "watchpoints": []}


@bp.get("/hits")
def hits() -> dict[str, Any]:
    """Hits, first occurrence first: of ``iteration`` (checked now if needed), or with ``all=1`` of
    every iteration; ``rank`` and ``watchpoint`` filter. ``groups`` counts them per watchpoint;
    ``coverage`` (per watchpoint id) and ``verdict`` say what the checks of that rank and iteration cover."""
    dump_id = current_dump_id()
    d = workspace().dump(dump_id)
    w = workspace().watch(dump_id)
    rank, it, wid = int_arg("rank"), int_arg("iteration"), int_arg("watchpoint")
    ranks = [rank] if rank is not None else d.rank_ids
    for r in ranks:
        its = d.rank(r).iterations()
        if it is not None:
            if it not in its:
                raise QueryError(d.rank(r).path, f"no iteration {it}")
            w.check(r, workspace().readable(dump_id, r, [it]))
        elif flag_arg("all"):
            w.check(r, workspace().readable(dump_id, r, its))
    found = [h.to_dict() for h in w.hits(rank, it, wid)]
    cov = w.coverage(rank, it)
    errors = w.errors(rank, it)
    return paged(found, groups=summary.hit_groups(w, rank, it), checked=w.checked(rank),
                 errors=[e.to_dict() for e in errors[:100]], error_count=len(errors),
                 coverage=[{"id": i, **summary.coverage_json(cov, i)} for i in w.watchpoints()],
                 **summary.verdict(len(w.hits(rank, it)), cov))


@bp.post("/replay/next_hit")
def next_hit() -> dict[str, Any]:
    """Check the iterations after ``iteration`` one by one and stop at the first with a hit."""
    body = json_body()
    dump_id = current_dump_id()
    d = workspace().dump(dump_id)
    w = workspace().watch(dump_id)
    if not len(w):
        raise InvalidQueryError("no watchpoint is set: add one first")
    rank = validate.int_field(body, "rank") or 0
    after = validate.int_field(body, "iteration")
    after = -1 if after is None else after
    r = d.rank(rank)
    it, scanned = w.next_hit(rank, after, workspace().readable(dump_id, rank, r.iterations()))
    found = [h.to_dict() for h in w.hits(rank, it)] if it is not None else []
    return {"rank": rank, "after": after, "iteration": it, "checked": scanned,
            "hits": query.page(found, 0, None, 200).to_dict()}


# -- ranks compare ------------------------------------------------------------------------------------
def _settled_iterations(d: Any, below: int) -> set[int]:
    """The dump's iterations below ``below`` (a QueryError when there is none yet)."""
    its = _triage.iterations_below(d, below)
    if not its:
        raise QueryError(d.root, f"no iteration is complete yet: the job is still writing iteration {below}")
    return its


@bp.get("/compare")
def compare() -> tuple[dict[str, Any], int]:
    """Every rank against ``base`` (``debugger.compare.compare_ranks``): the `tdbg compare --json`
    object with its pairs paged (warning and error pairs, worst first; ``all=1`` for every pair).
    501 with a note when the compare module is not installed."""
    try:
        from debugger.compare import compare_ranks   # optional: an install may leave the compare engine out
    except ImportError:
        return {"available": False, "error": "rank comparison is not available in this install "
                "(debugger.compare.compare_ranks is missing)"}, 501
    dump_id = current_dump_id()
    base = int_arg("base", 0) or 0
    all_pairs = flag_arg("all")
    workspace().settle(dump_id)
    below = workspace().settled_below(dump_id)     # a job writing the dump: what it may still be writing is left out
    res = workspace().compared(dump_id, base, lambda d, c: compare_ranks(
        d, base=base, jobs=1, cache=c, iterations=None if below is None else _settled_iterations(d, below)))
    out = res.to_dict(all_pairs=all_pairs)
    if not all_pairs:   # worst first, as the CLI prints them
        out["pairs"] = [p.to_dict() for p in res.divergent()]
    pairs = out.pop("pairs")
    return {"available": True, "base": base, "result": out, "pairs": paged(pairs)}, 200
