"""Which tensors a scan looks at: ``--where FILE:LINE`` and watchpoint targets."""
from __future__ import annotations

import fnmatch

from ..errors import QueryError
from ..formats.records import Kind
from ..model.graph import Graph
from ..model.locate import parameters_read, readers
from ..model import Dump, TensorRef
from ..model.source import parse_location
from .registry import Watchpoint

# the dtypes checked: floating point, and complex (judged by its magnitudes: debugger.stats)
FLOAT_NAMES = {"float16", "float32", "float64", "bfloat16", "complex64", "complex128"}


def where_nodes(dump: Dump, where: str | None) -> dict[int, set[str]] | None:
    """graph id -> nodes made by a code line, plus the weights they read and those weights' gradients."""
    if not where:
        return None
    file, line = parse_location(where)
    out: dict[int, set[str]] = {}
    for h in dump.nodes_at(file, line):
        out.setdefault(h["graph"], set()).add(h["node"])
    if not out:
        raise QueryError(dump.root, f"no node was created by {where} (see `tdbg code` for the known lines)")
    for r in dump.ranks:
        for gid, nodes in out.items():
            g = r.graphs.get(gid)
            if g is None:
                continue
            weights = set()
            for n in list(nodes):
                if n in g:
                    weights |= {p for p in parameters_read(g, n) if g.node(p).kind == Kind.WEIGHT}
            nodes |= weights
            nodes |= {n.name for n in g.nodes(Kind.GRADIENT) if n.param in weights}
            nodes |= {n.name for n in g.nodes()
                      if any(o.kind == Kind.GRADIENT and o.param in weights for o in n.record.outputs)}
    return out


def is_float(ref: TensorRef, graph: Graph | None) -> bool:
    """Whether a tensor is floating point (only those are checked), read from the listing when it can be."""
    if ref.file_dtype is not None:
        return ref.file_dtype in FLOAT_NAMES
    if graph is not None and ref.io == "output" and ref.node in graph:
        outs = graph.record_of(ref.node).outputs
        if ref.slot < len(outs) and outs[ref.slot].dtype:
            return outs[ref.slot].dtype in FLOAT_NAMES
    try:
        return ref.dtype.kind in "fc"
    except Exception:  # an unreadable header is reported when the file is read
        return True


def activation(ref: TensorRef, graph: Graph | None) -> str:
    """The activation function the tensor's node applies as a layer ("" for none or no graph)."""
    if graph is None or ref.node not in graph:
        return ""
    return graph.record_of(ref.node).activation


def is_undefined(ref: TensorRef, graph: Graph | None) -> bool:
    """Whether a tensor is an output slot whose contents mean nothing (the format says so): never checked."""
    if graph is None or ref.io != "output" or ref.node not in graph:
        return False
    outs = graph.record_of(ref.node).outputs
    return ref.slot < len(outs) and outs[ref.slot].undefined


def matches(wp: Watchpoint, ref: TensorRef, graph: Graph | None) -> bool:
    """Whether a watchpoint's target kinds, activation functions, ``node`` glob and ``scope`` prefix admit
    a tensor."""
    if ref.kind not in wp.condition.kinds:
        return False
    if wp.condition.op_types and activation(ref, graph) not in wp.condition.op_types:
        return False
    return in_filters(wp, ref, graph)


def in_filters(wp: Watchpoint, ref: TensorRef, graph: Graph | None) -> bool:
    """Whether a watchpoint's ``node`` glob and ``scope`` prefix admit a tensor (whatever its kind)."""
    if wp.node and not (fnmatch.fnmatchcase(ref.node, wp.node) or (ref.param and fnmatch.fnmatchcase(ref.param, wp.node))):
        return False
    if wp.scope:
        names = [ref.node]
        if graph is not None and ref.node in graph and graph.record_of(ref.node).is_parameter:
            names = [k for k, _ in readers(graph).get(ref.node, [])]
        if not any(n.startswith(wp.scope) for n in names):
            return False
    return True
