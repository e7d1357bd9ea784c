"""The ``"tdbg"`` torch.compile backend: Inductor, plus a second build of each graph that also returns
the statistics of every operator's output, run at the iterations the recorder records at "ops".

``torch.compile(model, backend="tdbg")`` (or ``backend=tdbg_backend``, ``model.compile(backend="tdbg")``)
compiles each forward, backward and inference graph twice with Inductor: as Inductor would (run at
every other iteration: the user's program, unchanged) and *tapped*: the same
graph where operators' floating-point results also go to ``tdbg::stats_row22`` (one extern call
on the buffer the compiled kernels wrote: the recorder's one-pass statistics), the rows stacked into
one extra output. A graph's operators are the decomposed ATen operators Inductor compiles (LayerNorm
as ``var_mean``, ``rsqrt``, ``mul`` ...); each keeps its source line (``stack_trace``) and module
(``nn_module_stack``; a backward operator that of the forward operator it derives from). Nothing here
knows the recorder: it is told who takes the statistics through :data:`TAKER`.
"""
from __future__ import annotations

import functools
import operator
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

# (the recorder taking graph statistics now, or None): set by the recorder at its "ops" iterations
TAKER: list[Any] = [None]
# Ops whose output is a view of an input or a pure data movement: their values are their input's
_ROUTING = frozenset({"view", "_unsafe_view", "reshape", "permute", "expand", "t", "transpose", "squeeze",
                      "unsqueeze", "slice", "select", "alias", "as_strided", "clone", "split", "split_with_sizes",
                      "unbind", "detach", "_to_copy", "convert_element_type", "copy", "full", "scalar_tensor",
                      "iota", "empty", "zeros", "ones"})
_TAPPED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)   # what the statistics read
FAILED = -1.0        # the count column of a row whose statistics could not be computed
SHAPE_DIMS = 8       # sizes a statistics row carries (a tensor of higher rank keeps its symbolic ones unknown)
# Operators whose results Inductor stores whatever consumes them: library calls and reductions
_STORED = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "_int_mm", "convolution", "convolution_backward",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
    "_flash_attention_forward", "_efficient_attention_forward",
    "var_mean", "sum", "mean", "amax", "amin", "prod", "linalg_vector_norm"})
_LIB = re.compile(r"\[(\d+)\]|\._modules\[['\"]([^'\"]+)['\"]\]|\[['\"]([^'\"]+)['\"]\]")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n(?:\s*(.*))?')


@dataclass
class Tap:
    """One operator of a compiled graph whose output statistics the tapped build returns."""

    node: str                       # the FX node's name (unique in its graph)
    op: str                         # ATen overload packet ("addmm", "var_mean")
    slot: int                       # the output of a multi-output operator
    module: str                     # dotted module path ("" outside any module)
    chain: tuple[tuple[str, str], ...]   # (module path, class name) outermost first
    stack: str                      # the FX node's stack_trace
    inputs: tuple[tuple[str, int], ...]  # per input: ("node", slot) of a tapped producer, ("#k", -1) placeholder k
    dtype: str
    shape: tuple[int | None, ...]   # None: a dimension the graph leaves symbolic (its row holds it)


@dataclass
class TappedGraph:
    """What a tapped build's extra output holds, row by row, and how the graph's outputs map to taps."""

    taps: list[Tap]
    outputs: list[tuple[str, int] | None]   # per graph output: its tapped producer (or None)
    backward: bool
    every: bool                     # every operator tapped (not only what the program stores)


@dataclass
class _Compile:
    """One torch.compile graph's forward and backward builds: the forward's modules by sequence number."""

    every: bool = False         # tap every operator, not only those whose result the program stores
    modules: dict[int, tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=dict)


def tdbg_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **options: Any) -> Any:
    """torch.compile backend: Inductor, and at the recorder's "ops" iterations a tapped build.
    ``options={"operators": "stored"}`` (default) taps what the compiled program stores anyway,
    ``"all"`` every operator (its numbers can then differ in the last bits: see :func:`_tap_of`)."""
    from torch._inductor.compile_fx import compile_fx
    which = options.pop("operators", "stored")
    if which not in ("stored", "all") or options:
        raise ValueError(f"tdbg backend: options are {{'operators': 'stored' | 'all'}}, got "
                         f"{dict(options, operators=which)!r}")
    # the AOT cache would hand back a build without its tapped twin: off for this backend's graphs
    with torch._functorch.config.patch(enable_autograd_cache=False):
        return compile_fx(gm, example_inputs,
                          inner_compile=functools.partial(_inner, state=_Compile(every=which == "all")))


