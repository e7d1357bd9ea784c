"""Write small but real MindSpore dumps (tree, .pb, .ir, csv files, .npy) without MindSpore."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

from debugger.proto import debug_graph_pb2

pb: Any = debug_graph_pb2   # generated code: its names are made at import time
Layer = tuple[str, int, int, Optional[str]]   # (cell name, in features, out features, activation or None)
ValuesFn = Callable[[int, int, str, str, int, np.ndarray], Optional[np.ndarray]]
File = tuple[str, str, str, str, int, Any]    # (op type, node, op name in the file, io, slot, value)

STALE_VALUE = -777.0          # what the stale copies of duplicate_timestamps=True hold (bools are inverted)
TS_BASE = 1796230236364755    # a real 2.10 timestamp; each iteration starts TS_STEP later
TS_STEP = 10_000_000
SITE = "/opt/msenv/lib/python3.11/site-packages/mindspore"
BACKBONE = "Default/network-WithLossCell/_backbone-Net"
LOSS = "Default/network-WithLossCell/_loss_fn-SoftmaxCrossEntropyWithLogits"
REDUCER = "Default/grad_reducer-DistributedGradReducer"
FRAMEWORK_OPS = {"Load", "Depend", "MakeTuple", "UpdateState"}   # in the graph, never run nor dumped
_PLAIN_IR_OPS = FRAMEWORK_OPS | {"SparseSoftmaxCrossEntropyWithLogits", "ApplyMomentum", "AllReduce", "Adam"}
_MS_DTYPE = {"float32": "Float32", "float16": "Float16", "float64": "Float64", "int32": "Int32",
             "int64": "Int64", "int8": "Int8", "uint8": "UInt8", "bool": "Bool"}
_PB_DTYPE = {"bool": 1, "int8": 2, "int32": 4, "int64": 5, "uint8": 6, "float16": 10, "float32": 11, "float64": 12}
_GRAD_OP = {"ReLU": "ReluGrad"}   # backward op of an activation; default "{Act}Grad"
_CELL = f"{SITE}/nn/wrap/cell_wrapper.py"
_DENSE = f"{SITE}/nn/layer/basic.py"
_OUTER = [(_CELL, "442", "        loss = self.network(*inputs)"),
          (_CELL, "440~453", "    def _no_sens_impl(self, *inputs):"),
          (_CELL, "425", "            return self._no_sens_impl(*inputs)"),
          (_CELL, "423~438", "    def construct(self, *inputs):")]
_WITH_LOSS = [(_CELL, "121~123", "    def construct(self, data, label):")] + _OUTER
_OPT_OUTER = [(_CELL, "447", "        loss = ops.depend(loss, self.optimizer(grads))")] + _OUTER[1:]
_LOSS_F = [(f"{SITE}/nn/loss/loss.py", "891", "                x = self.sparse_softmax_cross_entropy(logits, labels)"),
           (f"{SITE}/nn/loss/loss.py", "886~895", "    def construct(self, logits, labels):"),
           (_CELL, "123", "        return self._loss_fn(out, label)")] + _WITH_LOSS
_RED_F = [(f"{SITE}/nn/wrap/grad_reducer.py", "314", "            new_grad = self.allreduce(grad)"),
          (_CELL, "446", "        grads = self.grad_reducer(grads)")] + _OUTER[1:]


def _frames(items: Iterable[tuple[str, str, str]]) -> tuple[str, ...]:
    """Frame texts, innermost first, in MindSpore's ``path:LINE, C~D/code/`` form."""
    return tuple(f"In file {p}:{ln}, {len(c) - len(c.lstrip())}~{len(c)}/{c}/" for p, ln, c in items)


@dataclass
class _Node:
    """One graph node; an input is ``#seq`` (a node), a parameter name or a constant key."""

    seq: int
    op: str
    full: str
    inputs: list[str]
    shape: Optional[tuple[int, ...]]
    dtype: str
    frames: tuple[str, ...]
    backward: bool
    n_out: int = 1
    file_name: str = ""   # the op name as tensor files spell it (differs from full when renumbered)


