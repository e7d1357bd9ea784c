"""MindSpore's graph conventions, turned into the node hints every format gives (records.NodeRecord).

Kinds come from graph evidence, not names: the optimizer kernel's inputs name the weights, their
gradients and the optimizer state; the graph's scalar output is the loss. Routing ops (Load,
Depend, TupleGetItem ...) are followed to the node that made a value, and TupleGetItem's index to
the output slot: BatchNormGrad's slots 1 and 2 are the gradients of gamma and beta, slot 0 is not.

Outputs whose contents mean nothing are marked ``undefined`` (listed, never checked): a slot of a
multi-output kernel that no node reads and the kernel does not write on this device. MindSpore's CPU
BatchNorm kernel writes y (0), the batch mean (3) and the batch variance (4), and leaves slots 1 and 2
as the memory held (zeros, or another layer's old values: verified on MindSpore 2.10 dumps of mindcv's
ResNet, where slot 3 and 4 equal the batch statistics of the input and slots 1 and 2 do not); the
graph reads slot 1 nowhere and slot 2 only as BatchNormGrad's reserve input, which the CPU kernel ignores.
"""
from __future__ import annotations

import re

from ..records import GraphRecord, Kind, NodeRecord, OutputType

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
# reduction, mean over ranks, loss scaling, casts, weight decay added by AddN).
GRADIENT_TRANSFORM_OPS = {"AllReduce", "Mul", "RealDiv", "Div", "Cast", "Reshape", "_MirrorOperator", "AddN", "Add"}
# Output slots a kernel leaves unwritten on a device (see the module docstring), when no node reads them
# for their value; device_target as the dump's config.json names it.
UNWRITTEN_OUTPUTS: dict[str, dict[str, frozenset[int]]] = {"CPU": {"BatchNorm": frozenset({1, 2})}}
# Inputs a kernel takes but does not read on a device (BatchNormGrad's reserve space on CPU).
UNREAD_INPUTS: dict[str, dict[str, frozenset[int]]] = {"CPU": {"BatchNormGrad": frozenset({5})}}
_INPUT_PARAM_RE = re.compile(r"^inputs?\d+$")
# an argument of a jit function (x, y): a Python name, never a cell's dotted parameter path nor MindSpore's
# own name for a value passed between graphs (Parameter_95)
_ARGUMENT_RE = re.compile(r"^(?!Parameter_\d+$)[A-Za-z_][A-Za-z0-9_]*$")
_STATE_WRITES = {"Assign", "AssignAdd", "AssignSub", "ScatterUpdate", "ScatterAdd"}
_OP_NUMBER_RE = re.compile(r"-op\d+")


def is_backward(name: str) -> bool:
    """Whether a full name is in the backward pass."""
    return name.startswith("Gradients/") or "/Gradients/" in name


def annotate(record: GraphRecord, device: str | None = None) -> GraphRecord:
    """Fill every node's hints (kind, param, backward, routing, collective, roles, traced inputs, and
    per output slot a gradient's weight and undefined contents); ``device``: the dump's device_target."""
    nodes = {n.name: n for n in record.nodes}
    for n in record.nodes:
        n.is_backward = is_backward(n.name)
        n.is_routing = n.op_type in ROUTING_OPS
        n.is_collective = n.op_type in COLLECTIVE_OPS
        n.per_rank = n.op_type in PER_RANK_OPS or any(w in n.op_type for w in _RANDOM_WORDS)
        n.base_name = _OP_NUMBER_RE.sub("", n.name) if not (n.is_parameter or n.is_constant) else n.name
        n.kind = _base_kind(n)
        n.activation = ACTIVATION_OPS.get(n.op_type.lower(), "") if n.kind == Kind.ACTIVATION else ""
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
    _mark_arguments(record.nodes)
    loss = _find_loss(nodes, record.outputs)
    if loss is not None:
        nodes[loss].kind = Kind.LOSS
    _mark_undefined_outputs(record.nodes, device)
    return record


