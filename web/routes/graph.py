"""A rank's graphs: scope levels, overlays, search, a node, and the graph exported as DOT, SVG or PNG."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from debugger import query
from debugger.views import export

from .. import overlays
from ..params import current_dump_id, graph_arg, int_arg, need_arg, paged, rank_arg, view_options, workspace

graph_bp = Blueprint("graph", __name__, url_prefix="/api")


@graph_bp.get("/ranks/<int:rank>/graphs")
def graphs(rank: int) -> dict[str, Any]:
    """Graphs of one rank."""
    r = rank_arg(rank)
    items = []
    for gid in r.graph_ids:
        g = r.graphs.get(gid)
        items.append({"graph": gid, "name": g.name if g else None, "nodes": len(g) if g else 0,
                      "iterations": r.iterations(gid), "kinds": g.kind_counts() if g else {}})
    return paged(items, rank=rank)


@graph_bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/scope")
def scope(rank: int, graph_id: int) -> dict[str, Any]:
    """Children of one scope, folded, with edges and marks (watchpoint hits, a code line's nodes); with
    ``overlay=METRIC`` (and ``vs_rank`` / ``vs_dump`` for a difference) each child's worst value of it in
    ``iteration`` and the scale over the whole graph (web/overlays.py); with ``focus=NODE`` its neighbours
    outside the level."""
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
    out = query.scope_view(g, path, begin=int_arg("begin", 0) or 0, end=int_arg("end"), marks=marks,
                           focus=request.args.get("focus") or None, **view_options())
    name = request.args.get("overlay")
    if name and it is not None:
        vs = (int_arg("vs_rank"), request.args.get("vs_dump") or None)
        out["overlay"] = overlays.scope_overlay(workspace(), dump_id, r, g, it, name, path, vs, view_options())
    return out


@graph_bp.get("/overlays")
def overlay_metrics() -> dict[str, Any]:
    """What the graph can be coloured by: each metric's name, words, and what it compares with."""
    return {"items": [{"name": m.name, "label": m.label, "about": m.about, "share": m.share, "needs": m.needs}
                      for m in query.overlay.METRICS.values()]}


@graph_bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/search")
def search(rank: int, graph_id: int) -> dict[str, Any]:
    """Nodes whose name contains ``q``, each with the scope path to open."""
    _, g = graph_arg(rank, graph_id)
    return paged(query.search_nodes(g, need_arg("q"), **view_options()), q=request.args.get("q"))


@graph_bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/node")
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


@graph_bp.get("/export/formats")
def export_formats() -> dict[str, Any]:
    """The graph export formats this server can produce (svg and png only with Graphviz)."""
    return {"formats": export.available_formats(), "graphviz": export.graphviz_available()}


@graph_bp.get("/ranks/<int:rank>/graphs/<int:graph_id>/export")
def export_scope(rank: int, graph_id: int) -> Response:
    """One scope level as the graph view shows it (``scope``, ``fold``, ``framework``), as a
    ``format=dot|svg|png`` download."""
    fmt = export.check_format(request.args.get("format", "dot"))   # a bad format is a 400 before any work
    r, g = graph_arg(rank, graph_id)
    exp = export.export_scope(g, request.args.get("scope", ""), fmt, rank=r.rank, **view_options())
    return Response(exp.data, mimetype=exp.mimetype,
                    headers={"Content-Disposition": f'attachment; filename="{exp.filename}"'})
