"""The /api blueprint: read the arguments, call one library function, return JSON.

Every list is a page (``begin`` inclusive, ``end`` exclusive; no end = one page of PAGE_SIZE)
echoing ``begin``, ``end`` and ``total``. Every request may name the dump with ``?dump=ID``
(ids from ``/api/dumps``; default: the first). Errors are ``{"error": message}`` with 400
(malformed argument, unusable dump) or 404 (no such rank, graph, node, tensor...).
"""
from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, abort, current_app, request

from debugger import KINDS, Graph, QueryError, Rank, TensorRef, query, watch
from debugger.model import serialize, sourceroots
from debugger.views import export, ranks as rank_views
from debugger.views import triage as _triage
from debugger.stats.cache import StatsCache
from debugger.errors import InvalidQueryError
from debugger.watch.session import SWEEP_ID, CoverageSoFar, describe_watchpoint, watchpoints_from_request

from . import guard, overlays, validate
from .session import Workspace

bp = Blueprint("api", __name__, url_prefix="/api")

_TRUE = ("1", "true", "yes", "on")


# -- argument helpers -------------------------------------------------------------------------------
def _ws() -> Workspace:
    return current_app.extensions["tdbg"]


def _dump_id() -> str:
    return _ws().resolve(request.args.get("dump"))


def _int(name: str, default: int | None = None) -> int | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    return validate.int_text(name, raw)


def _need(name: str) -> str:
    v = request.args.get(name)
    if v is None or v == "":
        raise InvalidQueryError(f"missing parameter {name!r}")
    return v


def _flag(name: str, default: bool = False) -> bool:
    raw = request.args.get(name)
    return default if raw is None else raw.lower() in _TRUE


def _page(items: list[Any], **extra: Any) -> dict[str, Any]:
    begin = _int("begin", 0) or 0
    return query.page(items, begin, _int("end"), current_app.config["PAGE_SIZE"]).to_dict(**extra)


def _rank(rank: int) -> Rank:
    return _ws().dump(_dump_id()).rank(rank)


def _graph(rank: int, graph_id: int) -> tuple[Rank, Graph]:
    r = _rank(rank)
    return r, r.graph(graph_id)


def _iteration(r: Rank, graph_id: int) -> int:
    its = r.iterations(graph_id)
    it = _int("iteration")
    if it is None:
        if not its:
            raise QueryError(r.path, f"graph {graph_id} has no dumped iteration")
        return its[0]
    return it


def _tensor(rank: int, graph_id: int) -> tuple[Rank, TensorRef]:
    r = _rank(rank)
    it = _iteration(r, graph_id)
    if not _ws().readable(_dump_id(), rank, [it]):     # a file of it may be half-written: not read, not cached
        abort(409, description=f"rank {rank} iteration {it} is still being written by the job: its tensors "
                               f"are read once a later iteration appears or the dump is quiet for 2 s")
    return r, query.find_tensor(r, graph_id, it, _need("node"), request.args.get("io", "output"),
                                _int("slot", 0) or 0)


def _view_opts() -> dict[str, Any]:
    return {"fold": _int("fold", current_app.config["FOLD"]), "framework": _flag("framework")}


def _cap() -> int:
    cap = current_app.config["VALUE_CAP"]
    want = _int("cap", cap) or cap
    if want <= 0:
        raise InvalidQueryError(f"bad cap {want}: expected a positive integer")
    return min(want, cap)


def _body() -> dict[str, Any]:
    # Parsed by the guard: size- and depth-checked, no NaN/Infinity, an object.
    data = guard.body()
    if data is None:
        raise InvalidQueryError("bad body: expected a JSON object (Content-Type: application/json)")
    return data


# -- dumps, ranks, graphs ---------------------------------------------------------------------------
@bp.get("/dumps")
def dumps() -> dict[str, Any]:
    """The dumps found at the app's path."""
    ws = _ws()
    items = []
    for k, v in ws.ids.items():
        t = ws.peek_triage(k)     # health only when known: the chooser asks /triage for the others
        items.append({"id": k, "path": v, "where": ws.shown(v), "ranks": ws.dump(k).rank_ids,
                      "health": t["health"] if t else None})
    return _page(items, path=ws.path)


