"""The ops of every step of a rank as one graph: nodes in call order, hints from msprobe's conventions.

msprobe records no data-flow edges. This module draws only the edges it can justify, and says so
(:data:`DATAFLOW`); every other input is ``(unrecorded)``:

- parameter -> reader: a module forward (levels L0/mix) lists the parameters it holds; an op called
  inside that module (construct.json) whose input has the same dtype, shape and all four statistics
  as exactly one of those parameters reads it, and the module's own node reads all of them;
- weight and gradient -> optimizer update: an op under msprobe's synthetic ``optimizer`` node whose
  input equals, in that same sense, exactly one parameter's value as read in the step, or one
  parameter gradient (``parameters_grad``), gets that parameter or gradient as the input.

A weight's tensor in a step is its value after that step's update: the output of the optimizer op
that wrote it last (see :mod:`.optimizer`). When no update is recorded (level L0, MindSpore PyNative
dumps, which record no optimizer) it is the value its module read in the next step, when that step
is dumped (nothing changes a weight between its update and the next forward); the last dumped step
has none. The value a module forward lists under ``parameters`` (read before the update) is that
module's input in the slot that names the parameter: every entry of dump.json is a tensor, and a
weight's value before an update is its readers' input, never taken for the value after it (that
made every weight "unchanged" in its first step). Every other op under ``optimizer`` that belongs
to a parameter is its ``optimizer_state``.

Equal statistics alone are NOT taken as an edge between activations (a ReLU of a positive tensor
equals its input): activations are a sequence in call order. Backward ops carry their forward op's
stack (stack.json lists forward ops only), so code <-> graph finds both directions.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..records import GraphRecord, Kind, NodeRecord, OutputType
from .dumpjson import Item, Step, parse_api, parse_module
from .optimizer import analyse

UNRECORDED = "(unrecorded)"
OPTIMIZER = "optimizer"
DATAFLOW = ("no data-flow edges are recorded: ops are a call sequence; inferred edges only parameter -> the ops "
            "of its module that read it, and parameter/gradient -> optimizer updates (exact dtype, shape and "
            "Max/Min/Mean/Norm, unambiguous); other inputs are '(unrecorded)'")

# API names and module classes (lower case, in-place "_" stripped) -> the function in tdbg's common words
# (NodeRecord.activation).
_SAME = ("relu", "relu6", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "silu", "leaky_relu", "elu",
         "hardtanh", "mish", "softplus", "hardswish", "hardsigmoid", "selu", "celu", "glu", "logsigmoid",
         "swiglu", "prelu", "rrelu", "softsign")
ACTIVATIONS: dict[str, str] = {
    **{n: n for n in _SAME}, "swish": "silu", "fast_gelu": "gelu", "npu_fast_gelu": "gelu", "npu_swiglu": "swiglu",
    # module classes (nn.LeakyReLU, nn.LogSoftmax ...)
    "leakyrelu": "leaky_relu", "logsoftmax": "log_softmax", "fastgelu": "gelu", "hswish": "hardswish",
    "hsigmoid": "hardsigmoid", "relu6": "relu6",
}
COLLECTIVE = frozenset({"all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base", "broadcast",
                        "all_reduce_coalesced", "allreduce", "allgather"})
PER_RANK = frozenset({"reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "all_to_all",
                      "all_to_all_single", "scatter", "gather", "reduce", "send", "recv", "isend", "irecv",
                      "batch_isend_irecv", "barrier"})
_RANDOM = ("dropout", "rand", "normal", "uniform", "bernoulli", "multinomial", "randperm")


@dataclass
class StepTensors:
    """The tensors of one step: (node, io, slot, item); ``borrowed``: the rows whose entry is in another
    step's folder (a weight after its update, read in the next step), by (node, io, slot) -> that step."""

    rows: list[tuple[str, str, int, Item]] = field(default_factory=list)
    borrowed: dict[tuple[str, str, int], int] = field(default_factory=dict)


@dataclass
class _Node:
    rec: NodeRecord
    step: int


