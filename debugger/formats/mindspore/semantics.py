"""MindSpore's graph conventions, turned into the node hints every format gives (records.NodeRecord).

Kinds come from graph evidence, not names: the optimizer kernel's inputs name the weights, their
gradients and the optimizer state; the graph's scalar output is the loss. Routing ops (Load,
Depend, TupleGetItem ...) are followed to the node that made a value.
"""
from __future__ import annotations

import re

from ..records import GraphRecord, NodeRecord

# op_type -> (weight input, gradient input, optimizer-state inputs). Other Parameter inputs
# of an optimizer kernel (learning rate, momentum, betas) are hyper-parameters, kind optimizer_state.
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

# MindSpore's activation kernels (lower case) -> the function in tdbg's common words (NodeRecord.activation).
ACTIVATION_OPS = {
    "elu": "elu", "fastgelu": "gelu", "gelu": "gelu", "hsigmoid": "hardsigmoid", "hswish": "hardswish",
    "leakyrelu": "leaky_relu", "logsigmoid": "logsigmoid", "logsoftmax": "log_softmax", "prelu": "prelu",
    "relu": "relu", "relu6": "relu6", "reluv2": "relu", "sigmoid": "sigmoid", "softmax": "softmax", "tanh": "tanh",
    "silu": "silu", "swish": "silu", "softplus": "softplus", "mish": "mish", "selu": "selu", "celu": "celu",
    "hardtanh": "hardtanh",
}

# Nodes whose value is their first input's (followed when tracing a value to its producer).
PASS_THROUGH_OPS = {"Load", "Depend", "TupleGetItem", "MakeTuple", "Identity"}
# Nodes that only route (no computation of their own): hidden in graph views.
ROUTING_OPS = PASS_THROUGH_OPS | {"UpdateState", "Return", "Switch", "Partial", "UMonad", "IOMonad"}
COLLECTIVE_OPS = {"AllReduce", "AllGather", "Broadcast", "ReduceScatter", "AlltoAll", "AllToAll"}
# Communication and random ops whose outputs differ per rank by design.
PER_RANK_OPS = frozenset({"ReduceScatter", "AllToAll", "AlltoAll", "AlltoAllV", "AllToAllv", "Send", "Receive",
                          "Reduce", "NeighborExchange", "NeighborExchangeV2", "CollectiveScatter",
                          "CollectiveGather", "Barrier", "BatchISendIRecv"})
_RANDOM_WORDS = ("Random", "Dropout", "Uniform", "Normal", "Gamma", "Poisson", "Multinomial", "Shuffle", "GetNext")
# Ops that transform a gradient on its way from backprop to the optimizer (data parallel
# reduction, mean over ranks, loss scaling, casts).
GRADIENT_TRANSFORM_OPS = {"AllReduce", "Mul", "RealDiv", "Div", "Cast", "Reshape", "_MirrorOperator"}
_INPUT_PARAM_RE = re.compile(r"^inputs?\d+$")
_OP_NUMBER_RE = re.compile(r"-op\d+")


def is_backward(name: str) -> bool:
    """Whether a full name is in the backward pass."""
    return name.startswith("Gradients/") or "/Gradients/" in name


def annotate(record: GraphRecord) -> GraphRecord:
    """Fill every node's hints (kind, param, backward, routing, collective, roles, traced inputs)."""
    nodes = {n.name: n for n in record.nodes}
    for n in record.nodes:
        n.is_backward = is_backward(n.name)
        n.is_routing = n.op_type in ROUTING_OPS
        n.is_collective = n.op_type in COLLECTIVE_OPS
        n.per_rank = n.op_type in PER_RANK_OPS or any(w in n.op_type for w in _RANDOM_WORDS)
        n.base_name = _OP_NUMBER_RE.sub("", n.name) if not (n.is_parameter or n.is_constant) else n.name
        n.kind = _base_kind(n)
        n.activation = ACTIVATION_OPS.get(n.op_type.lower(), "") if n.kind == "activation" else ""
        n.param = n.name if n.is_parameter else None
    for n in record.nodes:
        if n.op_type in ROUTING_OPS - PASS_THROUGH_OPS:
            n.value_inputs = ()   # their value is not an input's: tracing stops at them
        else:
            n.value_inputs = tuple(_trace(nodes, src) if src and _carries_value(n, slot) else ""
                                   for slot, (src, _) in enumerate(n.inputs))
    for n in record.nodes:
        spec = OPTIMIZER_INPUTS.get(n.op_type)
        if spec is not None:
            _mark_optimizer(nodes, n, spec)
    loss = _find_loss(nodes, record.outputs)
    if loss is not None:
        nodes[loss].kind = "loss"
    return record


