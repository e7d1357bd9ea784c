"""Tensors that hold no value the run used, which a comparison leaves out.

A recorder that meets memory no operator of the iteration made stores it as an input. When every
operator that reaches that memory (through views) only overwrites it (an ``out=`` argument, the
destination of a copy), what it held before was whatever the allocator left there: FSDP2's
copy-out targets (the unsharded parameters' storage, viewed before the all-gather's result is
copied in) and a reduce-scatter's destination are such. Two runs, or two ranks, differ there by
chance, never by a fault.
"""
from __future__ import annotations

from ..formats.records import Kind
from ..model.graph import Graph
from .peers import input_value

Key = tuple[str, str, int]

_UNPRODUCED_KINDS = frozenset({Kind.INPUT, Kind.OTHER})


def valueless_nodes(graph: Graph) -> frozenset[str]:
    """Inputs with no producer whose value no operator reads (only overwrites)."""
    return graph.derived(valueless_nodes, _build)


def _build(graph: Graph) -> frozenset[str]:
    out = set()
    for n in graph.nodes():
        rec = n.record
        if rec.is_parameter and rec.kind in _UNPRODUCED_KINDS and not rec.param and \
                graph.successors(n.name) and not _read(graph, n.name):
            out.add(n.name)
    return frozenset(out)


def _read(graph: Graph, leaf: str) -> bool:
    """Whether an operator reads the value of ``leaf``, directly or through views of it."""
    todo, seen = [leaf], {leaf}
    while todo:
        src = todo.pop()
        for user in graph.successors(src):
            if graph.record_of(user).is_routing:
                if user not in seen:
                    seen.add(user)
                    todo.append(user)
                continue
            if any(s == src and edge == "data" for s, _, edge in graph.in_edges(user)):
                return True
    return False


def holds_no_value(graph: Graph | None, key: Key) -> bool:
    """Whether the tensor (node, io, slot) is, or arrives from, memory that holds no value (see above)."""
    if graph is None or key[0] not in graph:
        return False
    empty = valueless_nodes(graph)
    if not empty:
        return False
    node, io, slot = key
    if io == "output":
        return node in empty
    return input_value(graph, node, slot) in empty