def _component(key: str) -> str:
    mod = parse_module(key)
    if mod is not None:
        return f"{mod[0]}-{mod[1]}"
    return key


def _scope(step: Step, key: str) -> str:
    chain: list[str] = []
    p = step.parents.get(key)
    seen = {key}
    while p and p not in seen and len(chain) < 200:
        seen.add(p)
        chain.append(_component(p))
        p = step.parents.get(p)
    return "/".join(reversed(chain))


def _ancestors(step: Step, key: str) -> list[str]:
    out: list[str] = []
    p, seen = step.parents.get(key), {key}
    while p and p not in seen and len(out) < 200:
        seen.add(p)
        out.append(p)
        p = step.parents.get(p)
    return out


def _unique(sig: tuple, table: dict[str, tuple]) -> str | None:
    hits = [k for k, s in table.items() if s == sig]
    return hits[0] if len(hits) == 1 else None


def _by_signature(table: dict[str, tuple]) -> dict[tuple, str | None]:
    """signature -> the one key that has it (None when several do: ambiguous)."""
    out: dict[tuple, str | None] = {}
    for k, sig in table.items():
        try:
            out[sig] = None if sig in out else k
        except TypeError:   # an unhashable statistic (a list): never matched
            continue
    return out


def _lookup(index: dict[tuple, str | None], sig: tuple) -> str | None:
    try:
        return index.get(sig)
    except TypeError:
        return None


def _forward_key(key: str) -> str | None:
    api = parse_api(key)
    if api is not None and api[3] == "backward":
        return key[: -len("backward")] + "forward"
    mod = parse_module(key)
    if mod is not None and mod[2] == "backward":
        return key.replace(".backward.", ".forward.")
    return None


def build(steps: list[tuple[int, Step]], source_file: str, name: str) -> tuple[GraphRecord, dict[int, StepTensors]]:
    """The union graph of ``steps`` (call order of the first step a node appears in) and each step's tensors."""
    nodes: dict[str, _Node] = {}
    order: list[str] = []
    tensors: dict[int, StepTensors] = {}
    sps = {sn: _step_params(step) for sn, step in steps}
    for sn, step in steps:
        rows = StepTensors()
        tensors[sn] = rows
        seq = _step_nodes(sn, step, sps[sn], rows, nodes)
        _merge(order, nodes, seq)
    _weights_read_next(tensors, sps, nodes)
    _loss(nodes, order, steps)
    record = GraphRecord(0, name, [nodes[k].rec for k in order], [], source_file)
    record.execution_order = [k for k in order if not nodes[k].rec.is_parameter]
    return record, tensors


def _merge(order: list[str], nodes: dict[str, _Node], seq: list[tuple[str, _Node | None]]) -> None:
    """Add a step's nodes (None: already known): new ones go right after the nearest earlier known node."""
    if not order:
        for k, n in seq:
            if n is not None and k not in nodes:
                nodes[k] = n
                order.append(k)
        return
    new_after: dict[str | None, list[str]] = {}
    last: str | None = None      # the nearest earlier node already in ``order``: a run of new ones follows it
    for k, n in seq:
        if n is None or k in nodes:
            last = k
            continue
        nodes[k] = n
        new_after.setdefault(last, []).append(k)
    if not new_after:
        return
    merged = list(new_after.get(None, []))
    for k in order:
        merged.append(k)
        merged.extend(new_after.get(k, []))
    order[:] = merged


@dataclass
class _StepParams:
    """What a step says of its parameters before any op is read: readers later in the file may precede
    the module's entry."""

    params: dict[str, Item] = field(default_factory=dict)         # parameter -> value as first read in the step
    scope: dict[str, str] = field(default_factory=dict)           # parameter -> its module's scope
    of_module: dict[str, dict[str, str]] = field(default_factory=dict)   # module forward key -> {parameter: name}
    grads: dict[str, Item] = field(default_factory=dict)          # gradient node -> item
    grad_param: dict[str, str] = field(default_factory=dict)      # gradient node -> parameter