@bp.get("/triage")
def triage() -> dict[str, Any]:
    """What is wrong with the dump: ``{"state": "running", "progress"}`` while the background job
    works (poll again), then ``{"state": "done", "result"}`` (:func:`debugger.views.triage.triage`). Of a dump
    a running job is writing, the iterations it may still be writing are ``left_out`` and the warnings that
    appeared since it was last quiet are ``pending_warnings``, as in ``GET info``. With ``start=0`` no job
    is started: ``{"state": "idle"}`` when neither this server nor the cache knows it (the graph's offer of
    the findings asks so, not to compete with the page it draws)."""
    dump_id = _dump_id()
    out = _ws().triage(dump_id, start=_flag("start", True))
    res = out.get("result")
    if res and res.get("below") is not None:     # made while a job was writing
        res = dict(res)
        res["warnings"], res["pending_warnings"] = _ws().settled_warnings(dump_id, res["warnings"])
        res["warning_count"] -= len(res["pending_warnings"])
        res["health"] = _triage.health(res)
        out = {**out, "result": res}
    return out


@bp.get("/info")
def info() -> dict[str, Any]:
    """Overview of one dump: `tdbg info --json`, plus the watchpoint summary; while a job is writing it,
    the warnings that may be about a file still being written are ``pending_warnings``."""
    dump_id = _dump_id()
    out = serialize.dump_info(_ws().dump(dump_id))
    out["id"] = dump_id
    out["warnings"], out["pending_warnings"] = _ws().settled_warnings(dump_id, out["warnings"])
    out["watch"] = _watch_summary(dump_id)
    return out


@bp.get("/kinds")
def kinds() -> dict[str, Any]:
    """The library's node kinds, in its order: the front end draws its legends and colours from them."""
    return {"items": [str(getattr(k, "value", k)) for k in KINDS], "colors": dict(export.KIND_COLORS)}


@bp.get("/ranks")
def ranks() -> dict[str, Any]:
    """Ranks of the dump, `tdbg info` objects; with any of ``q``, ``sort``, ``offset``, ``limit``: one
    page of the ranks matching ``q`` (rank, host, group), sorted (rank | problems | hits | divergent |
    warnings), each with its problem counts from the triage and ``first``, the tensor its first problem
    opens (the Ranks tab at 1,000 ranks)."""
    if not any(k in request.args for k in ("q", "sort", "offset", "limit")):
        return _page([serialize.rank_info(r) for r in _ws().dump(_dump_id()).ranks])
    sort = request.args.get("sort", "rank")
    if sort not in rank_views.SORTS:
        raise InvalidQueryError(f"bad sort {sort!r}: expected one of {', '.join(rank_views.SORTS)}")
    offset, limit = _int("offset", 0) or 0, _int("limit", 100)
    if limit is None or not 0 <= limit <= 1000 or offset < 0:
        raise InvalidQueryError("bad offset/limit: expected offset >= 0 and 0 <= limit <= 1000")
    dump_id = _dump_id()
    d, t = _ws().dump(dump_id), _ws().peek_triage(dump_id)
    rows = _rank_rows(d, t)
    total, page = rank_views.select_rows(rows, request.args.get("q", ""), sort, offset, limit)
    items = [{**_rank_summary(d.rank(x["rank"])), **x} for x in page]
    return {"items": items, "total": total, "count": len(rows), "offset": offset, "limit": limit,
            "sort": sort, "triaged": t is not None}


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
    graph, node = _int("graph", 0) or 0, _need("node")
    io, slot, stat = request.args.get("io", "output"), _int("slot", 0) or 0, request.args.get("stat", "mean")
    if stat not in _triage.BAND_STATS:
        raise InvalidQueryError(f"bad stat {stat!r}: expected one of {', '.join(_triage.BAND_STATS)}")
    d = _ws().dump(_dump_id())
    series = _ws().stats_of(_dump_id(), lambda c: _triage.stat_series(d, graph, node, io, slot, stat, c or StatsCache(enabled=False)))
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
    r = _rank(rank)
    items = []
    for gid in r.graph_ids:
        g = r.graphs.get(gid)
        items.append({"graph": gid, "name": g.name if g else None, "nodes": len(g) if g else 0,
                      "iterations": r.iterations(gid), "kinds": g.kind_counts() if g else {}})
    return _page(items, rank=rank)


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/scope")
def scope(rank: int, graph_id: int) -> dict[str, Any]:
    """Children of one scope, folded, with edges and marks (watchpoint hits, a code line's nodes); with
    ``overlay=METRIC`` (and ``vs_rank`` / ``vs_dump`` for a difference) each child's worst value of it in
    ``iteration`` and the scale over the whole graph (web/overlays.py)."""
    r, g = _graph(rank, graph_id)
    marks: dict[str, set[str]] = {}
    it = _int("iteration")
    dump_id = _dump_id()
    if it is not None:
        w = _ws().watch(dump_id)
        if len(w):
            w.check(rank, _ws().readable(dump_id, rank, [it]))
            marks["hit"] = query.hit_nodes(g, [h.to_dict() for h in w.hits(rank, it) if h.hit.graph == graph_id])
    line = request.args.get("line")
    if line:
        marks.update(query.marks_for_line(_ws().dump(dump_id), r, graph_id, line, _ws().sources.statement_lines))
    path = request.args.get("path", "")
    out = query.scope_view(g, path, begin=_int("begin", 0) or 0, end=_int("end"), marks=marks, **_view_opts())
    name = request.args.get("overlay")
    if name and it is not None:
        vs = (_int("vs_rank"), request.args.get("vs_dump") or None)
        out["overlay"] = overlays.scope_overlay(_ws(), dump_id, r, g, it, name, path, vs, _view_opts())
    return out


