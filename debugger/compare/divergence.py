"""The first divergence of a comparison: in the earliest iteration with a counted error, the first tensor in
execution order whose divergence is not inherited from an earlier one."""
from __future__ import annotations

from ..model.graph import Graph
from ..model.locate import optimizer_slots
from .grades import ERROR
from .pairs import Pair


def first_divergence(pairs: list[Pair]) -> Pair | None:
    """The earliest iteration with a counted error, and in it the first tensor in execution order
    whose divergence is not inherited: a kernel output whose inputs agree, a kernel input whose
    producer's output agrees, an updated parameter whose optimizer's other inputs agree.

    Missing tensors count only when nothing else diverged (they say nothing about values)."""
    cands = [p for p in pairs if p.counted and p.grade == ERROR]
    real = [p for p in cands if not p.missing]
    pool = real or cands
    if not pool:
        return None
    it0 = min(p.iteration for p in pool)
    first = sorted((p for p in pool if p.iteration == it0),
                   key=lambda p: (p.position, p.group, p.a.rank, p.b.rank, p.slot, p.node, p.io))
    idx: dict[tuple[int, int, str, str, int], Pair] = {}
    outs: dict[tuple[int, int, str], list[Pair]] = {}
    for p in pairs:
        if p.iteration == it0 and p.counted:
            idx[(p.a.rank, p.b.rank, p.node, p.io, p.slot)] = p
            if p.io == "output":
                outs.setdefault((p.a.rank, p.b.rank, p.node), []).append(p)
    for p in first:
        if not _inherited(p, idx, outs):
            return p
    return first[0]


def _bad(p: Pair | None) -> bool:
    return p is not None and p.grade == ERROR and not p.missing


def _inherited(p: Pair, idx: dict, outs: dict) -> bool:
    """Whether the pair's divergence comes from an earlier diverging tensor of the same iteration."""
    g = p.graph_obj
    if g is None or p.node not in g:
        return False
    ranks = (p.a.rank, p.b.rank)
    a = g.record_of(p.node)
    if a.is_parameter:
        opt = optimizer_slots(g).get(p.node)
        if opt is None:
            return False   # read-only parameters (data, learning rates) start a divergence themselves
        return _inputs_bad(g, opt[0], ranks, idx, outs)
    if p.io == "input":
        if p.slot in _in_place_slots(g, p.node):
            # an in-place input holds the updated value: it comes from this kernel's own update
            return any(_bad(q) for q in outs.get((*ranks, p.node), ())) or _inputs_bad(g, p.node, ranks, idx, outs)
        ins = a.inputs
        if p.slot >= len(ins) or not ins[p.slot][0]:
            return False
        return _producer_bad(g, ins[p.slot][0], ranks, idx, outs)
    return _inputs_bad(g, p.node, ranks, idx, outs)


def _inputs_bad(g: Graph, kernel: str, ranks: tuple[int, int], idx: dict, outs: dict) -> bool:
    """Whether a kernel's inputs (not counting in-place optimizer slots) disagree."""
    skip = _in_place_slots(g, kernel)
    ins = g.record_of(kernel).inputs
    seen_any = False
    for s, (src, edge) in enumerate(ins):
        if s in skip or edge == "control" or not src:
            continue
        q = idx.get((*ranks, kernel, "input", s))
        if q is not None:
            seen_any = True
            if _bad(q):
                return True
    if seen_any:
        return False
    # inputs not dumped: ask the producers' outputs
    return any(_producer_bad(g, src, ranks, idx, outs) for s, (src, edge) in enumerate(ins)
               if s not in skip and edge != "control" and src)


def _in_place_slots(g: Graph, kernel: str) -> set[int]:
    """Input slots an optimizer kernel updates in place (the weight and its state)."""
    return {i for i, r in enumerate(g.node(kernel).input_roles) if r in ("weight", "state")}


def _producer_bad(g: Graph, src: str, ranks: tuple[int, int], idx: dict, outs: dict) -> bool:
    node = g.value_source(src)
    if node not in g:
        return False
    na = g.record_of(node)
    if na.is_constant:
        return False
    if na.is_parameter:
        # a forward reader reads the value of the previous iteration, which agreed; an in-place read
        # of an updated parameter is handled with its optimizer
        return False
    return any(_bad(q) for q in outs.get((*ranks, node), ()))
