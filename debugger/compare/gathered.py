"""Which parameter an all-gathered piece holds: the names a rank comparison gives the unsharded parameters.

FSDP2 gathers a unit's parameters in one collective: operators copy each parameter's shard into one
buffer (the collective's input, made by an allocation they all write into), the collective gathers the
buffer from every rank, and operators copy each parameter's piece out of the result, in the same order.
In graph terms: the writers of the collective's input buffer read one parameter each, and the
operators that read the collective's result (through views) are as many: the k-th of them holds the
k-th parameter, unsharded, equal on every rank of the group. Where the counts differ (one flat buffer
gathered and viewed, as FSDP1 does) nothing is named.
"""
from __future__ import annotations

from ..formats.records import Kind
from ..model.graph import Graph


def gathered_params(graph: Graph) -> dict[str, str]:
    """Node -> the parameter whose gathered (unsharded) value its output holds."""
    return graph.derived(gathered_params, _build)


def _build(graph: Graph) -> dict[str, str]:
    out: dict[str, str] = {}
    order = {n: i for i, n in enumerate(graph.execution_order)}
    for k in graph.execution_order:
        rec = graph.record_of(k)
        if not rec.is_collective or rec.per_rank:
            continue
        params = _copied_in(graph, k, order)
        pieces = _copied_out(graph, k, order)
        if params and len(params) == len(pieces):
            out.update(zip(pieces, params))
    return out


def _sources(graph: Graph, node: str) -> list[str]:
    """The nodes whose values reach ``node``'s data inputs (through views)."""
    return [graph.value_source(s) for s, edge in graph.record_of(node).inputs if s and edge == "data" and s in graph]


def _copied_in(graph: Graph, collective: str, order: dict[str, int]) -> list[str]:
    """The parameters copied into the collective's input buffer, in the order they were copied."""
    buffers = {b for s in _sources(graph, collective) if s in graph for b in _sources(graph, s)
               if b in graph and not graph.record_of(b).is_parameter}
    if not buffers:
        return []
    writers = sorted({u for b in buffers for u in graph.successors(b) if u in order and order[u] < order[collective]},
                     key=order.__getitem__)
    params = []
    for w in writers:
        read = [s for s in _sources(graph, w) if graph.record_of(s).kind == Kind.WEIGHT and graph.record_of(s).param]
        if len(read) != 1:
            return []
        params.append(graph.record_of(read[0]).param or "")
    return params


def _copied_out(graph: Graph, collective: str, order: dict[str, int]) -> list[str]:
    """The operators that read the collective's result (through views), in execution order."""
    todo, seen, readers = [collective], {collective}, set()
    while todo:
        src = todo.pop()
        for user in graph.successors(src):
            if user in seen or user not in order:
                continue
            seen.add(user)
            if graph.record_of(user).is_routing:
                todo.append(user)
            elif any(graph.value_source(s) == collective and edge == "data" for s, edge in graph.record_of(user).inputs):
                readers.add(user)
    return sorted(readers, key=order.__getitem__)