@bp.get("/overlays")
def overlay_metrics() -> dict[str, Any]:
    """What the graph can be coloured by: each metric's name, words, and what it compares with."""
    return {"items": [{"name": m.name, "label": m.label, "about": m.about, "share": m.share, "needs": m.needs}
                      for m in query.overlay.METRICS.values()]}


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/search")
def search(rank: int, graph_id: int) -> dict[str, Any]:
    """Nodes whose name contains ``q``, each with the scope path to open."""
    _, g = _graph(rank, graph_id)
    return _page(query.search_nodes(g, _need("q"), **_view_opts()), q=request.args.get("q"))


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/node")
def node(rank: int, graph_id: int) -> dict[str, Any]:
    """One node: kind, op type, inputs, outputs, stack, tensors of ``iteration``, its hits there."""
    r, g = _graph(rank, graph_id)
    it = _int("iteration")
    name = _need("node")
    out = query.node_detail(r, g, name, it, **_view_opts())
    out["hits"] = []
    if it is not None:
        dump_id = _dump_id()
        w = _ws().watch(dump_id)
        if len(w):
            w.check(rank, _ws().readable(dump_id, rank, [it]))
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
    r, g = _graph(rank, graph_id)
    exp = export.export_scope(g, request.args.get("scope", ""), fmt, rank=r.rank, **_view_opts())
    return Response(exp.data, mimetype=exp.mimetype,
                    headers={"Content-Disposition": f'attachment; filename="{exp.filename}"'})


# -- tensors ----------------------------------------------------------------------------------------
@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor")
def tensor(rank: int, graph_id: int) -> dict[str, Any]:
    """Digest, statistics and histogram of one tensor in one iteration."""
    r, ref = _tensor(rank, graph_id)
    bins = _int("bins")
    if bins is not None and not 1 <= bins <= 512:
        raise InvalidQueryError(f"bad bins {bins}: expected 1 to 512")
    out = _ws().stats_of(_dump_id(), lambda c: query.tensor_summary(ref, c, bins))
    out["previous_iteration"] = r.previous_iteration(graph_id, ref.iteration)
    return out


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/history")
def tensor_history(rank: int, graph_id: int) -> dict[str, Any]:
    """Statistics of the tensor in every dumped iteration (a page of iterations)."""
    r, ref = _tensor(rank, graph_id)
    begin, end = _int("begin", 0) or 0, _int("end")
    pg = _ws().stats_of(_dump_id(), lambda c: query.tensor_history(r, ref, c, begin, end))
    return pg.to_dict(node=ref.node, io=ref.io, slot=ref.slot)


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/values")
def tensor_values(rank: int, graph_id: int) -> dict[str, Any]:
    """Values of a slice (``slice=[0, :, :]``), at most ``cap`` of them."""
    _, ref = _tensor(rank, graph_id)
    return query.tensor_values(ref, request.args.get("slice"), _cap())


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/diff")
def tensor_diff(rank: int, graph_id: int) -> dict[str, Any]:
    """Current, previous-iteration and difference values of a slice, with their statistics."""
    r, ref = _tensor(rank, graph_id)
    return query.tensor_diff(r, ref, request.args.get("slice"), _cap())


@bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/tensor/npy")
def tensor_npy(rank: int, graph_id: int) -> Response:
    """The tensor as an .npy download."""
    _, ref = _tensor(rank, graph_id)
    name, data = query.tensor_npy(ref)
    return Response(data, mimetype="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


# -- code ---------------------------------------------------------------------------------------------
@bp.get("/ranks/<int:rank>/code/files")
def code_files(rank: int) -> dict[str, Any]:
    """Source files whose lines created nodes (framework files with ``framework=1``)."""
    r = _rank(rank)
    files = query.source_files(_ws().dump(_dump_id()), r, _flag("framework"), request.args.get("q"))
    return _page(sourceroots.mark_found(files, _ws().sources), rank=rank)


@bp.get("/ranks/<int:rank>/code/lines")
def code_lines(rank: int) -> dict[str, Any]:
    """The lines of one file that created nodes, with forward/backward node counts."""
    d = query.source_lines(_ws().dump(_dump_id()), _rank(rank), _need("file"), _ws().sources.layer_lines)
    d.update(_ws().sources.describe(d["file"]))
    lines = d.pop("lines")
    return _page(lines, **d)


@bp.get("/ranks/<int:rank>/code/source")
def code_source(rank: int) -> dict[str, Any]:
    """The text of a source file named by the stacks, when it maps to a file under the source roots."""
    _rank(rank)
    return sourceroots.source_text(_ws().dump(_dump_id()), _ws().sources, _need("file"))


@bp.get("/ranks/<int:rank>/code/nodes")
def code_nodes(rank: int) -> dict[str, Any]:
    """Nodes made by ``location=FILE:LINE`` (or ``file`` and ``line``), forward first."""
    loc = request.args.get("location") or f"{_need('file')}:{_need('line')}"
    d = query.nodes_at_location(_ws().dump(_dump_id()), _rank(rank), loc, _ws().sources.statement_lines,
                                _ws().sources.layer_lines)
    nodes = d.pop("nodes")
    return _page(nodes, **d)


# -- watchpoints -------------------------------------------------------------------------------------
def _watch_summary(dump_id: str) -> dict[str, Any]:
    w = _ws().watch(dump_id)
    hits = w.hits()
    by: dict[int, int] = {}
    for h in hits:
        by[h.watchpoint_id] = by.get(h.watchpoint_id, 0) + 1
    items = w.describe()
    cov = w.coverage()
    swept = [{"id": SWEEP_ID, "text": "nonfinite_sweep (always on)", "hits": by[SWEEP_ID]}] if by.get(SWEEP_ID) else []
    return {"watchpoints": len(items), "hits": len(hits), "checked": w.checked(),
            "by_watchpoint": [{"id": i["id"], "text": i["text"], "hits": by.get(i["id"], 0),
                               "coverage": _coverage_json(cov, i["id"])} for i in items] + swept,
            **_verdict(len(hits), cov)}


def _coverage_json(cov: CoverageSoFar, wid: int) -> dict[str, Any]:
    """One watchpoint's COVERAGE entry over the keys checked so far (`tdbg scan --json`'s, without its
    name and index); status ``unchecked`` before any check (not ``unanswered``: nothing was asked yet);
    a watchpoint over the per-step series is answered by `tdbg scan --series`, not here."""
    c = cov.by_watchpoint.get(wid)
    if c is None:
        return {"status": "series"}
    return c.to_dict() | ({} if cov.keys else {"status": "unchecked"})


def _verdict(hits: int, cov: CoverageSoFar) -> dict[str, Any]:
    """What the checks so far say: ``found`` (a hit), ``unchecked`` (nothing checked yet), ``incomplete`` (a
    watchpoint checked nothing) or ``clean``; with ``coverage_status`` (complete, partial, incomplete)."""
    if hits:
        verdict = "found"
    elif not cov.keys:
        verdict = "unchecked"
    else:
        verdict = "clean" if cov.status != "incomplete" else "incomplete"
    return {"verdict": verdict, "coverage_status": cov.status if cov.keys else None}


@bp.get("/conditions")
def conditions() -> dict[str, Any]:
    """The condition registry (forms are generated from it) and the presets."""
    return _page(watch.describe_conditions(), presets=watch.PRESETS)


@bp.get("/watchpoints")
def watchpoints() -> dict[str, Any]:
    """Watchpoints set on the dump, each with its coverage over what was checked so far (of ``rank``),
    and the verdict of those checks."""
    w = _ws().watch(_dump_id())
    rank = _int("rank")
    cov = w.coverage(rank)
    items = [{**i, "coverage": _coverage_json(cov, i["id"])} for i in w.describe()]
    return _page(items, **_verdict(len(w.hits(rank)), cov))


@bp.post("/watchpoints")
def add_watchpoint() -> tuple[dict[str, Any], int]:
    """Add one (``{"name", "params", "node", "scope"}`` or ``{"spec": "name:k=v"}``) or a preset."""
    try:
        wps = watchpoints_from_request(validate.watchpoint_request(_body()))
    except ValueError as exc:
        raise InvalidQueryError(str(exc)) from None
    w = _ws().watch(_dump_id())
    ids = w.add(wps)
    have = w.watchpoints()
    return {"created": [describe_watchpoint(i, have[i]) for i in ids], "watchpoints": w.describe()}, 201


@bp.delete("/watchpoints/<int:wid>")
def delete_watchpoint(wid: int) -> dict[str, Any]:
    """Remove one watchpoint (its hits go with it)."""
    w = _ws().watch(_dump_id())
    try:
        w.remove(wid)
    except KeyError:
        raise QueryError(None, f"no watchpoint {wid}") from None
    return {"deleted": wid, "watchpoints": w.describe()}


@bp.delete("/watchpoints")
def clear_watchpoints() -> dict[str, Any]:
    """Remove every watchpoint."""
    _ws().watch(_dump_id()).clear()
    return {"deleted": "all", "watchpoints": []}


@bp.get("/hits")
def hits() -> dict[str, Any]:
    """Hits, first occurrence first: of ``iteration`` (checked now if needed), or with ``all=1`` of
    every iteration; ``rank`` and ``watchpoint`` filter. ``groups`` counts them per watchpoint;
    ``coverage`` (per watchpoint id) and ``verdict`` say what the checks of that rank and iteration cover."""
    dump_id = _dump_id()
    d = _ws().dump(dump_id)
    w = _ws().watch(dump_id)
    rank, it, wid = _int("rank"), _int("iteration"), _int("watchpoint")
    ranks = [rank] if rank is not None else d.rank_ids
    for r in ranks:
        its = d.rank(r).iterations()
        if it is not None:
            if it not in its:
                raise QueryError(d.rank(r).path, f"no iteration {it}")
            w.check(r, _ws().readable(dump_id, r, [it]))
        elif _flag("all"):
            w.check(r, _ws().readable(dump_id, r, its))
    found = [h.to_dict() for h in w.hits(rank, it, wid)]
    groups: dict[int, dict[str, Any]] = {}
    cov = w.coverage(rank, it)
    for i in w.describe():
        groups[i["id"]] = {"id": i["id"], "text": i["text"], "name": i["name"], "hits": 0}
    in_scope = w.hits(rank, it)
    for h in in_scope:
        g = groups.get(h.watchpoint_id)
        if g is None and h.watchpoint_id == SWEEP_ID:     # the always-on sweep's: a group of its own
            g = groups[SWEEP_ID] = {"id": SWEEP_ID, "text": f"{h.hit.watchpoint} (always on)",
                                    "name": h.hit.watchpoint, "hits": 0}
        if g is not None:
            g["hits"] += 1
    errors = w.errors(rank, it)
    return _page(found, groups=list(groups.values()), checked=w.checked(rank),
                 errors=[e.to_dict() for e in errors[:100]], error_count=len(errors),
                 coverage=[{"id": i, **_coverage_json(cov, i)} for i in w.watchpoints()], **_verdict(len(in_scope), cov))


@bp.post("/replay/next_hit")
def next_hit() -> dict[str, Any]:
    """Check the iterations after ``iteration`` one by one and stop at the first with a hit."""
    body = _body()
    dump_id = _dump_id()
    d = _ws().dump(dump_id)
    w = _ws().watch(dump_id)
    if not len(w):
        raise InvalidQueryError("no watchpoint is set: add one first")
    rank = validate.int_field(body, "rank") or 0
    after = validate.int_field(body, "iteration")
    after = -1 if after is None else after
    r = d.rank(rank)
    it, scanned = w.next_hit(rank, after, _ws().readable(dump_id, rank, r.iterations()))
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
    dump_id = _dump_id()
    base = _int("base", 0) or 0
    all_pairs = _flag("all")
    _ws().settle(dump_id)
    below = _ws().settled_below(dump_id)     # a job writing the dump: what it may still be writing is left out
    res = _ws().compared(dump_id, base, lambda d, c: compare_ranks(
        d, base=base, jobs=1, cache=c, iterations=None if below is None else _settled_iterations(d, below)))
    out = res.to_dict(all_pairs=all_pairs)
    if not all_pairs:   # worst first, as the CLI prints them
        out["pairs"] = [p.to_dict() for p in res.divergent()]
    pairs = out.pop("pairs")
    return {"available": True, "base": base, "result": out, "pairs": _page(pairs)}, 200
