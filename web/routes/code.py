"""The source code a rank's graphs were built from, and the nodes of a line."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from debugger import query
from debugger.model import sourceroots

from ..params import current_dump_id, flag_arg, need_arg, paged, rank_arg, workspace

code_bp = Blueprint("code", __name__, url_prefix="/api")


@code_bp.get("/ranks/<int:rank>/code/files")
def code_files(rank: int) -> dict[str, Any]:
    """Source files whose lines created nodes (framework files with ``framework=1``)."""
    r = rank_arg(rank)
    files = query.source_files(workspace().dump(current_dump_id()), r, flag_arg("framework"), request.args.get("q"))
    return paged(sourceroots.mark_found(files, workspace().sources), rank=rank)


@code_bp.get("/ranks/<int:rank>/code/lines")
def code_lines(rank: int) -> dict[str, Any]:
    """The lines of one file that created nodes, with forward/backward node counts."""
    d = query.source_lines(workspace().dump(current_dump_id()), rank_arg(rank), need_arg("file"), workspace().sources.layer_lines)
    d.update(workspace().sources.describe(d["file"]))
    lines = d.pop("lines")
    return paged(lines, **d)


@code_bp.get("/ranks/<int:rank>/code/source")
def code_source(rank: int) -> dict[str, Any]:
    """The text of a source file named by the stacks, when it maps to a file under the source roots."""
    rank_arg(rank)
    return sourceroots.source_text(workspace().dump(current_dump_id()), workspace().sources, need_arg("file"))


@code_bp.get("/ranks/<int:rank>/code/nodes")
def code_nodes(rank: int) -> dict[str, Any]:
    """Nodes made by ``location=FILE:LINE`` (or ``file`` and ``line``), forward first."""
    loc = request.args.get("location") or f"{need_arg('file')}:{need_arg('line')}"
    d = query.nodes_at_location(workspace().dump(current_dump_id()), rank_arg(rank), loc, workspace().sources.statement_lines,
                                workspace().sources.layer_lines)
    nodes = d.pop("nodes")
    return paged(nodes, **d)
