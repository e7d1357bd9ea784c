"""Where a node sits: its place in execution order and the user's code line that made it."""
from __future__ import annotations

from .graph import Graph


def _is_parameter(graph: Graph, name: str) -> bool:
    return name in graph and graph.record_of(name).is_parameter


def _optimizer_inputs(graph: Graph) -> tuple[tuple[str, int, str, str], ...]:
    """(optimizer kernel, input slot, parameter, role) for every optimizer input that is a parameter."""
    return graph.derived(_optimizer_inputs, _build_optimizer_inputs)


def _build_optimizer_inputs(graph: Graph) -> tuple[tuple[str, int, str, str], ...]:
    out = []
    for name in graph.execution_order:
        roles = graph.record_of(name).input_roles
        if not roles:
            continue
        for slot, p in enumerate(graph.value_inputs(name)):
            if p and _is_parameter(graph, p):
                out.append((name, slot, p, roles[slot] if slot < len(roles) else "hyper"))
    return tuple(out)


def _optimizer_of(graph: Graph) -> dict[str, str]:
    """Parameter -> the first optimizer kernel that updates it (or reads it as a hyper-parameter)."""
    return graph.derived(_optimizer_of, _build_optimizer_of)


def _build_optimizer_of(graph: Graph) -> dict[str, str]:
    out: dict[str, str] = {}
    for kernel, _, p, _ in _optimizer_inputs(graph):
        out.setdefault(p, kernel)
    return out


def optimizer_slots(graph: Graph) -> dict[str, tuple[str, int]]:
    """Parameter -> (optimizer kernel, input slot) of the parameters an optimizer updates in place
    (the weight and its state, not learning rate or momentum)."""
    return graph.derived(optimizer_slots, _build_optimizer_slots)


def _build_optimizer_slots(graph: Graph) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for kernel, slot, p, role in _optimizer_inputs(graph):
        if role in ("weight", "state"):
            out.setdefault(p, (kernel, slot))
    return out


def readers(graph: Graph) -> dict[str, list[tuple[str, int]]]:
    """Parameter -> (kernel, input slot) of the forward kernels that read it, in execution order."""
    return graph.derived(readers, _build_readers)


def _build_readers(graph: Graph) -> dict[str, list[tuple[str, int]]]:
    out: dict[str, list[tuple[str, int]]] = {}
    for name in graph.execution_order:
        if graph.record_of(name).input_roles:
            continue
        for slot, p in enumerate(graph.value_inputs(name)):
            if p and _is_parameter(graph, p):
                out.setdefault(p, []).append((name, slot))
    return out


def position(graph: Graph, node: str) -> int:
    """Sort key in execution order; a parameter sorts with the optimizer kernel that updates it
    (its dumped value is the one after the update), else with its first reader."""
    idx = graph.execution_index.get(node)
    if idx is not None:
        return idx
    opt = _optimizer_of(graph).get(node)
    if opt is not None:
        return graph.execution_index[opt]
    rd = readers(graph).get(node)
    if rd:
        return graph.execution_index[rd[0][0]]
    return len(graph.execution_order)


def user_location(graph: Graph, node: str) -> str | None:
    """``file:line`` of the innermost user frame of a node (for a parameter: of its first reader)."""
    if node not in graph:
        return None
    rec = graph.record_of(node)
    names = [node]
    if rec.is_parameter:
        names = [k for k, _ in readers(graph).get(node, [])]
    for n in names:
        for f in graph.stack(n):
            if not f.is_framework:
                return f.location
    param = rec.param
    if param and param != node and param in graph:
        return user_location(graph, param)  # e.g. an all-reduce of a gradient: the layer's line
    return None


def parameters_read(graph: Graph, node: str) -> set[str]:
    """Parameters a kernel reads (through routing nodes)."""
    return {p for p in graph.value_inputs(node) if p and _is_parameter(graph, p)}