def _step_params(step: Step) -> _StepParams:
    """The parameters the step's module forwards list, and the gradients its ``parameters_grad`` entries hold."""
    sp = _StepParams()
    for op in step.ops:
        mod = parse_module(op.key)
        if mod is None:
            continue
        path, cls, direction, _ = mod
        if direction == "forward" and op.params:
            mine = {}
            for pname, item in op.params.items():
                full = f"{path}.{pname}"
                mine[full] = pname
                if full not in sp.params:
                    sp.params[full] = item
                    sp.scope[full] = "/".join(x for x in (_scope(step, op.key), f"{path}-{cls}") if x)
            sp.of_module[op.key] = mine
        elif direction == "parameters_grad":
            for pname, item in op.grads.items():
                gnode = f"{op.key}.{pname}"
                sp.grads[gnode] = item
                sp.grad_param[gnode] = f"{path}.{pname}"
    return sp


def _weights_read_next(tensors: dict[int, StepTensors], sps: dict[int, _StepParams],
                       nodes: dict[str, _Node]) -> None:
    """A weight with no recorded update in step N (level L0, MindSpore PyNative): its value after the update
    is what its module read in step N+1, when that step is dumped (a gap in the steps: unknown)."""
    for sn, rows in tensors.items():
        nxt = sps.get(sn + 1)
        if nxt is None:
            continue
        have = {node for node, io, slot, _ in rows.rows if io == "output" and slot == 0}
        for full in sps[sn].params:
            node = nodes.get(full)
            if full in have or node is None or not node.rec.is_parameter or full not in nxt.params:
                continue
            rows.rows.append((full, "output", 0, nxt.params[full]))
            rows.borrowed[(full, "output", 0)] = sn + 1


def _param_input_rows(op: Any, rec: NodeRecord, sp: _StepParams, rows: StepTensors) -> None:
    """A module forward's ``parameters`` (the values read before the update) as its inputs in the slots that
    name them (``_wire_inputs`` puts them after the call's own inputs)."""
    mine = sp.of_module.get(op.key, {})
    taken = {it.slot for it in op.items if it.io == "input"}
    for slot, (src, _) in enumerate(rec.inputs):
        pname = mine.get(src)
        if pname is not None and slot not in taken and pname in op.params:
            rows.rows.append((op.key, "input", slot, op.params[pname]))


def _step_nodes(sn: int, step: Step, sp: _StepParams, rows: StepTensors,
                known: dict[str, _Node]) -> list[tuple[str, _Node | None]]:
    """A step's nodes in call order, built only for names not ``known`` from an earlier step; its tensors into ``rows``."""
    out: list[tuple[str, _Node | None]] = []
    grad_index = _by_signature({g: it.signature for g, it in sp.grads.items()})
    opt = analyse([op for op in step.ops if OPTIMIZER in _ancestors(step, op.key)], sp.params,
                  {sp.grad_param[g]: it for g, it in sp.grads.items()})
    emitted_params: set[str] = set()
    for op in step.ops:
        mod = parse_module(op.key)
        if mod is not None and mod[2] == "parameters_grad":
            out.extend(_grad_nodes(sn, op, mod, sp, rows, known))
            continue
        out.extend(_param_nodes(sn, op, sp, opt, emitted_params, rows, known))
        if op.key in known:
            out.append((op.key, None))
            rows.rows.extend((op.key, it.io, it.slot, it) for it in op.items)
            _param_input_rows(op, known[op.key].rec, sp, rows)
            continue
        rec = _op_node(step, op.key, mod, parse_api(op.key))
        _wire_inputs(rec, step, op, mod, sp, opt, grad_index)
        n_out = max((it.slot for it in op.items if it.io == "output"), default=-1) + 1
        outs = [OutputType(None, None) for _ in range(n_out)]
        for it in op.items:
            if it.io == "output":
                outs[it.slot] = OutputType(it.dtype or None, it.shape)
        rec.outputs = outs
        if not rec.stack and step.stacks:
            fwd = _forward_key(op.key)
            rec.stack = step.stacks.get(op.key) or (step.stacks.get(fwd, ()) if fwd else ())
        out.append((op.key, _Node(rec, sn)))
        rows.rows.extend((op.key, it.io, it.slot, it) for it in op.items)
        _param_input_rows(op, rec, sp, rows)
    return out


