"""Code to graph for a view: the files and lines that created nodes, and the nodes of a line."""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

from ..errors import InvalidQueryError, QueryError
from ..model import Dump, Rank
from ..model.source import parse_location
from ..model.sourceroots import known_file
from .scopes import node_digest, place_of, scope_tree

# (recorded file, line) -> the lines of the statement holding it (SourceRoots.statement_lines)
Statement = Callable[[str, int], Sequence[int]]
# recorded file -> its lines that define a layer, with the layer's attribute name (SourceRoots.layer_lines)
Layers = Callable[[str], Mapping[int, str]]


def _rank_hits(dump: Dump, rank: Rank, file: str, line: int, statement: Statement | None = None
               ) -> list[tuple[str, Any]]:
    graphs = rank.graphs
    return [(p, h) for p, h in dump.source_index.nodes_at(file, line, statement)
            if h.graph_id in graphs and h.node in graphs[h.graph_id]]


def source_files(dump: Dump, rank: Rank, framework: bool = False, query: str | None = None) -> list[dict[str, Any]]:
    """Source files whose lines created nodes: user code first, framework files only when asked."""
    idx = dump.source_index
    q = (query or "").strip().lower()
    out = []
    for path in idx.all_files():
        fw = idx.is_framework(path)
        if (fw and not framework) or (q and q not in path.lower()):
            continue
        nodes: set[tuple[int, str]] = set()
        lines = idx.lines(path)
        for ln in lines:
            nodes.update((h.graph_id, h.node) for _, h in _rank_hits(dump, rank, path, ln))
        if not nodes:
            continue
        # whether the file can be shown is the source roots' answer (debugger.model.sourceroots), not a guess here
        out.append({"file": path, "name": os.path.basename(path), "folder": idx.folder(path), "is_framework": fw,
                    "lines": len(lines), "nodes": len(nodes)})
    out.sort(key=lambda f: (f["is_framework"], f["file"]))
    return out


def source_lines(dump: Dump, rank: Rank, path: str, layers: Layers | None = None) -> dict[str, Any]:
    """The lines of one source file that created nodes, with the code the stacks recorded and
    how many forward and backward nodes each made; with ``layers``, also the lines that define a
    layer (``self.fc2 = ...``: no node of its own) with the count of the layer's nodes."""
    path = known_file(dump.source_index, path)
    idx = dump.source_index
    lines = {}
    for ln in idx.lines(path):
        hits = _rank_hits(dump, rank, path, ln)
        fwd = {(h.graph_id, h.node) for _, h in hits if h.direction == "forward"}
        bwd = {(h.graph_id, h.node) for _, h in hits if h.direction == "backward"}
        if fwd or bwd:
            lines[ln] = {"line": ln, "code": idx.code(path, ln), "forward": len(fwd), "backward": len(bwd)}
    counts: dict[str, int] = {}
    for ln, name in (layers(path) if layers else {}).items():
        if ln in lines:
            continue
        if name not in counts:
            counts[name] = len(rank.layer_nodes(name))
        if counts[name]:
            lines[ln] = {"line": ln, "code": idx.code(path, ln), "forward": 0, "backward": 0,
                         "layer": name, "definition": counts[name]}
    return {"file": path, "folder": idx.folder(path), "is_framework": idx.is_framework(path),
            "lines": [lines[k] for k in sorted(lines)]}


def nodes_at_line(dump: Dump, rank: Rank, file: str, line: int, statement: Statement | None = None
                  ) -> list[dict[str, Any]]:
    """Nodes a source line created in one rank, forward first, each with its graph place."""
    seen: set[tuple[int, str]] = set()
    out = []
    for path, h in _rank_hits(dump, rank, file, line, statement):
        if (h.graph_id, h.node) in seen:
            continue
        seen.add((h.graph_id, h.node))
        g = rank.graphs[h.graph_id]
        out.append(node_digest(g, h.node) | {"direction": h.direction, "file": path, "line": line,
                                            "place": place_of(g, h.node)})
    tree_pos = {gid: scope_tree(g).pos for gid, g in rank.graphs.items()}
    out.sort(key=lambda d: (d["direction"] != "forward", d["graph"], tree_pos[d["graph"]].get(d["node"], 0)))
    return out


def nodes_at_location(dump: Dump, rank: Rank, location: str, statement: Statement | None = None,
                      layers: Layers | None = None) -> dict[str, Any]:
    """``FILE:LINE`` -> the files it matched and the nodes those lines created; a line that created
    none but defines a layer (``layers``) gives the layer's nodes, ``"direction": "definition"``."""
    try:
        file, line = parse_location(location)
    except QueryError as exc:
        raise InvalidQueryError(exc.problem) from None
    files = dump.source_index.files(file)
    nodes = nodes_at_line(dump, rank, file, line, statement)
    if not nodes and layers is not None:
        nodes = _layer_at(rank, files, line, layers)
    return {"location": location, "file": file, "line": line, "files": files, "nodes": nodes}


def _layer_at(rank: Rank, files: Sequence[str], line: int, layers: Layers) -> list[dict[str, Any]]:
    for path in files:
        name = layers(path).get(line)
        if name:
            return [node_digest(rank.graphs[gid], n) | {"direction": "definition", "file": path, "line": line,
                                                        "place": place_of(rank.graphs[gid], n), "layer": name}
                    for gid, n in rank.layer_nodes(name)]
    return []


def marks_for_line(dump: Dump, rank: Rank, graph_id: int, location: str, statement: Statement | None = None
                   ) -> dict[str, set[str]]:
    """{"forward": nodes, "backward": nodes} of one graph made by ``FILE:LINE``."""
    found = nodes_at_location(dump, rank, location, statement)["nodes"]
    out: dict[str, set[str]] = {"forward": set(), "backward": set()}
    for d in found:
        if d["graph"] == graph_id:
            out[d["direction"]].add(d["node"])
    return out
