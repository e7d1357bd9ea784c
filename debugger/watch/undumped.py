"""What a step's graph holds that its dump does not: the outputs of weights, gradients, optimizer state,
activations and the loss that the graph names but no file of the iteration holds.

A watchpoint that met only what was dumped would count a gradient made in another graph (MindSpore's
control flow passes it in), or a weight a kernel list left out, nowhere: "checked 4 tensors" would read
as every gradient checked. Each such output is a check that could not run, reason ``NOT_IN_DUMP``.
"""
from __future__ import annotations

from ..formats.records import Kind
from ..model import TensorRef
from ..model.graph import Graph
from .select import FLOAT_NAMES

NOT_IN_DUMP = "in the graph, not in the dump (its value was not dumped)"
_KINDS = (Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE, Kind.ACTIVATION, Kind.LOSS)


def graph_outputs(graph: Graph) -> list[tuple[str, int, Kind, str | None, str]]:
    """(node, slot, kind, param, op_type) of every floating output of the kinds watchpoints target."""
    return graph.derived("undumped.outputs", _outputs_of)


def _outputs_of(graph: Graph) -> list[tuple[str, int, Kind, str | None, str]]:
    out = []
    for name in graph.names():
        rec = graph.record_of(name)
        if rec.is_routing or rec.input_roles:     # a copy of a value made elsewhere; an in-place optimizer kernel
            continue
        slots = [(i, o.kind, o.param) for i, o in enumerate(rec.outputs) if o.kind is not None]
        if not slots:
            slots = [(0, rec.kind, rec.param)]
        for slot, kind, param in slots:
            o = rec.outputs[slot] if slot < len(rec.outputs) else None
            # an unknown dtype is left out: only what is surely a floating value is counted as missing
            if kind in _KINDS and o is not None and not o.undefined and o.dtype in FLOAT_NAMES:
                out.append((name, slot, kind, param, rec.op_type))
    return out


def undumped(rank: int, gid: int, iteration: int, graph: Graph | None,
             tmap: dict[tuple[str, str, int], TensorRef], where: set[str] | None) -> dict[str, list[TensorRef]]:
    """By kind, placeholders (no source) for the graph's outputs that the iteration's files do not hold."""
    if graph is None or not tmap:
        return {}
    out: dict[str, list[TensorRef]] = {}
    for node, slot, kind, param, op_type in graph_outputs(graph):
        if (node, "output", slot) in tmap or (where is not None and node not in where):
            continue
        ref = TensorRef(rank, gid, iteration, node, op_type, "output", slot, None, kind, param)  # type: ignore[arg-type]
        out.setdefault(kind, []).append(ref)
    return out