def _grad_nodes(sn: int, op: Any, mod: tuple, sp: _StepParams, rows: StepTensors,
                known: dict[str, _Node]) -> list[tuple[str, _Node | None]]:
    """The gradient nodes of one ``parameters_grad`` entry (None: already known)."""
    out: list[tuple[str, _Node | None]] = []
    path, cls = mod[0], mod[1]
    for pname, item in op.grads.items():
        gnode = f"{op.key}.{pname}"
        p = sp.grad_param[gnode]
        rows.rows.append((gnode, "output", 0, item))
        if gnode in known:
            out.append((gnode, None))
            continue
        rec = NodeRecord(gnode, f"{cls}.parameters_grad", sp.scope.get(p, f"{path}-{cls}"),
                         outputs=[OutputType(item.dtype or None, item.shape)], kind=Kind.GRADIENT,
                         param=p, is_backward=True, per_rank=True, module=path,
                         base_name=f"Module.{path}.{cls}.parameters_grad.{pname}")
        out.append((gnode, _Node(rec, sn)))
    return out


def _param_nodes(sn: int, op: Any, sp: _StepParams, opt: Any, emitted: set[str], rows: StepTensors,
                 known: dict[str, _Node]) -> list[tuple[str, _Node | None]]:
    """The parameter nodes a module forward lists, the first time the step lists each (None: already known)."""
    out: list[tuple[str, _Node | None]] = []
    for full in sp.of_module.get(op.key, {}):
        if full in emitted:
            continue
        emitted.add(full)
        # the weight after the step's update, when recorded; else the step's dump holds only the value
        # read before it (MindSpore PyNative dumps record no optimizer): no value after the update
        it = opt.after.get(full)
        if it is not None:
            rows.rows.append((full, "output", 0, it))
        it = it or sp.params[full]
        if full in known:
            out.append((full, None))
            continue
        rec = NodeRecord(full, "Parameter", sp.scope.get(full, ""), outputs=[OutputType(it.dtype or None,
                         it.shape)], is_parameter=True, has_default=True, kind=Kind.WEIGHT, param=full,
                         module=_module_path_of(op.key), base_name=full)
        out.append((full, _Node(rec, sn)))
    return out


def _wire_inputs(rec: NodeRecord, step: Step, op: Any, mod: tuple | None, sp: _StepParams, opt: Any,
                 grad_index: dict[tuple, str | None]) -> None:
    """The inputs an op can be shown to read (parameters of its modules, an optimizer's weight and
    gradient); every other input is :data:`UNRECORDED`."""
    ancestors = _ancestors(step, op.key)
    own = {}     # parameters of this op's modules, for readers inside them
    for a in ([op.key] if mod is not None else []) + ancestors:
        for full in sp.of_module.get(a, {}):
            own[full] = sp.params[full].signature
    in_items = [it for it in op.items if it.io == "input"]
    n_in = max((it.slot for it in in_items), default=-1) + 1
    srcs = [""] * n_in
    roles = ["hyper"] * n_in
    in_optimizer = OPTIMIZER in ancestors
    mine = opt.param_of.get(op.key)
    for it in in_items:
        src = UNRECORDED
        if in_optimizer:
            g = _lookup(grad_index, it.signature)
            if it.slot == 0 and op.key in opt.updates:
                src, roles[0] = opt.updates[op.key], "weight"
            elif g is not None and opt.tied.get(mine or "") and sp.grad_param[g] in opt.tied[mine or ""]:
                src, roles[it.slot] = g, "gradient"
        elif own and not rec.is_backward:
            w = _unique(it.signature, own)
            if w is not None:
                src = w
        srcs[it.slot] = src
    if mod is not None and mod[2] == "forward":
        srcs.extend(sp.of_module.get(op.key, {}))   # a module reads its own parameters
    rec.inputs = [(s, "data") for s in srcs]
    rec.value_inputs = tuple(srcs)
    if in_optimizer and "weight" in roles:
        rec.input_roles = tuple(roles)
        rec.param = srcs[roles.index("weight")]
    elif mine is not None:   # the parameter's optimizer state, or a value computed from it
        rec.kind, rec.param = Kind.OPTIMIZER_STATE, mine