class _Graph:
    """Nodes, parameters and constants of one kernel graph, numbered as MindSpore numbers them."""

    def __init__(self, short: bool) -> None:
        self.short = short
        self.nodes: list[_Node] = []
        self.params: dict[str, tuple[tuple[int, ...], str, bool]] = {}  # name -> (shape, dtype, is a Ref)
        self.consts: dict[str, tuple[str, Any, str, bytes]] = {}       # key -> (dtype, value, .ir text, raw)
        self._count: dict[object, int] = {}

    def const(self, dtype: str, value: Any, ir: str, raw: bytes = b"") -> str:
        """Declare constant ``cstN`` (full name ``Default_data-{N-1}``)."""
        key = f"cst{len(self.consts) + 1}"
        self.consts[key] = (dtype, value, ir, raw)
        return key

    def add(self, scope: str, op: str, inputs: Sequence[str], shape: Optional[tuple[int, ...]], dtype: str = "float32",
            frames: Iterable[tuple[str, str, str]] = (), backward: bool = False, n_out: int = 1) -> str:
        """Add a node: ``-opN`` counts per (scope, op) from 2.3 on, per op type with short names."""
        key: object = op if self.short else (scope, op)
        self._count[key] = n = self._count.get(key, -1) + 1
        self.nodes.append(_Node(len(self.nodes) + 1, op, f"{scope}/{op}-op{n}", list(inputs), shape, dtype,
                                _frames(frames), backward, n_out))
        return f"#{len(self.nodes)}"

    def node(self, ref: str) -> _Node:
        """The node a ``#seq`` reference names."""
        return self.nodes[int(ref[1:]) - 1]


def _user_script(layers: Sequence[Layer]) -> tuple[list[str], dict[str, int], str]:
    """The fake user script: its lines, the line of each ``x = self.<cell>(x)``, construct's span."""
    lines = ['"""Training script the made dump claims to come from (tests/dumpmaker.py)."""', "import mindspore as ms",
             "from mindspore import nn", "", "", "class Net(nn.Cell):", "    def __init__(self):",
             "        super().__init__()"]
    for name, i, o, act in layers:
        lines += [f"        self.{name} = nn.Dense({i}, {o})"] + [f"        self.{name}_act = nn.{act}()"] * bool(act)
    lines += ["", "    def construct(self, x):"]
    start, at = len(lines), {}
    for cell in (c for name, _, _, act in layers for c in ((name, f"{name}_act") if act else (name,))):
        lines.append(f"        x = self.{cell}(x)")
        at[cell] = len(lines)
    lines += ["        return x", "", "", "net = Net()", 'loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, '
              'reduction="mean")', "opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)",
              "train_step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)"]
    return lines, at, f"{start}~{len(lines) - 6}"


def _parameters(layers: Sequence[Layer], batch: int, adam: bool) -> dict[str, tuple[tuple[int, ...], str, bool]]:
    """name -> (shape, dtype, is a Ref) of the graph's parameters, in a real graph's order."""
    params: list[tuple[str, tuple[int, ...], str, bool]] = []
    for name, i, o, _ in reversed(layers):
        params += [(f"{name}.bias", (o,), "float32", True), (f"{name}.weight", (o, i), "float32", True)]
    params += [("inputs0", (batch, layers[0][1]), "float32", False), ("inputs1", (batch,), "int32", False),
               ("global_step", (1,), "int32", True), ("learning_rate", (), "float32", True)]
    params += [(n, (), "float32", True) for n in (("beta1_power", "beta2_power") if adam else ("momentum",))]
    for s in ("moment1", "moment2") if adam else ("moments",):
        params += [(f"{s}.{p}", shape, "float32", True) for p, shape, _, _ in params[: 2 * len(layers)]]
    return {n: (shape, dt, ref) for n, shape, dt, ref in params}