def _inner(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], state: _Compile, **kwargs: Any) -> Any:
    from torch._inductor.compile_fx import compile_fx_inner
    backward = bool(kwargs.get("is_backward"))
    tapped_gm = info = None
    if getattr(kwargs.get("cudagraphs"), "value", kwargs.get("cudagraphs")):
        # a CUDA graph replays recorded kernels: the statistics operator's host work cannot be in one
        _warn_once("graphs run as CUDA graphs (mode=\"reduce-overhead\") are not tapped: their operators "
                   "are not recorded")
        return compile_fx_inner(gm, example_inputs, **kwargs)
    try:
        tapped_gm, info = tap_graph(gm, example_inputs, backward, state)
    except Exception as exc:     # never stop the compilation: the graph runs as Inductor builds it
        _warn_once(f"this graph's operators are not recorded: {type(exc).__name__}: {exc}")
    plain = compile_fx_inner(gm, example_inputs, **kwargs)
    if tapped_gm is None or not info.taps:
        return plain
    try:
        tapped = _second_build(tapped_gm, example_inputs, kwargs)
    except Exception as exc:
        _warn_once(f"this graph's operators are not recorded: {type(exc).__name__}: {exc}")
        return plain
    return _switch_class()(plain, tapped, info)


def _second_build(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """Inductor's build of the tapped graph; the output strides it reports to AOT (those of the plain
    build, which AOT runs the outputs through) are left as the plain build set them."""
    from torch._inductor.compile_fx import compile_fx_inner
    context = torch._guards.TracingContext.try_get()
    kept = None
    if context is not None and context.output_strides is not None:
        kept = list(context.output_strides)
        context.output_strides.clear()
    try:
        return compile_fx_inner(gm, example_inputs, **kwargs)
    finally:
        if kept is not None:
            context.output_strides[:] = kept


_warned: set[str] = set()


def _warn_once(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        warnings.warn(f"tdbg backend: {text}", RuntimeWarning, stacklevel=3)


@functools.cache
def _switch_class() -> type:
    """:class:`_Switch`'s class, made on first use: Inductor is imported only by code that compiles."""
    from torch._inductor.output_code import OutputCode

    class _Switch(OutputCode):      # type: ignore[misc]
        """Runs the plain build, or the tapped one while a recorder takes graph statistics."""

        def __init__(self, plain: Any, tapped: Any, info: TappedGraph) -> None:
            self.plain, self.tapped, self.info = plain, tapped, info
            # an instance attribute: AOT's wrappers copy the instance's __dict__, not the class's
            self._boxed_call = True

        def __call__(self, inputs: list[Any]) -> Any:
            taker = TAKER[0]
            if taker is None or not taker.takes_graph():
                return self.plain(inputs)
            held = list(inputs)           # the boxed call empties the list: the taker links placeholders
            outs = list(self.tapped(inputs))
            rows = outs.pop()
            taker.graph_ran(self.info, held, outs, rows)     # guarded inside: never raises
            return outs

        def post_compile(self, *args: Any, **kwargs: Any) -> None:
            pass        # both builds were finished by compile_fx_inner

        def prepare_for_serialization(self) -> None:
            raise NotImplementedError("tdbg backend builds are not cached")

        def set_triton_bundle(self, triton_bundle: Any) -> None:
            self.plain.set_triton_bundle(triton_bundle)

    return _Switch


def tap_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], backward: bool,
              state: _Compile) -> tuple[torch.fx.GraphModule, TappedGraph]:
    """A copy of ``gm`` that also returns one float64 row of statistics per tapped output, stacked."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    out_value = graph.graph_copy(gm.graph, env)
    placeholders = {n: k for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    made: dict[torch.fx.Node, tuple[Ref, ...]] = {}
    kept = {a for a in _outputs(gm) if isinstance(a, torch.fx.Node)}
    taps: list[Tap] = []
    rows: list[torch.fx.Node] = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        made[n] = _maker(n, made, placeholders)
        tap = _tap_of(n, made, placeholders, backward, state, kept)
        if tap is not None:
            taps.append(tap)
            made[n] = ((tap.node, tap.slot),)
            with graph.inserting_before(env[n].next):    # right after it: its buffer need not live on
                rows.append(_emit_row(graph, env[n]))
    outputs = [made[a][0] if isinstance(a, torch.fx.Node) and len(made.get(a, ())) == 1 else None
               for a in _outputs(gm)]
    stacked = graph.call_function(torch.ops.aten.view.default, (
        graph.call_function(torch.ops.aten.cat.default, (rows,)), [len(rows), -1])) if rows else None
    new_out = graph.output((*out_value, stacked) if rows else out_value)
    # the output's metadata (which outputs the user sees ...), its strides recorded anew below
    new_out.meta = {k: v for k, v in _output_node(gm).meta.items() if k != "original_output_strides"}
    tapped = torch.fx.GraphModule(gm, graph)
    _propagate(tapped, example_inputs)
    from torch._inductor.compile_fx import record_original_output_strides
    record_original_output_strides(tapped)
    return tapped, TappedGraph(taps, outputs, backward, state.every)


def _output_node(gm: torch.fx.GraphModule) -> torch.fx.Node:
    return next(n for n in reversed(gm.graph.nodes) if n.op == "output")


def _outputs(gm: torch.fx.GraphModule) -> list[Any]:
    """The graph's output values, in order."""
    return list(_output_node(gm).args[0])


