"""Which weights a zero-initialised weight leaves without gradient, at the levels without operator edges.

A weight that is all zero (LoRA's B, torchvision ViT's head) makes the gradient of everything that feeds
the module reading it exactly zero in the first step: ``d(W x)/dx = W``. Level "ops" follows the operator
edges to where the zeros start (watch/zeros.py); the coarser levels cannot, so they are told here:
- level "modules" links a module call to the weights it reads (a captured input each) and to the calls
  whose outputs it reads; a container's own node reads what its children compute (its scope holds them).
  The weights behind a call are those read by the calls it reads, transitively (and those of their
  submodules that are not called as modules themselves): an all-zero gradient of
  one of them, in an iteration where that call found its weight all zero, is explained by it;
- level "parameters" records no module either: any non-bias weight found all zero is taken to explain an
  all-zero gradient (the scan's ``skipped`` summary says so); so is, at "modules", a weight no module call
  read (a compiled model's calls are traced away: its Gradient node keeps the weight as read).
"""
from __future__ import annotations

from collections import deque

from ..formats.records import LEVEL_MODULES, LEVEL_OPS, Kind
from ..model import TensorRef
from ..model.graph import Graph
from .rules import Step


def weights_found(step: Step) -> list[tuple[str | None, TensorRef]]:
    """(the module call that read it, a non-bias weight's value as the step found it): at level "modules"
    each call's captured weight inputs; at "parameters" each gradient node's weight (no call: None); at
    "ops" none, the edges say where zeros come from."""
    graph = step.graph
    if graph is None or graph.level == LEVEL_OPS:
        return []
    if graph.level != LEVEL_MODULES:
        found = ((None, step.tmap.get((g.node, "input", 1))) for g in step.outputs.get(Kind.GRADIENT, ())
                 if g.param and not g.param.endswith("bias"))
        return [(call, r) for call, r in found if r is not None]
    out: list[tuple[str | None, TensorRef]] = []
    for (node, io, slot), r in step.tmap.items():
        if io == "input" and node in graph and _weight_read(graph, node, slot):
            # a weight no module call read (a compiled model's calls are traced away) is kept on its Gradient
            # node: no call to place it, so it is judged as at "parameters"
            out.append((None if graph.record_of(node).op_type == "Gradient" else node, r))
    return out


def _weight_read(graph: Graph, node: str, slot: int) -> bool:
    inputs = graph.record_of(node).inputs
    if slot >= len(inputs) or inputs[slot][0] not in graph:
        return False
    src = graph.record_of(inputs[slot][0])
    return src.is_parameter and src.param is not None and src.param != "" and not src.param.endswith("bias")


def behind(graph: Graph, call: str) -> frozenset[str]:
    """The parameters read by the module calls whose outputs ``call`` reads, transitively (a container's
    node reading its children's); ``call``'s own weights are not behind it."""
    cache: dict[str, frozenset[str]] = graph.derived(behind, lambda g: {})
    if call not in cache:
        cache[call] = _walk(graph, call)
    return cache[call]


def _walk(graph: Graph, call: str) -> frozenset[str]:
    params: set[str] = set()
    modules: set[str] = set()
    seen = {call}
    todo = deque(src for src in _reads(graph, call) if src in graph and not graph.record_of(src).is_parameter)
    while todo:
        n = todo.popleft()
        if n in seen or n not in graph:
            continue
        seen.add(n)
        rec = graph.record_of(n)
        if rec.is_parameter:
            if rec.param:
                params.add(rec.param)
            continue
        if rec.module:
            modules.add(rec.module)
        todo.extend(_reads(graph, n))
    # a call reads its own parameters only as edges; a child it never calls as a module (nn.MultiheadAttention's
    # out_proj, read by the functional attention) has its weights read by the call all the same
    return frozenset(params | {p for p in _params(graph) if _owner_in(p, modules)})


def _params(graph: Graph) -> list[str]:
    return graph.derived(_params, lambda g: [r.param for r in (g.record_of(n) for n in g) if r.is_parameter and r.param])


def _owner_in(param: str, modules: set[str]) -> bool:
    parts = param.split(".")
    return any(".".join(parts[:k]) in modules for k in range(1, len(parts)))


def _reads(graph: Graph, node: str) -> list[str]:
    """What ``node`` computes from: its sources, and for a container's own node the calls inside it."""
    return [src for src, _ in graph.record_of(node).inputs] + inside(graph, node)


def inside(graph: Graph, node: str) -> list[str]:
    """At level "modules", the calls inside the container whose own node is ``node`` (named
    ``<scope>/<class>``, its children in that scope: it returns what they compute); [] for any other node."""
    rec = graph.record_of(node)
    if graph.level != LEVEL_MODULES or not rec.scope or node != f"{rec.scope}/{rec.op_type}":
        return []
    return [n for n in _under_scope(graph).get(rec.scope, ()) if n != node]


def _under_scope(graph: Graph) -> dict[str, list[str]]:
    """Each scope's forward nodes at any depth, once per graph (asked for every container a scan checks)."""
    return graph.derived(_under_scope, _index_scopes)


def _index_scopes(graph: Graph) -> dict[str, list[str]]:
    under: dict[str, list[str]] = {}
    for n in graph:
        if graph.record_of(n).is_backward:
            continue
        for i, ch in enumerate(n):
            if ch == "/":
                under.setdefault(n[:i], []).append(n)
    return under