def _carries_value(n: NodeRecord, slot: int) -> bool:
    """Whether input ``slot`` of ``n`` is data: a pass-through op passes on its first input only (the
    rest are monads and ordering dependencies), except a tuple, which passes on every element."""
    return n.op_type not in PASS_THROUGH_OPS or slot == 0 or n.op_type == "MakeTuple"


def _trace(nodes: dict[str, NodeRecord], name: str) -> str:
    """Follow pass-through nodes back to the value's producer."""
    seen: set[str] = set()
    while name in nodes and name not in seen:
        seen.add(name)
        n = nodes[name]
        if n.op_type not in PASS_THROUGH_OPS or not n.inputs:
            return name
        name = n.inputs[0][0]
    return name


def _base_kind(n: NodeRecord) -> str:
    if n.is_constant:
        return "constant"
    if n.is_parameter:
        return "input" if _INPUT_PARAM_RE.match(n.name) else "other"
    if n.op_type.lower() in ACTIVATION_OPS and not n.is_backward:
        return "activation"
    return "other"


def _mark_optimizer(nodes: dict[str, NodeRecord], n: NodeRecord, spec: tuple[int, int, tuple[int, ...]]) -> None:
    w_idx, g_idx, state_idx = spec
    traced = n.value_inputs
    if w_idx >= len(traced) or traced[w_idx] not in nodes:
        return
    roles = ["hyper"] * len(traced)
    weight = traced[w_idx]
    nodes[weight].kind = "weight"
    nodes[weight].param = weight
    roles[w_idx] = "weight"
    for i, p in enumerate(traced):
        if i in (w_idx, g_idx) or not p:
            continue
        if i in state_idx:
            roles[i] = "state"
        if p in nodes and nodes[p].is_parameter and nodes[p].kind != "weight":
            nodes[p].kind = "optimizer_state"
            nodes[p].param = weight if i in state_idx else p
    if g_idx < len(traced):
        roles[g_idx] = "gradient"
        _mark_gradient(nodes, traced[g_idx], weight)
    n.input_roles = tuple(roles)


def _mark_gradient(nodes: dict[str, NodeRecord], node: str, weight: str) -> None:
    seen: set[str] = set()
    while node in nodes and node not in seen:
        seen.add(node)
        a = nodes[node]
        if a.is_parameter or a.is_constant:
            return
        a.kind = "gradient"
        a.param = weight
        if a.op_type not in GRADIENT_TRANSFORM_OPS:
            return
        nxt = [i for i, _ in a.inputs if i in nodes and not nodes[i].is_constant and not nodes[i].is_parameter]
        if not nxt:
            return
        node = _trace(nodes, nxt[0])


def _find_loss(nodes: dict[str, NodeRecord], outputs: list[str]) -> str | None:
    """The loss node: the graph's scalar output traced back, else the last node of a loss scope."""
    for out in outputs:
        name = _trace(nodes, out)
        if name in nodes and not nodes[name].is_parameter and _is_scalar(nodes[name]):
            return name
    last = None
    for n in nodes.values():
        if n.op_type in ROUTING_OPS or n.is_parameter or n.is_constant or n.is_backward:
            continue
        if "loss" in n.scope.lower():
            last = n.name
    return last


def _is_scalar(n: NodeRecord) -> bool:
    if not n.outputs:
        return False
    shape = n.outputs[0].shape
    return shape is None or shape == () or shape == (1,)
