"""Node kinds from graph evidence: the optimizer's inputs name weights, gradients and state."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import networkx as nx

KINDS = ("weight", "gradient", "optimizer_state", "activation", "loss", "input", "constant", "other")

# op_type -> (weight input, gradient input, optimizer-state inputs). Other Parameter inputs
# of an optimizer kernel (learning rate, momentum, betas) count as optimizer state too.
OPTIMIZER_INPUTS: dict[str, tuple[int, int, tuple[int, ...]]] = {
    "ApplyMomentum": (0, 3, (1,)),
    "SGD": (0, 1, (3, 5)),
    "Adam": (0, 9, (1, 2)),
    "ApplyAdam": (0, 9, (1, 2)),
    "FusedAdam": (0, 9, (1, 2)),
    "AdamWeightDecay": (0, 8, (1, 2)),
    "FusedAdamWeightDecay": (0, 9, (1, 2)),
    "Lamb": (0, 9, (1, 2)),
    "ApplyGradientDescent": (0, 2, ()),
    "ApplyAdagrad": (0, 3, (1,)),
    "ApplyAdagradV2": (0, 3, (1,)),
    "ApplyRMSProp": (0, 4, (1, 2)),
    "ApplyCenteredRMSProp": (0, 4, (1, 2, 3)),
    "ApplyFtrl": (0, 3, (1, 2)),
    "ApplyAdaMax": (0, 8, (1, 2)),
}

ACTIVATION_OPS = {
    "elu", "fastgelu", "gelu", "hsigmoid", "hswish", "leakyrelu", "logsigmoid", "logsoftmax",
    "prelu", "relu", "relu6", "reluv2", "sigmoid", "softmax", "tanh", "silu", "swish", "softplus",
    "mish", "selu", "celu", "hardtanh",
}

# Nodes that only route values (no computation of their own): followed when tracing an input.
PASS_THROUGH_OPS = {"Load", "Depend", "TupleGetItem", "MakeTuple", "UpdateState", "Identity"}
FRAMEWORK_OPS = PASS_THROUGH_OPS | {"Return", "Constant", "Parameter", "Switch", "Partial"}
# Ops that transform a gradient on its way from backprop to the optimizer (data parallel
# reduction, mean over ranks, loss scaling, casts).
GRADIENT_TRANSFORM_OPS = {"AllReduce", "Mul", "RealDiv", "Div", "Cast", "Reshape", "_MirrorOperator"}
_INPUT_PARAM_RE = re.compile(r"^inputs?\d+$")


def is_backward(name: str) -> bool:
    """Whether a full name is in the backward pass."""
    return name.startswith("Gradients/") or "/Gradients/" in name


def trace_source(g: nx.DiGraph, name: str, on_step: Callable[[str], None] | None = None) -> str:
    """Follow pass-through nodes (Load, Depend, TupleGetItem...) back to the value's producer."""
    tuple_index: list[int] = []
    seen: set[str] = set()
    while name in g and name not in seen:
        seen.add(name)
        attrs = g.nodes[name]
        op = attrs.get("op_type", "")
        inputs = [i for i, _ in attrs.get("inputs", ())]
        if op == "TupleGetItem" and len(inputs) >= 1:
            idx = attrs.get("tuple_index")
            if idx is not None:
                tuple_index.append(idx)
            name = inputs[0]
        elif op == "MakeTuple" and inputs:
            i = tuple_index.pop() if tuple_index else 0
            name = inputs[i] if i < len(inputs) else inputs[0]
        elif op in PASS_THROUGH_OPS and inputs and op != "UpdateState":
            name = inputs[0]
        else:
            return name
        if on_step is not None:
            on_step(name)
    return name


def classify(g: nx.DiGraph, outputs: list[str]) -> None:
    """Set ``kind`` (and ``param`` for weights, gradients, state) on every node of ``g``."""
    for n, a in g.nodes(data=True):
        a["kind"] = _base_kind(n, a)
        a["param"] = n if a.get("is_parameter") else None
    for n, a in list(g.nodes(data=True)):
        spec = OPTIMIZER_INPUTS.get(a.get("op_type", ""))
        if spec is None:
            continue
        inputs = [i for i, _ in a.get("inputs", ())]
        w_idx, g_idx, state_idx = spec
        if w_idx >= len(inputs):
            continue
        weight = trace_source(g, inputs[w_idx])
        if weight not in g:
            continue
        g.nodes[weight]["kind"] = "weight"
        g.nodes[weight]["param"] = weight
        for i, src in enumerate(inputs):
            if i in (w_idx, g_idx) or not src:
                continue
            p = trace_source(g, src)
            if p in g and g.nodes[p].get("is_parameter") and g.nodes[p]["kind"] != "weight":
                g.nodes[p]["kind"] = "optimizer_state"
                g.nodes[p]["param"] = weight if i in state_idx else p
        if g_idx < len(inputs):
            _mark_gradient(g, inputs[g_idx], weight)
    loss = find_loss(g, outputs)
    if loss is not None:
        g.nodes[loss]["kind"] = "loss"


def _base_kind(name: str, a: dict) -> str:
    if a.get("is_constant"):
        return "constant"
    if a.get("is_parameter"):
        if _INPUT_PARAM_RE.match(name) or a.get("is_graph_input"):
            return "input"
        return "other"
    op = a.get("op_type", "").lower()
    if op in ACTIVATION_OPS and not is_backward(name):
        return "activation"
    return "other"


def _mark_gradient(g: nx.DiGraph, src: str, weight: str) -> None:
    node = trace_source(g, src)
    seen: set[str] = set()
    while node in g and node not in seen:
        seen.add(node)
        a = g.nodes[node]
        if a.get("is_parameter") or a.get("is_constant"):
            return
        a["kind"] = "gradient"
        a["param"] = weight
        if a.get("op_type") not in GRADIENT_TRANSFORM_OPS:
            return
        nxt = [i for i, _ in a.get("inputs", ()) if i in g and not g.nodes[i].get("is_constant")
               and not g.nodes[i].get("is_parameter")]
        if not nxt:
            return
        node = trace_source(g, nxt[0])


def find_loss(g: nx.DiGraph, outputs: list[str]) -> str | None:
    """The loss node: the graph's scalar output traced back, else the last node of a loss scope."""
    for out in outputs:
        node = trace_source(g, out)
        if node in g and not g.nodes[node].get("is_parameter") and _is_scalar(g.nodes[node]):
            return node
    last = None
    for n, a in g.nodes(data=True):
        if a.get("op_type") in FRAMEWORK_OPS or is_backward(n):
            continue
        if "loss" in a.get("scope", "").lower():
            last = n
    return last


def _is_scalar(a: dict) -> bool:
    outs = a.get("outputs") or []
    if not outs:
        return False
    shape = outs[0].shape
    return shape is None or shape == () or shape == (1,)