def _forward(g: _Graph, layers: Sequence[Layer], batch: int, user: str, at: dict[str, int], span: str,
             consts: tuple[str, str, str, str]) -> tuple[str, list[tuple[Any, ...]], list[str]]:
    """The forward kernels of every Dense and activation, with their stacks: (logits, per layer its facts, loads)."""
    um, f_, t_, i0 = consts
    x, fwd, loads = "inputs0", list[tuple[Any, ...]](), list[str]()
    for name, i, o, act in layers:
        up = [(user, str(at[name]), f"        x = self.{name}(x)"), (user, span, "    def construct(self, x):"),
              (_CELL, "122", "        out = self._backbone(data)")] + _WITH_LOSS
        dense_def = (_DENSE, "803~815", "    def construct(self, x):")
        mm_f = [(_DENSE, "807", "        x = self.matmul(x, self.weight)"), dense_def] + up
        ba_f = [(_DENSE, "809", "            x = self.bias_add(x, self.bias)"), dense_def] + up
        cell = f"{BACKBONE}/{name}-Dense"
        lw = g.add(BACKBONE, "Load", [f"{name}.weight", um], (o, i))
        mm = g.add(cell, "MatMul", [x, lw, f_, t_], (batch, o), frames=mm_f)
        lb = g.add(cell, "Load", [f"{name}.bias", um], (o,))
        y = g.add(cell, "BiasAdd", [mm, lb, i0], (batch, o), frames=ba_f)
        af = f"{SITE}/nn/layer/activation.py"
        act_f = [(af, "1170", f"        return self.{(act or '').lower()}(x)"), (af, "1169~1170", "    def construct("
                 "self, x):"), (user, str(at.get(f"{name}_act", 0)), f"        x = self.{name}_act(x)")] + up[1:]
        if act:
            y = g.add(f"{BACKBONE}/{name}_act-{act}", act, [y], (batch, o), frames=act_f)
        fwd.append((name, i, o, act, x, lw, y, mm_f, ba_f, act_f))
        loads, x = loads + [lb, lw], y
    return x, fwd, loads


def _build(layers: Sequence[Layer], batch: int, adam: bool, dp: bool, mean_grads: bool, ranks: int, short: bool,
           user: str, at: dict[str, int], span: str) -> tuple[_Graph, list[str]]:
    """The training graph of an MLP; also returns the activation-gradient kernels (renumbering targets)."""
    g = _Graph(short)
    um, f_, t_ = (g.const("UMonad", None, "UMonad[U]"), g.const("bool", False, "Bool(0)", b"\x08\x01\x10\x00"),
                  g.const("bool", True, "Bool(1)", b"\x08\x01\x10\x01"))
    i0, one = g.const("int64", 0, "I64(0)", b"\x08\x05\x18\x00"), g.const("int32", [1], "Tensor(shape=[1], "
                                                                          "dtype=Int32, value=[1])")
    mean = g.const("float32", 1 / ranks, f"Tensor(shape=[], dtype=Float32, value={1 / ranks:g})") if dp and mean_grads \
        else ""
    b1, b2, eps = (g.const("float32", v, f"F32({v:g})") for v in (0.9, 0.999, 1e-8)) if adam else ("", "", "")
    g.params = _parameters(layers, batch, adam)
    x, fwd, loads = _forward(g, layers, batch, user, at, span, (um, f_, t_, i0))
    loss = g.add(LOSS, "SparseSoftmaxCrossEntropyWithLogits", [x, "inputs1"], (), frames=_LOSS_F)
    gl, logits = f"Gradients/{LOSS}/Grad_SparseSoftmaxCrossEntropyWithLogits", (batch, layers[-1][2])
    lg = g.add(gl, "SparseSoftmaxCrossEntropyWithLogits", [x, "inputs1"], logits, frames=_LOSS_F, backward=True)
    dy = g.add(gl, "Depend", [lg, loss], logits, frames=_LOSS_F, backward=True)
    us = g.add("Default", "UpdateState", [um, g.add("Default", "MakeTuple", loads, None)], None)
    opt, of = ("Default/optimizer-Adam", f"{SITE}/nn/optim/adam.py") if adam else \
        ("Default/optimizer-Momentum", f"{SITE}/nn/optim/momentum.py")
    opt_outer = [(of, "190~205", '    @jit(backend="ms_backend")')] + _OPT_OUTER
    aa = g.add(opt, "AssignAdd", ["global_step", one, us], (1,), "int32", frames=[
        (of, "198", "        self.assignadd(self.global_step, self.global_step_increase_tensor)")] + opt_outer)
    us = g.add("Default", "UpdateState", [us, aa], None)
    opt_f = [(of, "203~204", "            success = self.hyper_map_reverse(F.partial(_momentum_opt, self.opt, "
              "self.momentum, lr),")] + opt_outer
    applies: list[str] = []

    def step(p: str, grad: str, shape: tuple[int, ...], us: str) -> str:
        if dp:
            grad = g.add(REDUCER, "AllReduce", [grad], shape, frames=_RED_F)
            grad = g.add(REDUCER, "Mul", [grad, mean], shape, frames=_RED_F) if mean else grad
        if adam:
            ins = [p, f"moment1.{p}", f"moment2.{p}", "beta1_power", "beta2_power", "learning_rate", b1, b2, eps, grad]
            applies.append(g.add(opt, "Adam", ins + [us], shape, frames=opt_f, n_out=3))
        else:
            ins = [p, f"moments.{p}", "learning_rate", grad, "momentum", us]
            applies.append(g.add(opt, "ApplyMomentum", ins, shape, frames=opt_f))
        return g.add(opt, "UpdateState", [us, applies[-1]], None)

    # As in real dumps, every backward MatMul and BiasAddGrad sits under the LAST layer's scope.
    gscope, act_grads = f"Gradients/{BACKBONE}/{layers[-1][0]}-Dense", []
    for li in reversed(range(len(layers))):
        name, i, o, act, xin, lw, _, mm_f, ba_f, _ = fwd[li]
        bg = g.add(f"{gscope}/Grad_BiasAdd", "BiasAddGrad", [dy, i0], (o,), frames=ba_f, backward=True)
        us = step(f"{name}.bias", bg, (o,), us)
        wg = g.add(f"{gscope}/Grad_MatMul", "MatMul", [dy, xin, t_, f_], (o, i), frames=mm_f, backward=True)
        us = step(f"{name}.weight", wg, (o, i), us)
        if li:
            dy = g.add(f"{gscope}/Grad_MatMul", "MatMul", [dy, lw, f_, f_], (batch, i), frames=mm_f, backward=True)
            pname, _, _, pact, _, _, py, _, _, pact_f = fwd[li - 1]
            if pact:
                dy = g.add(f"Gradients/{BACKBONE}/{pname}_act-{pact}/Grad_{pact}", _GRAD_OP.get(pact, f"{pact}Grad"),
                           [py, dy], (batch, i), frames=pact_f, backward=True)
                act_grads.append(dy)
    deps = [g.add(opt, "Depend", [t_, a], (), "bool", frames=opt_f) for a in reversed(applies)]
    d0 = g.add("Default", "Depend", [loss, g.add(opt, "MakeTuple", deps, None)], (), frames=_OPT_OUTER)
    g.add("Default", "MakeTuple", [g.add("Default", "Depend", [d0, us], ())], None)   # the graph output
    return g, act_grads or [lg]


