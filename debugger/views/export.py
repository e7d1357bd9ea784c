"""Export one scope level of a graph, as the graph view shows it, with pydot: DOT text, SVG or PNG.

:func:`scope_dot` builds a :class:`pydot.Dot` from :func:`debugger.query.scope_view` (child scopes,
folded groups such as ``Adam[7]``, nodes, edges aggregated with their counts);
:func:`render` turns it into bytes. DOT needs nothing else; SVG and PNG need Graphviz's ``dot``
executable, found on ``PATH`` (:func:`graphviz_available`).
"""
from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

import pydot

from ..errors import DumpError
from ..formats.records import Kind
from ..model.graph import Graph
from ..errors import InvalidQueryError
from ..query import FOLD, MAX_PAGE, scope_view

FORMATS = ("dot", "svg", "png")
NEEDS_GRAPHVIZ = frozenset({"svg", "png"})
MIMETYPES = {"dot": "text/vnd.graphviz", "svg": "image/svg+xml", "png": "image/png"}
RENDER_TIMEOUT = 120     # seconds Graphviz may take for one scope level

# Each kind's colour, for the graph export and the web UI alike (served by /api/kinds): an export reads like the view.
KIND_COLORS = {
    Kind.WEIGHT: "#1c7ed6", Kind.GRADIENT: "#f08c00", Kind.OPTIMIZER_STATE: "#9c36b5", Kind.ACTIVATION: "#2f9e44",
    Kind.LOSS: "#d6336c", Kind.INPUT: "#0c8599", Kind.CONSTANT: "#868e96", Kind.OTHER: "#5c677d",
}
_SCOPE_FILL = "#f1f3f5"
_FONT = "Helvetica"


class GraphvizMissingError(DumpError):
    """SVG or PNG was asked for and Graphviz's ``dot`` is not installed."""

    def __init__(self, fmt: str) -> None:
        super().__init__(None, f"rendering {fmt.upper()} needs Graphviz's `dot` program, which is not on PATH: "
                               "install Graphviz (e.g. `apt-get install graphviz`, `brew install graphviz`) "
                               "or export --format dot")


@dataclass(frozen=True)
class Export:
    """One rendered export: download file name, MIME type and bytes."""

    filename: str
    mimetype: str
    data: bytes


def graphviz_available() -> bool:
    """Whether Graphviz's ``dot`` executable is on PATH (SVG and PNG need it)."""
    return shutil.which("dot") is not None


def available_formats() -> list[str]:
    """The formats :func:`render` can produce on this machine."""
    return [f for f in FORMATS if f not in NEEDS_GRAPHVIZ or graphviz_available()]