Ref = tuple[str, int]      # (tapped FX node, output slot), or ("#k", -1): the graph's k-th input


def _maker(n: torch.fx.Node, made: dict[torch.fx.Node, tuple[Ref, ...]],
           placeholders: dict[torch.fx.Node, int]) -> tuple[Ref, ...]:
    """What the value of an untapped node is made from: its input's makers (a view, a getitem: the
    first input's only; a computation left untapped: every input's)."""
    if n.target is operator.getitem and isinstance(n.args[0], torch.fx.Node):
        return made.get(n.args[0], ())
    op = getattr(n.target, "__name__", str(n.target)).split(".")[0]
    args = [x for a in n.args for x in (a if isinstance(a, (list, tuple)) else (a,)) if isinstance(x, torch.fx.Node)]
    refs: list[Ref] = []
    for x in args[:1] if op in _ROUTING else args:
        for r in ((("#%d" % placeholders[x], -1),) if x in placeholders else made.get(x, ())):
            if r not in refs:
                refs.append(r)
    return tuple(refs)


def _tap_of(n: torch.fx.Node, made: dict[torch.fx.Node, Any], placeholders: dict[torch.fx.Node, int],
            backward: bool, state: _Compile, kept: set[torch.fx.Node]) -> Tap | None:
    """The tap of an operator's floating-point output (None: a routing op, no float tensor). Unless
    ``state.every``, only of a result the compiled program stores anyway: an operator Inductor runs
    as a library call or a reduction (:data:`_STORED`), or a graph output (``kept``: returned, saved
    for backward). A result Inductor keeps inside a fused kernel (an embedding added to a position
    embedding and normalised ...), stored for its statistics, cuts that kernel there, and the kernels on
    either side may then round differently: the training's last bits change."""
    val = n.meta.get("val")
    target, slot, op = n, 0, getattr(n.target, "__name__", str(n.target)).split(".")[0]
    if n.target is operator.getitem:
        parent = n.args[0]
        if not isinstance(parent, torch.fx.Node) or not isinstance(n.args[1], int) or \
                not isinstance(parent.meta.get("val"), (tuple, list)):
            return None
        target, slot, op = parent, n.args[1], getattr(parent.target, "__name__", str(parent.target)).split(".")[0]
    if op in _ROUTING or not isinstance(val, torch.Tensor) or val.dtype not in _TAPPED_DTYPES:
        return None
    if not (state.every or op in _STORED or n in kept):
        return None
    module, chain = _module_of(target, backward, state)
    ins = made.get(target, ())      # set for ``n`` by the caller before this call
    return Tap(target.name, op, slot, module, chain, target.meta.get("stack_trace") or "", ins,
               str(val.dtype).replace("torch.", ""),
               # a symbolic size is never made an int here: that would add a guard (a recompilation)
               tuple(d if type(d) is int else None for d in val.shape))