def _pb_type(t: Any, shape: Optional[tuple[int, ...]], dtype: str) -> None:
    """Fill a TypeProto with a tensor type; scalars carry no shape, as in real graphs."""
    t.data_type = pb.DT_TENSOR
    t.tensor_type.elem_type = _PB_DTYPE[dtype]
    for d in shape or ():
        t.tensor_type.shape.dim.add().size = d


def _write_pb(g: _Graph, gid: int) -> bytes:
    """The graph as debug_graph.proto's ModelProto."""
    m = pb.ModelProto(ir_version=1, domain="")
    gr = m.graph
    gr.name, gr.root_name = f"kernel_graph{gid}", str(gid)
    for name, (shape, dtype, _) in g.params.items():
        _pb_type(gr.parameters.add(name=name).type, shape, dtype)
    for key, (_, _, _, raw) in g.consts.items():
        gr.const_vals.add(key=key, full_name=f"Default_data-{int(key[3:]) - 1}", **({"value": raw} if raw else {}))
    for n in g.nodes:
        p = gr.node.add(name=str(n.seq), op_type=n.op, scope=n.full.rsplit("/", 1)[0], full_name=n.full)
        for s in n.inputs:
            p.input.add(name=s.lstrip("#"), type=pb.InputProto.DATA_EDGE)
        t = p.output_type
        if n.op == "UpdateState":
            t.data_type = 43   # what MindSpore 2.10 writes for a monad
        elif n.shape is None or n.n_out > 1:
            t.data_type = pb.DT_TUPLE
            for _ in range(n.n_out) if n.shape is not None else n.inputs:
                _pb_type(t.sequence_type.elem_types.add(), n.shape, n.dtype)
        elif n.dtype == "bool" and n.shape == ():
            t.data_type = pb.DT_BOOL
        else:
            _pb_type(t, n.shape, n.dtype)
        if n.frames and n.backward:
            p.source_address = ("      # Corresponding forward node candidate:\n" + f"      #  - {n.frames[0]}\n"
                                + "".join(f"      #    {f}\n" for f in n.frames[1:]))
        elif n.frames:
            p.source_address = "".join(f"      # {f}\n" for f in n.frames)
    out = gr.outputs.add(name=str(g.nodes[-1].seq))
    out.type.data_type = pb.DT_TUPLE
    _pb_type(out.type.sequence_type.elem_types.add(), None, "float32")
    return bytes(m.SerializeToString())