def _module_path_of(key: str) -> str:
    """The path of a module entry's key ("" for an API)."""
    mod = parse_module(key)
    return str(mod[0]) if mod is not None else ""


def _module_path(step: Step, key: str) -> str:
    """The dotted path of the innermost module an op runs in ("" when none)."""
    for k in [key] + _ancestors(step, key):
        mod = parse_module(k)
        if mod is not None:
            return str(mod[0])
    return ""


def _op_node(step: Step, key: str, mod: tuple | None, api: tuple | None) -> NodeRecord:
    if mod is not None:
        path, cls, direction, _ = mod
        scope = "/".join(x for x in (_scope(step, key), f"{path}-{cls}") if x)
        rec = NodeRecord(key, cls, scope, is_backward=direction == "backward", module=path,
                         base_name=f"Module.{path}.{cls}.{direction}")
        if direction == "forward" and cls.lower() in ACTIVATIONS:
            rec.kind = Kind.ACTIVATION
            rec.activation = ACTIVATIONS[cls.lower()]
        return rec
    if api is not None:
        prefix, name, _, direction = api
        rec = NodeRecord(key, f"{prefix}.{name}", _scope(step, key), is_backward=direction == "backward",
                         module=_module_path(step, key), base_name=f"{prefix}.{name}.{direction}")
        low = name.lower()
        if direction == "forward" and low.rstrip("_") in ACTIVATIONS:
            rec.kind = Kind.ACTIVATION
            rec.activation = ACTIVATIONS[low.rstrip("_")]
        if prefix == "Distributed":
            rec.is_collective = low in COLLECTIVE
            rec.per_rank = low in PER_RANK
        if any(w in low for w in _RANDOM):
            rec.per_rank = True
        return rec
    return NodeRecord(key, key.split(".")[0], _scope(step, key), module=_module_path(step, key), base_name=key)


def _loss(nodes: dict[str, _Node], order: list[str], steps: list[tuple[int, Step]]) -> None:
    """The forward op whose backward starts the backward pass with a scalar gradient: what ``backward()`` was called on."""
    first_bwd = next((k for k in order if nodes[k].rec.is_backward and not nodes[k].rec.kind == Kind.GRADIENT), None)
    if first_bwd is None:
        return
    fwd = _forward_key(first_bwd)
    if fwd is None or fwd not in nodes:
        return
    f = nodes[fwd].rec
    b = nodes[first_bwd]
    step = dict(steps).get(b.step)
    grads_in = [it for op in (step.ops if step else []) if op.key == first_bwd for it in op.items if it.io == "input"]
    if len(grads_in) == 1 and _scalar(grads_in[0].shape) and len(f.outputs) == 1 and _scalar(f.outputs[0].shape):
        f.kind = Kind.LOSS


def _scalar(shape: tuple[int, ...] | None) -> bool:
    return shape in ((), (1,))


def graph_key(record: GraphRecord) -> str:
    """A digest of everything the graph says (ranks with equal keys share one parsed graph)."""
    h = hashlib.blake2b(digest_size=16)
    for n in record.nodes:
        h.update(repr((n.name, n.op_type, n.scope, n.inputs, n.kind, n.param, n.is_backward, n.input_roles,
                       [(o.dtype, o.shape) for o in n.outputs], n.stack, n.module)).encode("utf-8", "surrogateescape"))
    return h.hexdigest()