def _mark_arguments(nodes: list[NodeRecord]) -> None:
    """The batch a ``@jit`` step function takes (its arguments, named as in Python: ``x``, ``y``) is the
    graph's data input, as ``TrainOneStepCell``'s ``inputs0``: a parameter that no optimizer updates, read by
    the forward pass (the backward may read it too) and never written (``global_step`` is assigned to)."""
    users: dict[str, list[NodeRecord]] = {}
    for n in nodes:
        for src in n.value_inputs:
            if src:
                users.setdefault(src, []).append(n)
    for p in nodes:
        if not p.is_parameter or p.kind != Kind.OTHER or p.has_default or not _ARGUMENT_RE.match(p.name):
            continue
        readers = users.get(p.name, [])
        if any(not r.is_backward and not r.is_routing for r in readers) and \
                not any(r.input_roles or r.op_type in _STATE_WRITES for r in readers):
            p.kind = Kind.INPUT


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


def _trace_slot(nodes: dict[str, NodeRecord], name: str) -> tuple[str, int | None]:
    """Follow pass-through nodes back to the value's producer and the output slot it comes from
    (None: the producer's only or whole output, or a slot the graph does not say)."""
    seen: set[str] = set()
    items: list[int | None] = []   # tuple indices still to apply, innermost last
    while name in nodes and name not in seen:
        seen.add(name)
        n = nodes[name]
        if n.op_type not in PASS_THROUGH_OPS or not n.inputs:
            break
        if n.op_type == "TupleGetItem":
            items.append(n.item)
        elif n.op_type == "MakeTuple" and items:
            k = items.pop()
            if k is None or not 0 <= k < len(n.inputs):
                return name, None
            name = n.inputs[k][0]
            continue
        name = n.inputs[0][0]
    return name, items[0] if len(items) == 1 else None


def _base_kind(n: NodeRecord) -> Kind:
    if n.is_constant:
        return Kind.CONSTANT
    if n.is_parameter:
        return Kind.INPUT if _INPUT_PARAM_RE.match(n.name) else Kind.OTHER
    if n.op_type.lower() in ACTIVATION_OPS and not n.is_backward:
        return Kind.ACTIVATION
    return Kind.OTHER


def _mark_optimizer(nodes: dict[str, NodeRecord], n: NodeRecord, spec: tuple[int, int, tuple[int, ...]]) -> None:
    w_idx, g_idx, state_idx = spec
    traced = n.value_inputs
    if w_idx >= len(traced) or traced[w_idx] not in nodes:
        return
    roles = ["hyper"] * len(traced)
    weight = traced[w_idx]
    nodes[weight].kind = Kind.WEIGHT
    nodes[weight].param = weight
    roles[w_idx] = "weight"
    for i, p in enumerate(traced):
        if i in (w_idx, g_idx) or not p:
            continue
        if i in state_idx:
            roles[i] = "state"
        if p in nodes and nodes[p].is_parameter and nodes[p].kind != Kind.WEIGHT:
            nodes[p].kind = Kind.OPTIMIZER_STATE
            nodes[p].param = weight if i in state_idx else p
    if g_idx < len(traced):
        roles[g_idx] = "gradient"
        src, slot = _trace_slot(nodes, n.inputs[g_idx][0]) if g_idx < len(n.inputs) else (traced[g_idx], None)
        _mark_gradient(nodes, src, slot, weight)
    n.input_roles = tuple(roles)


def _mark_gradient(nodes: dict[str, NodeRecord], node: str, slot: int | None, weight: str) -> None:
    """Mark the gradient of ``weight`` back from the optimizer through the ops that transform it; a
    multi-output backward kernel gets only the slot that holds it."""
    seen: set[str] = set()
    while node in nodes and node not in seen:
        seen.add(node)
        a = nodes[node]
        if a.is_parameter and a.kind == Kind.OTHER:
            # a graph input: the gradient was made in another graph (control flow) and passed in
            a.kind, a.param = Kind.GRADIENT, weight
            return
        if a.is_parameter or a.is_constant:
            return
        if slot is not None and (slot > 0 or len(a.outputs) > 1):
            _mark_output(a, slot, Kind.GRADIENT, weight)
            return
        a.kind = Kind.GRADIENT
        a.param = weight
        if a.op_type not in GRADIENT_TRANSFORM_OPS:
            return
        nxt = []
        for src, _ in a.inputs:
            b = nodes.get(_trace(nodes, src)) if src else None
            if b is None or b.is_constant or b.is_parameter:
                continue
            if weight in b.value_inputs and not b.is_backward:
                # weight decay: a term the optimizer makes from the weight itself and adds to its gradient
                # (backprop kernels read weights too: BatchNormGrad reads gamma)
                b.kind, b.param = Kind.OPTIMIZER_STATE, weight
                continue
            nxt.append(src)
        if not nxt:
            return
        node, slot = _trace_slot(nodes, nxt[0])