def _write_ir(g: _Graph, gid: int) -> str:
    """The graph as MindSpore's .ir text (frames outermost first there)."""
    pidx, nidx = {name: k + 1 for k, name in enumerate(g.params)}, {n.seq: k for k, n in enumerate(g.nodes)}

    def dims(shape: tuple[int, ...]) -> str:
        return ", ".join(map(str, shape))

    def ptype(name: str) -> str:
        shape, dt, ref = g.params[name]
        if ref:
            return f"<Ref[Tensor[{_MS_DTYPE[dt]}]], ({dims(shape)}), ref_key={name}, is_parameter, is_inplace>"
        return f"<Tensor[{_MS_DTYPE[dt]}], ({dims(shape)})>"

    def ntype(n: _Node) -> str:
        if n.op == "UpdateState":
            return "<UMonad, NoShape>"
        if n.shape is None or n.n_out > 1:
            return f"<Tuple[Tensor[Float32]*{n.n_out if n.shape else len(n.inputs)}], TupleShape(NoShape)>"
        if n.dtype == "bool" and n.shape == ():
            return "<Bool, NoShape>"
        return f"<Tensor[{_MS_DTYPE[n.dtype]}], ({dims(n.shape)})>"

    def arg(s: str, typed: bool) -> str:
        if s.startswith("#"):
            return ntype(g.node(s)) if typed else f"%{nidx[int(s[1:])]}"
        if s in g.consts:
            return f"<{_MS_DTYPE.get(g.consts[s][0], g.consts[s][0])}, NoShape>" if typed else g.consts[s][2]
        return ptype(s) if typed else f"%para{pidx[s]}_{s}"

    out = [f"# IR entry: @kernel_graph{gid}", "# Total subgraphs: 1", "", "# Attrs:", "enable_zero_copy_in_graph: 1",
           "", f"# Total params: {len(g.params)}", "# Params:"]
    for name, (shape, dt, ref) in g.params.items():
        head, vec = f"%para{pidx[name]}_{name}: {ptype(name)}", f"[const vector]{{{dims(shape)}}}>"
        out.append(f"{head}  :  has_default  :  <UnknownxDefaultFormat{vec}  :  IsWeight: true" if ref else
                   f"{head} : [{dims(shape)}]  :  <{_MS_DTYPE[dt]}xDefaultFormat{vec}  :  IsWeight: false")
    out += ["", "Node counting information:", f"Total number of nodes: {len(g.nodes) + len(g.params) + len(g.consts)}",
            f"Total number of cnodes: {len(g.nodes) + 1}", "", "subgraph attr:", "enable_zero_copy_in_graph: 1",
            f"subgraph instance: kernel_graph{gid} : 0x55d0c0ffee00", "", f"subgraph @kernel_graph{gid}() {{"]
    for k, n in enumerate(g.nodes):
        op = n.op if n.op in _PLAIN_IR_OPS else f"PrimFunc_{n.op}"
        out += [f"  %{k}(CNode_{k + 20}) = {op}({', '.join(arg(s, False) for s in n.inputs)}) cnode_attrs: "
                "{checkpoint: Bool(1), is_dynamic_len: Bool(0)}",
                f"      : ({', '.join(arg(s, True) for s in n.inputs)}) -> ({ntype(n)})",
                f"      # Fullname with scope: ({n.full})"]
        out += ["      # Corresponding forward node candidate:"] if n.frames and n.backward else []
        out += [f"      # {f}" for f in reversed(n.frames)]
    last = len(g.nodes) - 1
    out += [f"  Return(%{last})", "      : (<Tuple[Tensor[Float32]], TupleShape(())>)",
            "      # Fullname with scope: (Default/Return-op0)", "}", "# Order:",
            f"#   1: @kernel_graph{gid}:CNode_{last + 21}{{[0]: ValueNode<Primitive> Return, [1]: CNode_{last + 20}}}",
            ""]
    return "\n".join(out)