def check_format(fmt: str) -> str:
    """``fmt`` lower-cased when it is one of :data:`FORMATS`, else InvalidQueryError naming it."""
    f = (fmt or "").strip().lower()
    if f not in FORMATS:
        raise InvalidQueryError(f"bad format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return f


def _q(text: str) -> str:
    """A DOT quoted string; done here, not left to pydot, whose quoting rules changed across versions."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _tint(color: str, amount: float = 0.85) -> str:
    """``color`` mixed with white (the fill behind a node's dark text)."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in (r, g, b))


def _dominant(kinds: dict[str, int]) -> str:
    """The most frequent kind of a scope or group ('other' only when nothing else is there)."""
    best, n = Kind.OTHER.value, -1
    for k, v in kinds.items():
        if v > n or (v == n and k != Kind.OTHER):
            best, n = k, v
    return best


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _kind_label(kind: str) -> str:
    return kind.replace("_", " ")


def _node_attrs(c: dict[str, Any]) -> dict[str, Any]:
    """DOT attributes of one child of the view: label, shape and colours by kind."""
    if c["type"] == "scope":
        kinds = ", ".join(f"{v} {_kind_label(k)}" for k, v in sorted(c["kinds"].items(), key=lambda kv: -kv[1]))
        return {"label": _q(f"{c['name']}/\n{_plural(c['count'], 'node')}"), "shape": "box",
                "style": _q("rounded,filled,bold"), "fillcolor": _q(_SCOPE_FILL),
                "color": _q(KIND_COLORS.get(_dominant(c["kinds"]), KIND_COLORS[Kind.OTHER])),
                "tooltip": _q(f"scope {c['path']}: {kinds}")}
    if c["type"] == "group":
        color = KIND_COLORS.get(_dominant(c["kinds"]), KIND_COLORS[Kind.OTHER])
        return {"label": _q(f"{c['name']}\n{c['count']} × {c['op_type']}"), "shape": "box",
                "style": _q("rounded,filled"), "peripheries": 2, "fillcolor": _q(_tint(color)), "color": _q(color),
                "tooltip": _q(f"{c['count']} {c['op_type']} nodes folded: {c['path']}")}
    color = KIND_COLORS.get(c["kind"], KIND_COLORS[Kind.OTHER])
    # a name that starts with the op type already says it: as in the view, repeat it only when hidden
    sub = _kind_label(c["kind"]) if c["name"].startswith(c["op_type"]) \
        else f"{c['op_type']} · {_kind_label(c['kind'])}"
    # its weights and constants, one line each, as the view draws them inside its box
    rows = "".join(f"\n{r['name']} {r['type']}".rstrip() for r in c.get("attached", []))
    return {"label": _q(f"{c['name']}\n{sub}{rows}"), "shape": "box", "style": _q("rounded,filled"),
            "fillcolor": _q(_tint(color)), "color": _q(color), "penwidth": 1.5, "tooltip": _q(c["node"])}


def scope_dot(graph: Graph, path: str = "", *, fold: int = FOLD, framework: bool = False,
              rank: int | None = None) -> pydot.Dot:
    """One scope level of ``graph`` (every child, not one page) as the graph view shows it."""
    if fold < 0:
        raise InvalidQueryError(f"bad fold {fold}: expected 0 (no folding) or more")
    total = scope_view(graph, path, fold=fold, framework=framework, begin=0, end=0)["children"]["total"]
    if total > MAX_PAGE:
        raise InvalidQueryError(f"scope {path or '(root)'!r} has {total} children; at most {MAX_PAGE} can be "
                                "exported (fold same-type siblings, e.g. fold 5)")
    view = scope_view(graph, path, fold=fold, framework=framework, begin=0, end=total)
    where = f"rank {rank}, " if rank is not None else ""
    title = f"{where}graph {graph.graph_id}{' ' + graph.name if graph.name else ''}: {path or '(root)'}"
    dot = pydot.Dot("scope", graph_type="digraph", rankdir="TB", label=_q(title), labelloc="t",
                    fontname=_q(_FONT), fontsize=14, nodesep=0.35, ranksep=0.5)
    dot.set_node_defaults(fontname=_q(_FONT), fontsize=11, margin=_q("0.15,0.06"))
    dot.set_edge_defaults(fontname=_q(_FONT), fontsize=9, color=_q("#868e96"), arrowsize=0.7)
    for c in view["children"]["items"]:
        dot.add_node(pydot.Node(_q(c["id"]), **_node_attrs(c)))
    for e in view["edges"]:
        attrs: dict[str, Any] = {"penwidth": round(min(5.0, 1.2 + math.log2(e["count"]) * 0.7), 2),
                                 "tooltip": _q(f"{_plural(e['count'], 'edge')}: {e['source']} -> {e['target']}")}
        if e["count"] > 1:
            attrs["label"] = _q(str(e["count"]))
        dot.add_edge(pydot.Edge(_q(e["source"]), _q(e["target"]), **attrs))
    return dot


def render(dot: pydot.Dot, fmt: str) -> bytes:
    """``dot`` as DOT text (no external program), or SVG / PNG drawn by Graphviz's ``dot``."""
    fmt = check_format(fmt)
    text = dot.to_string()
    if fmt == "dot":
        return text.encode("utf-8")
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizMissingError(fmt)
    try:
        done = subprocess.run([exe, f"-T{fmt}"], input=text.encode("utf-8"), capture_output=True,
                              timeout=RENDER_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise DumpError(None, f"Graphviz took more than {RENDER_TIMEOUT} s to draw {fmt.upper()}: "
                              "export --format dot, or fold more") from None
    except OSError as exc:
        raise DumpError(exe, f"cannot run Graphviz ({exc.strerror or exc})") from None
    if done.returncode != 0 or not done.stdout:
        msg = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise DumpError(exe, f"Graphviz failed to draw {fmt.upper()} (exit {done.returncode})"
                             f"{': ' + msg[-1] if msg else ''}")
    return done.stdout


def export_name(graph: Graph, path: str, fmt: str, rank: int | None = None) -> str:
    """A file name for an export, e.g. ``rank0_graph0_fc1-Dense.svg`` (root: ``..._root``)."""
    last = path.rsplit("/", 1)[-1] if path else "root"
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", last) or "scope"
    return f"{'' if rank is None else f'rank{rank}_'}graph{graph.graph_id}_{safe}.{fmt}"


def export_scope(graph: Graph, path: str = "", fmt: str = "dot", *, fold: int = FOLD, framework: bool = False,
                 rank: int | None = None) -> Export:
    """Build and render one scope level: what ``tdbg graph`` and the web export both call."""
    fmt = check_format(fmt)
    if fmt in NEEDS_GRAPHVIZ and not graphviz_available():
        raise GraphvizMissingError(fmt)   # before building: the answer does not depend on the graph
    data = render(scope_dot(graph, path, fold=fold, framework=framework, rank=rank), fmt)
    return Export(export_name(graph, path, fmt, rank), MIMETYPES[fmt], data)