def _module_of(n: torch.fx.Node, backward: bool, state: _Compile) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(module path, chain) of a node: from its nn_module_stack, or in backward that of the forward
    operator with its sequence number."""
    stack = n.meta.get("nn_module_stack")
    seq = n.meta.get("seq_nr")
    if stack:
        chain = tuple((_clean_path(path), getattr(cls, "__name__", str(cls).rsplit(".", 1)[-1].strip("'>")))
                      for path, cls in stack.values())
        if not backward and isinstance(seq, int):
            state.modules.setdefault(seq, (chain[-1][0], chain))
        return chain[-1][0], chain
    if isinstance(seq, int) and seq in state.modules:
        return state.modules[seq]
    return "", ()


def _clean_path(path: str) -> str:
    """``transformer.h.0.attn`` for Dynamo's ``L['self'].transformer.h[0].attn`` (or
    ``L['args'][0].transformer...`` when the model's forward is wrapped and takes ``self`` positionally)."""
    if path.startswith(("L[", "G[")):
        end = path.find("]")
        path = path[end + 1:]
        lead = re.match(r"\[\d+\]", path)
        if lead:
            path = path[lead.end():]
    path = _LIB.sub(lambda m: "." + (m.group(1) or m.group(2) or m.group(3)), path)
    return path.lstrip(".")


def parse_stack(text: str) -> list[tuple[str, int, str]]:
    """(file, line, code) of each frame of an FX ``stack_trace``, innermost first."""
    frames = [(m.group(1), int(m.group(2)), (m.group(4) or "").strip()) for m in _FRAME.finditer(text)]
    return frames[::-1]


def _emit_row(graph: torch.fx.Graph, x: torch.fx.Node) -> torch.fx.Node:
    """A call of ``tdbg::stats_row22`` on ``x``: one node (Inductor runs it as an extern kernel on the
    buffer its kernels wrote), so the graph compiles about as fast as the untapped one."""
    return graph.call_function(_stats_op(), (x,))


@functools.cache
def _stats_op() -> Any:
    """The operator ``tdbg::stats_row22(Tensor x) -> Tensor``: debugger.torch.devstats' statistics of ``x``
    (its first ``NCOLS`` columns, float64, on ``x``'s device), then ``x``'s rank and its first
    :data:`SHAPE_DIMS` sizes (a graph compiled for dynamic shapes knows them only when it runs)."""
    from ..stats.core import STAT_NAMES
    from .devstats import NCOLS, stats_row

    # the row's width in the name: Inductor's on-disk cache keys compiled code by the operator's name,
    # and code compiled for another width would be reused as it is
    name = f"stats_row{NCOLS + 1 + SHAPE_DIMS}"

    @torch.library.custom_op(f"tdbg::{name}", mutates_args=())
    def row(x: torch.Tensor) -> torch.Tensor:
        dims = [float(x.dim())] + [float(d) for d in x.shape[:SHAPE_DIMS]]
        dims += [-1.0] * (SHAPE_DIMS + 1 - len(dims))
        try:
            got = stats_row(x)
        except Exception:       # never stop the training: a count of -1 tells the recorder (FAILED)
            got = {"count": FAILED, **{k: None for k in STAT_NAMES[1:]}}
        if isinstance(got, dict):        # the CPU's one-pass kernel gives the numbers at once
            return torch.tensor([float("nan") if v is None else v for v in got.values()] + dims, dtype=torch.float64)
        return torch.cat([got, torch.tensor(dims, dtype=torch.float64, device=got.device)])

    @row.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty((NCOLS + 1 + SHAPE_DIMS,), dtype=torch.float64)

    return getattr(torch.ops.tdbg, name).default


def _propagate(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
    """Fill in the new nodes' ``val`` metadata (Inductor's lowering reads it) with fake tensors."""
    from torch._guards import detect_fake_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    mode = detect_fake_mode(example_inputs)
    FakeTensorProp(gm, mode=mode).propagate_dont_convert_inputs(*example_inputs)