def _style(version: str) -> tuple[bool, bool, str]:
    """(short op names, dtype field, ms_version) of a version such as "2.10", ">=2.4", "2.3", "2.2", "1.x"."""
    v = version.lstrip(">= ")
    if v.startswith("1"):
        return True, False, "1.10.1"
    major, minor = (int(p) for p in v.split(".")[:2])
    return (major, minor) <= (2, 2), (major, minor) >= (2, 4), f"{major}.{minor}.0"


def _write(path: str, data: bytes | str) -> None:
    """Write a file, creating its directory."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def make_dump(root: str, *, ranks: int = 1, iterations: int = 3,
              layers: Sequence[Layer] = (("fc1", 4, 3, "Sigmoid"), ("fc2", 3, 2, None)), batch: int = 2,
              version: str = "2.10", name_style: Optional[str] = None, dtype_field: Optional[bool] = None,
              optimizer: str = "ApplyMomentum", data_parallel: Optional[bool] = None, values: Optional[ValuesFn] = None,
              write_pb: bool = True, write_ir: bool = True, run_history: Optional[Sequence[int]] = None,
              dumped_iterations: Optional[Sequence[int]] = None, net: str = "Net", graph_id: int = 0, seed: int = 0,
              metadata_on_all_ranks: bool = True, duplicate_timestamps: bool = False, long_names: bool = False,
              renumber_files: bool = False, param_dots: bool = False, user_file: Optional[str] = None,
              mean_gradients: bool = True, stack_paths: Optional[Sequence[str]] = None) -> str:
    """Write the dump of an MLP trained for a few iterations at ``root``; return ``root``."""
    # values(rank, iteration, node, io, slot, default) -> array | None is called for each kernel output of
    # every run iteration (a replacement flows into its consumers' input files and, for gradients, into the
    # weight update) and for each input and Parameter file written. long_names renames files over 255
    # characters (pair it with a long layer name); param_dots keeps the dots of Parameter names in file names;
    # mean_gradients=False leaves out the Mul by 1/ranks after each AllReduce. stack_paths: the user frames
    # of the graphs name these paths instead of the written script, node by node in turn (hostile dumps:
    # "/etc/passwd", "../../x"); nothing is written at those paths.
    root = os.path.abspath(root)
    short, dt_field, ms_version = _style(version)
    short = short if name_style is None else name_style == "short"
    dt_field = dt_field if dtype_field is None else dtype_field
    dp = ranks > 1 if data_parallel is None else data_parallel
    run = sorted(range(iterations) if run_history is None else run_history)
    dumped = sorted(run if dumped_iterations is None else dumped_iterations)
    user = os.path.abspath(user_file or os.path.join(os.path.dirname(root), "train_user.py"))
    script, at, span = _user_script(layers)
    _write(user, "\n".join(script) + "\n")
    g, act_grads = _build(layers, batch, optimizer == "Adam", dp, mean_gradients, ranks, short, user, at, span)
    for n in g.nodes:
        n.file_name = n.full.rsplit("/", 1)[-1] if short else n.full.replace("/", "_")
    for k, n in enumerate(n for n in g.nodes if stack_paths and any(f"In file {user}:" in f for f in n.frames)):
        n.frames = tuple(f.replace(f"In file {user}:", f"In file {stack_paths[k % len(stack_paths)]}:")
                         for f in n.frames)
    if renumber_files:   # the .pb and execution order say -op1 where the files keep -op0 (seen in real dumps)
        g.node(act_grads[0]).full = g.node(act_grads[0]).full[:-1] + "1"
    kernels = [n for n in g.nodes if n.op not in FRAMEWORK_OPS]
    cfg = {"common_dump_settings": {"op_debug_mode": 0, "dump_mode": 0, "path": root, "net_name": net,
                                    "iteration": "all" if dumped == run else "|".join(map(str, dumped)),
                                    "saved_data": "tensor", "input_output": 0, "kernels": [],
                                    "support_device": list(range(8))},
           "e2e_dump_settings": {"enable": True, "trans_flag": True}}
    meta = {".dump_metadata/config.json": json.dumps({"device_target": "CPU", "ms_version": ms_version}, separators=(
        ",", ":")), ".dump_metadata/data_dump.json": json.dumps(cfg, indent=2)}
    every = {f"graphs/ms_output_trace_code_graph_{graph_id}.pb": _write_pb(g, graph_id) if write_pb else None,
             f"graphs/ms_output_trace_code_graph_{graph_id}.ir": _write_ir(g, graph_id) if write_ir else None,
             f"execution_order/ms_execution_order_graph_{graph_id}.csv":
                 "NodeExecutionOrder-FullNameWithScope\n" + "".join(n.full + "\n" for n in kernels),
             f"execution_order/ms_global_execution_order_graph_{graph_id}.csv": "".join(f"{i}\n" for i in run)}
    for r in range(ranks):
        os.makedirs(f"{root}/rank_{r}", exist_ok=True)
        for rel, data in {**(meta if r == 0 or metadata_on_all_ranks else {}), **every}.items():
            if data is not None:
                _write(f"{root}/rank_{r}/{rel}", data)
    for it, r, pos, files in _simulate(g, kernels, ranks, sorted(set(run) | set(dumped)), set(dumped), values, seed,
                                       param_dots):
        _write_iteration(f"{root}/rank_{r}/{net}/{graph_id}/{it}", files, TS_BASE + TS_STEP * pos, r, it, values,
                         dt_field, duplicate_timestamps, long_names)
    return root


def _simulate(g: _Graph, kernels: list[_Node], ranks: int, iters: list[int], dumped: set[int],
              values: Optional[ValuesFn], seed: int, param_dots: bool) -> Iterable[tuple[int, int, int, list[File]]]:
    """Run the iterations on random data; yield (iteration, rank, position, files) of the dumped ones."""
    init = {"learning_rate": 0.01, "momentum": 0.9, "beta1_power": 0.9, "beta2_power": 0.999}

    def start(k: int, name: str, shape: tuple[int, ...], dt: str) -> np.ndarray:
        if name in init or name.startswith(("moment", "global")):
            return np.full(shape, init.get(name, 0), dt)
        return (np.random.default_rng([seed, 7, k]).standard_normal(shape) * 0.5).astype(dt)

    # every rank starts from the same weights, as data-parallel training does
    st = [{n: start(k, n, sh, dt) for k, (n, (sh, dt, ref)) in enumerate(g.params.items()) if ref}
          for _ in range(ranks)]
    consts = {k: (np.array(v, dt) if dt != "UMonad" else None) for k, (dt, v, _, _) in g.consts.items()}
    n_cls = next(iter(g.params.values()))[0][0]   # classes: the size of the last layer's bias, the first param
    for pos, it in enumerate(iters):
        data = []
        for r in range(ranks):
            rng = np.random.default_rng([seed, 1, r, it])
            data.append({"inputs0": rng.standard_normal(g.params["inputs0"][0]).astype(np.float32),
                         "inputs1": rng.integers(0, n_cls, g.params["inputs1"][0]).astype(np.int32)})
        outs: dict[tuple[int, int], list[Any]] = {}

        def val(r: int, s: str) -> Any:
            if s.startswith("#"):
                return outs[r, int(s[1:])][0]
            return consts[s] if s in consts else st[r][s] if s in st[r] else data[r][s]

        for n in g.nodes:
            for r in range(ranks):
                ins, s = [val(r, i) for i in n.inputs], st[r]
                o: list[Any]
                if n.op in ("Load", "Depend"):
                    o = [np.array(ins[0], copy=True)]     # a Load reads the weight before this step's update
                elif n.op in FRAMEWORK_OPS:
                    o = [None]
                elif n.op == "AllReduce":
                    o = [sum(outs[q, int(n.inputs[0][1:])][0] for q in range(ranks)).astype(ins[0].dtype)]
                elif n.op == "Mul":
                    o = [(ins[0] * ins[1]).astype(ins[0].dtype)]
                elif n.op == "AssignAdd":
                    s["global_step"] = (ins[0] + ins[1]).astype(np.int32)
                    o = [s["global_step"].copy()]
                elif n.op == "ApplyMomentum":   # in place: input 0, output 0 and the Parameter agree
                    w, m, lr, grad, mom = ins[:5]
                    s[n.inputs[1]] = (mom * m + grad).astype(np.float32)
                    s[n.inputs[0]] = (w - lr * s[n.inputs[1]]).astype(np.float32)
                    o = [s[n.inputs[0]].copy()]
                elif n.op == "Adam":
                    w, m, v, _, _, lr, b1, b2, eps, grad = ins[:10]
                    m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad * grad
                    s[n.inputs[1]], s[n.inputs[2]] = m.astype(np.float32), v.astype(np.float32)
                    s[n.inputs[0]] = (w - lr * m / (np.sqrt(v) + eps)).astype(np.float32)
                    o = [s[i].copy() for i in n.inputs[:3]]
                else:
                    a = np.random.default_rng([seed, 2, r, it, n.seq]).standard_normal(n.shape or ())
                    o = [(np.abs(a) + 0.1 if n.shape == () else a * 0.5).astype(n.dtype)]
                if n.op not in FRAMEWORK_OPS and values is not None:
                    o = [x if (y := values(r, it, n.full, "output", k, x)) is None else np.asarray(y)
                         for k, x in enumerate(o)]
                outs[r, n.seq] = o
        for r in range(ranks) if it in dumped else ():
            groups = [[(n.op, n.full, n.file_name, "input", k, val(r, i)) for k, i in enumerate(n.inputs)
                       if consts.get(i, 0) is not None and not (i.startswith("#") and g.node(i).op == "UpdateState")]
                      + [(n.op, n.full, n.file_name, "output", k, x) for k, x in enumerate(outs[r, n.seq])]
                      for n in kernels]
            order = [int(k) for k in np.random.default_rng([seed, 3, r, it]).permutation(len(groups))]
            if order == sorted(order) and len(order) > 1:
                order[:2] = order[1::-1]   # timestamps never follow the execution order
            yield it, r, pos, [f for k in order for f in groups[k]] + [
                ("Parameter", p, p if param_dots else p.replace(".", "_"), "output", 0, val(r, p)) for p in g.params]


def _write_iteration(d: str, files: list[File], ts0: int, rank: int, it: int, values: Optional[ValuesFn],
                     dt_field: bool, duplicate: bool, long_names: bool) -> None:
    """Write one iteration dir; names over 255 characters become numbers listed in mapping.csv."""
    os.makedirs(d, exist_ok=True)
    mapping: list[str] = []
    for k, (op, full, fname, io, slot, arr) in enumerate(files):
        arr = np.asarray(arr)
        if values is not None and (io == "input" or op == "Parameter"):
            arr = arr if (new := values(rank, it, full, io, slot, arr)) is None else np.asarray(new)
        copies = [(ts0 + 37 * k + 20, arr)]
        if duplicate and k % 4 == 0:   # an older, stale copy: the newest timestamp must win
            copies.append((ts0 + 37 * k + 9, ~arr if arr.dtype == bool else np.full(arr.shape, STALE_VALUE, arr.dtype)))
        for ts, a in copies:
            dt = f".{_MS_DTYPE.get(a.dtype.name, a.dtype.name)}" if dt_field else ""
            name = f"{op}.{fname}.0.0.{ts}.{io}.{slot}.DefaultFormat{dt}.npy"
            if len(name) > 255:
                # Assumed layout (MindSpore's handling of over-long names): the whole file name becomes
                # "{N}.npy" and "N,{original file name}" is appended to mapping.csv beside it (no header).
                if not long_names:
                    raise ValueError(f"file name over 255 characters ({name[:60]}...): pass long_names=True")
                mapping.append(f"{len(mapping)},{name}")
                name = f"{len(mapping) - 1}.npy"
            np.save(os.path.join(d, name), a, allow_pickle=False)
    if mapping:
        _write(os.path.join(d, "mapping.csv"), "\n".join(mapping) + "\n")