def _mark_output(n: NodeRecord, slot: int, kind: Kind, param: str | None) -> None:
    """Give one output slot of ``n`` its own kind (outputs the graph did not type are added untyped)."""
    while len(n.outputs) <= slot:
        n.outputs.append(OutputType(None, None))
    n.outputs[slot].kind = kind
    n.outputs[slot].param = param


def _mark_undefined_outputs(nodes: list[NodeRecord], device: str | None) -> None:
    """Mark the output slots a kernel leaves unwritten on ``device`` that no node reads for their value."""
    unwritten = UNWRITTEN_OUTPUTS.get((device or "").upper(), {})
    if not unwritten:
        return
    ignored = UNREAD_INPUTS.get((device or "").upper(), {})
    users: dict[str, list[tuple[NodeRecord, int]]] = {}
    for n in nodes:
        for i, (src, _) in enumerate(n.inputs):
            if _carries_value(n, i) and n.op_type not in ROUTING_OPS - PASS_THROUGH_OPS:
                users.setdefault(src, []).append((n, i))
    for n in nodes:
        slots = unwritten.get(n.op_type)
        if not slots:
            continue
        read: set[int] = set()
        for user, _ in users.get(n.name, ()):
            if user.op_type != "TupleGetItem" or user.item is None:
                read = set(slots)   # the whole tuple is passed on: any slot may be read
                break
            if any(i not in ignored.get(u.op_type, ()) for u, i in users.get(user.name, ())):
                read.add(user.item)
        for slot in sorted(slots - read):
            while len(n.outputs) <= slot:
                n.outputs.append(OutputType(None, None))
            n.outputs[slot].undefined = True


def _find_loss(nodes: dict[str, NodeRecord], outputs: list[str]) -> str | None:
    """The loss node: the graph's scalar float output traced back, else the last node of a loss scope."""
    for out in outputs:
        name = _trace(nodes, out)
        if name in nodes and not nodes[name].is_parameter and _is_scalar(nodes[name]) and _may_be_float(nodes[name]):
            return name
    last = None
    for n in nodes.values():
        if n.op_type in ROUTING_OPS or n.is_parameter or n.is_constant or n.is_backward:
            continue
        if _in_loss_scope(n.scope):
            last = n.name
    return last


def _in_loss_scope(scope: str) -> bool:
    """Whether a scope names a loss cell: an instance called ``*loss*`` or a class ``*Loss``. The wrapper
    WithLossCell (``network-WithLossCell``) holds the whole net: every node would be in a loss scope, and a
    control-flow branch graph's last node (a ReLU, a Tanh) taken for the loss."""
    for part in scope.split("/"):
        instance, _, cls = part.partition("-")
        if "loss" in instance.lower() or cls.endswith("Loss"):
            return True
    return False


def _is_scalar(n: NodeRecord) -> bool:
    if not n.outputs:
        return False
    shape = n.outputs[0].shape
    return shape is None or shape == () or shape == (1,)


def _may_be_float(n: NodeRecord) -> bool:
    """Whether the first output can be a loss value: a float, or of a dtype the graph does not say (a
    while/if condition, Greater's bool, is a graph's scalar output too)."""
    dtype = n.outputs[0].dtype if n.outputs else None
    return dtype is None or "float" in dtype.lower()


def mark_weights(record: GraphRecord, weights: frozenset[str]) -> GraphRecord:
    """Mark the parameters that an optimizer of another graph of the rank updates as weights: with
    control flow (if/while in construct) MindSpore splits a step into several graphs, and the graph that
    reads a weight (conv1's in the first) is not the one holding its optimizer kernel."""
    for n in record.nodes:
        if n.is_parameter and n.name in weights and n.kind != Kind.WEIGHT:
            n.kind = Kind.WEIGHT
            n.param = n.name
    return record


def weights_of(record: GraphRecord) -> set[str]:
    """The parameters a graph's optimizer kernels update (after :func:`annotate`)."""
    return {n.name for n in record.nodes if n.is_parameter and n.kind == Kind.WEIGHT}
