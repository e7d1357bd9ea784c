"""One iteration's graph, built from the ATen operators a TorchDispatchMode sees.

Every operator call becomes a node ``{scope}/{op}-{k}`` (k counts the op type within its scope, so
equal iterations give equal names). An input's edge comes from the node that last wrote the tensor
(tracked per view and per storage, newest wins, with weak references so reused memory is not
mistaken for a dead tensor); a tensor no operator of the iteration wrote is a *leaf*: a parameter,
buffer or optimizer state (named by the model and the optimizer) or else a data input.
Operators over lists of tensors (``_foreach_*``, fused optimizers) become one node per element.
"""
from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterator

import numpy as np
import torch

from ..formats.records import Kind, NodeRecord, OutputType, StackFrame

# Ops whose output is their input's value (followed when tracing a value back to its producer).
PASS_THROUGH = frozenset({"detach", "alias", "clone", "lift_fresh", "lift_fresh_copy", "_to_copy"})
# Ops whose output is the very view of their input's memory (same bits, same version counter).
ALIASES = frozenset({"detach", "alias"})
# Ops whose output is their input's value cut off from autograd (Tensor.detach(), what torch issues for it).
DETACHES = frozenset({"detach", "detach_"})
# Ops whose value their arguments fix (a shape, a fill value), never the values of the tensors they take (a
# ``*_like``'s template, ``new_*``'s self): the code's own constants, such as a GAN's ``torch.zeros_like(d_out)``
# labels, which are all zero on purpose.
FIXED_VALUE = frozenset({"zeros", "ones", "full", "scalar_tensor", "arange", "linspace", "logspace", "eye",
                         "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full"})
# Ops whose outputs are uninitialised memory: never dumped (their bits mean nothing, NaN included).
UNINITIALISED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"})
# In-place ops that overwrite their destination whatever it held: its old value is no data input
# (the edge is "control"), so e.g. a gradient copied out of an all-reduced bucket is rank-invariant.
# The in-place random fills (nn.init's uniform_, normal_ ...) are such writes too: a layer made inside a
# recorded iteration fills memory torch.empty left holding whatever bytes it had, NaN patterns included.
OVERWRITE = frozenset({"copy_", "fill_", "zero_", "_foreach_copy_", "_foreach_zero_", "set_", "uniform_",
                       "normal_", "random_", "bernoulli_", "exponential_", "geometric_", "cauchy_", "log_normal_"})
COLLECTIVE_WORDS = ("allreduce", "all_reduce", "allgather", "all_gather", "broadcast", "reduce_scatter",
                    "alltoall", "all_to_all")
PER_RANK_WORDS = ("reduce_scatter", "alltoall", "all_to_all", "send", "recv", "scatter", "gather_", "barrier")
# every rank of the group gets the same result (c10d's allgather_ and _allgather_base_ also contain "gather_")
ALL_GATHER_WORDS = ("allgather", "all_gather")
GLOBAL_SCOPE = "global"
BACKWARD_SCOPE = "backward"
CANDIDATE_HEADER = "Corresponding forward node candidate:"
# The recorder's own tensor calls (detach, copies, device statistics) skip every dispatch mode, its
# own included: each would otherwise make a round trip through Python (about 5 us, a thousand times
# an iteration). The recorder's ``_busy`` still guards the paths this does not cover.
OWN_OPS = torch._C._DisableTorchDispatch
# dtypes numpy holds, and the dtype a statistics capture of each is stored as (bfloat16 as float32)
NUMPY_DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                          torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128})
STATS_DTYPE = {**{d: str(d).replace("torch.", "") for d in NUMPY_DTYPES}, torch.bfloat16: "float32"}


@dataclass
class Leaf:
    """A tensor the iteration reads without any operator having written it."""

    name: str
    kind: str                     # weight | optimizer_state | other | input | gradient
    param: str | None
    shape: tuple[int, ...] | None = None   # the leaf's own shape (it may first be read through a view)


@dataclass
class Captured:
    """One tensor to dump: values on the host or a statistics row on the device."""

    node: str
    op_type: str
    io: str
    slot: int
    values: Any = None            # numpy array (values mode)
    stats: Any = None             # torch row (statistics mode)
    host: Any = None              # numpy copy for an exact digest (statistics mode)
    dtype: str = ""
    shape: tuple[int, ...] = ()
    extra: dict[str, Any] | None = None   # statistics beyond STAT_NAMES (debugger.stats.EXTRA_STAT_NAMES)


@dataclass
class IterationGraph:
    """What one iteration ran, in execution order."""

    nodes: list[NodeRecord] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    counters: dict[tuple[str, str], int] = field(default_factory=dict)
    by_view: dict[tuple[Any, ...], tuple[int, str, Any, int]] = field(default_factory=dict)
    by_storage: dict[int, tuple[int, str, Any, int]] = field(default_factory=dict)
    seq: int = 0
    leaves: dict[str, NodeRecord] = field(default_factory=dict)
    inputs_seen: dict[int, str] = field(default_factory=dict)
    input_count: int = 0
    captured: list[Captured] = field(default_factory=list)
    invariant: set[str] = field(default_factory=set)   # nodes made only from weights, state, collectives
    losses: list[str] = field(default_factory=list)
    loss_slots: dict[str, set[int]] = field(default_factory=dict)   # the output(s) backward() started from
    pending_tags: list[tuple[Any, str]] = field(default_factory=list)
    value_of: dict[str, str] = field(default_factory=dict)      # routing node -> the node whose value it passes
    info: dict[str, tuple[str, tuple[StackFrame, ...], str]] = field(default_factory=dict)   # forward node -> (scope, source, module)
    # (node, slot) -> (version, view, capture)
    made: dict[tuple[str, int], tuple[int | None, tuple[Any, ...], Captured]] = field(default_factory=dict)
    constants: set[str] = field(default_factory=set)        # forward nodes made from no data, weight or state
    step_ops: list[Any] = field(default_factory=list)       # optstate.StepOp of the optimizer step running
    step_first: int = 0                                      # index in ``nodes`` of its first operator
    # storages an uninitialised allocation made, not wholly written yet -> the node that allocated them
    unset: dict[int, str] = field(default_factory=dict)

    def fresh_name(self, scope: str, op: str) -> str:
        """``scope/op-k`` with k the next number of ``op`` in ``scope``."""
        k = self.counters.get((scope, op), 0)
        self.counters[(scope, op)] = k + 1
        return f"{scope}/{op}-{k}" if scope else f"{op}-{k}"

    def once_name(self, name: str) -> str:
        """``name`` the first time in this iteration, then ``name-1``, ``name-2`` ... (a parameter's
        gradient when one iteration holds several optimizer steps)."""
        k = self.counters.get(("", name), 0)
        self.counters[("", name)] = k + 1
        return f"{name}-{k}" if k else name


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def dtype_name(dtype: torch.dtype) -> str:
    """``float32`` for ``torch.float32``."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def storage_ptr(t: torch.Tensor) -> int:
    """The address of the tensor's storage (0 when it has none)."""
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0


class _Exported:
    """A CPU tensor as numpy's from_dlpack asks for it, without Tensor.__dlpack__'s checks (3x its cost)."""

    __slots__ = ("t",)

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    def __dlpack__(self, **kwargs: Any) -> Any:
        return _TO_DLPACK(self.t)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)       # kDLCPU


_TO_DLPACK = getattr(torch._C, "_to_dlpack_versioned", None)


def host_view(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor's memory that leaves its storage as it was: ``Tensor.numpy()`` marks
    the storage unresizable for good, and FSDP's free_storage (or an ``out=`` resize) would then fail."""
    if _TO_DLPACK is not None:
        return np.from_dlpack(_Exported(t))
    return np.from_dlpack(t.detach() if t.requires_grad else t)


def view_key(t: torch.Tensor, ptr: int | None = None) -> tuple[Any, ...]:
    """Storage address (``ptr`` when known), offset, shape, strides and dtype: equal for the same view
    of the same memory."""
    return (storage_ptr(t) if ptr is None else ptr, t.storage_offset(), t.shape, t.stride(), t.dtype)


_FUNCTORCH = torch._C._functorch


def unwrapped(t: torch.Tensor) -> torch.Tensor:
    """The value a torch.func transform's wrapper holds (``torch.func.grad``'s, nested ones too), the tensor
    itself when it is none: a module called inside ``grad(functional_call(...))`` is handed wrappers, which
    have no storage. A ``vmap`` batch (another shape) stays wrapped, and is no plain tensor."""
    while _FUNCTORCH.is_functorch_wrapped_tensor(t) and not _FUNCTORCH.is_batchedtensor(t):
        t = _FUNCTORCH.get_unwrapped(t)
    return t


def outside_transforms() -> ContextManager[Any]:
    """Where the recorder's own tensor work runs inside a torch.func transform (module hooks of a model called
    by ``grad(functional_call(...))``): outside it, so its operators on the unwrapped values make plain
    tensors again, not the transform's wrappers (which have no storage to read)."""
    if _FUNCTORCH.peek_interpreter_stack() is None:
        return contextlib.nullcontext()
    from torch._functorch.pyfunctorch import temporarily_clear_interpreter_stack
    return temporarily_clear_interpreter_stack()


def local(t: Any) -> Any:
    """A DTensor's shard on this rank (FSDP2's and tensor parallelism's parameters, their gradients,
    state and activations); any other value as it is. The recorder works on ranks' own tensors: a
    shard's place in the logical tensor is in the rank's layout (debugger/torch/layouts.py). A torch.func
    transform's wrapper: the value it holds (unwrapped)."""
    if type(t) is torch.Tensor or type(t) is torch.nn.Parameter:
        return unwrapped(t)
    inner = getattr(t, "_local_tensor", None)
    return inner if isinstance(inner, torch.Tensor) else t


_WRAPPER_PARTS = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")


def clean_name(name: str) -> str:
    """A parameter's or module's path as the user's model names it: without the parts FSDP1,
    activation checkpointing and torch.compile insert (``_fsdp_wrapped_module.layers.0`` -> ``layers.0``)."""
    if "_mod" not in name:
        return name
    for part in _WRAPPER_PARTS:
        name = name.replace(part, "")
    return name.removesuffix("._fsdp_wrapped_module").removesuffix("._checkpoint_wrapped_module") \
        .removesuffix("._orig_mod")


def class_name(module: Any) -> str:
    """The class name of a module as the user wrote it (FSDP2 makes ``FSDPBlock`` out of ``Block``)."""
    cls = type(module)
    name = cls.__name__
    if name.startswith("FSDP"):
        for base in cls.__mro__[1:]:
            if name == "FSDP" + base.__name__:
                return base.__name__
    return name


def reuse_key(t: torch.Tensor, writes: dict[int, int]) -> tuple[Any, ...]:
    """Equal while a leaf holds the same bits: its memory, view and version counter, and the in-place
    writes seen to it (``writes``, by storage). A DTensor's own counter is taken: an update made through
    the DTensor does not bump its shard's."""
    inner = local(t)
    ptr = storage_ptr(inner)
    return (ptr, inner.storage_offset(), tuple(inner.shape), inner.stride(), inner.dtype, t._version,
            writes.get(ptr, 0))


def is_plain(t: Any) -> bool:
    """A dense tensor with real memory (not sparse, meta or a tensor subclass)."""
    return (type(t) is torch.Tensor or type(t) is torch.nn.Parameter) and t.layout == torch.strided \
        and not t.is_meta and t.device.type != "meta" and not _FUNCTORCH.is_functorch_wrapped_tensor(t)


def version(t: torch.Tensor) -> int | None:
    """The tensor's version counter (bumped by every in-place write); None for an inference tensor,
    which has none."""
    return None if t.is_inference() else t._version


def is_dense(t: torch.Tensor) -> bool:
    """Whether ``t``'s elements fill ``numel`` consecutive memory slots, in some order (no gap, no overlap)."""
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride()), key=lambda p: p[1]):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def covers_storage(t: torch.Tensor) -> bool:
    """Whether ``t`` spans every byte of its storage (a write to it leaves nothing of the old content)."""
    try:
        return t.storage_offset() == 0 and t.is_contiguous() and \
            t.numel() * t.element_size() == t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return False


def flat_tensors(x: Any) -> Iterator[torch.Tensor]:
    """Tensors in a (nested) return value, in order."""
    if isinstance(x, torch.Tensor):
        yield local(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from flat_tensors(v)


# Per operator, read once from its schema (an iteration calls the same few dozen operators hundreds
# of times): (position, name, written in place, an out= argument) of every argument.
_ARGUMENTS: dict[Any, tuple[tuple[int, str, bool, bool], ...]] = {}
_HINTS: dict[Any, tuple[str, bool, bool, bool]] = {}


def arg_groups(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[Any, bool, bool]]:
    """Tensor arguments in schema order as (tensor or list of tensors, written in place, an out= argument)."""
    spec = _ARGUMENTS.get(func)
    if spec is None:
        spec = _ARGUMENTS[func] = tuple((i, a.name, bool(a.alias_info is not None and a.alias_info.is_write),
                                         bool(a.is_out)) for i, a in enumerate(func._schema.arguments))
    out: list[tuple[Any, bool, bool]] = []
    n = len(args)
    for i, name, write, is_out in spec:
        if i < n:
            v = args[i]
        elif name in kwargs:
            v = kwargs[name]
        else:
            continue
        if isinstance(v, torch.Tensor):
            out.append((local(v), write, is_out))
        elif isinstance(v, (list, tuple)) and v and all(isinstance(e, torch.Tensor) or e is None for e in v):
            out.append(([None if e is None else local(e) for e in v], write, is_out))
    return out


def op_hints(func: Any) -> tuple[str, bool, bool, bool]:
    """(op type, routing, collective, per rank) of an operator, from its schema and tags."""
    got = _HINTS.get(func)
    if got is None:
        got = _HINTS[func] = _op_hints(func)
    return got


def _op_hints(func: Any) -> tuple[str, bool, bool, bool]:
    name = func.overloadpacket.__name__
    ns = func.namespace
    routing = bool(getattr(func, "is_view", False))
    collective = ns in ("c10d", "_c10d_functional") and any(w in name for w in COLLECTIVE_WORDS)
    per_rank = torch.Tag.nondeterministic_seeded in func.tags or \
        (ns in ("c10d", "_c10d_functional") and any(w in name for w in PER_RANK_WORDS)
         and not any(w in name for w in ALL_GATHER_WORDS))
    return name, routing, collective, per_rank


def wait_collective(out: Any, func: Any) -> None:
    """Wait for a collective, so the recorded output is the reduced value: c10d's ops return a Work
    handle; a functional collective's tensor holds its result only after ``wait_tensor`` (which the
    training's own later wait then finds done; only overlap of communication with compute is lost)."""
    items = out if isinstance(out, (list, tuple)) else [out]
    functional = func.namespace == "_c10d_functional"
    for v in items:
        if functional and isinstance(v, torch.Tensor):
            torch.ops._c10d_functional.wait_tensor(v)
            continue
        w = getattr(v, "wait", None)
        if w is not None and not isinstance(v, torch.Tensor):
            try:
                w()
            except (RuntimeError, TypeError):
                pass


_GROUPS: dict[Any, tuple[int, ...]] = {}


def collective_group(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...]:
    """The global ranks of a collective's process group, from its group argument (a ProcessGroup or a
    functional collective's group name); () for the whole world, or when it names none."""
    import torch.distributed as dist
    for v in (*args, *kwargs.values()):
        key = v if isinstance(v, str) else id(v) if type(v).__name__ == "ProcessGroup" else None
        if key is None:
            continue
        got = _GROUPS.get(key)
        if got is None:
            try:
                pg = dist.distributed_c10d._resolve_process_group(v) if isinstance(v, str) else v
                ranks = tuple(dist.get_process_group_ranks(pg))
            except (RuntimeError, ValueError, KeyError, AttributeError):
                continue
            got = _GROUPS[key] = () if len(ranks) == dist.get_world_size() else ranks
        return got
    return ()


def tag_pending(g: IterationGraph) -> None:
    """Mark the autograd node of recent forward outputs with their forward node (for backward links)."""
    if not g.pending_tags:
        return
    for ref, node in g.pending_tags:
        t = ref()
        if t is None:
            continue
        fn = t.grad_fn
        if fn is not None:
            md = fn.metadata
            if "tdbg" not in md:
                md["tdbg"] = node
    g.pending_tags.clear()


def _still_at(ref: Any, ptr: int) -> bool:
    """The tensor behind weak ``ref`` is alive and its memory is at ``ptr``."""
    kept = ref()
    return kept is not None and storage_ptr(kept) == ptr


class Tracker:
    """Producers of tensors within one iteration: edges for the graph."""

    def __init__(self, g: IterationGraph, leaf_of: Callable[[torch.Tensor], "Leaf | None"],
                 on_leaf: Callable[[NodeRecord, torch.Tensor], None],
                 on_register: Callable[[torch.Tensor, str, bool, int], None] | None = None) -> None:
        self.g = g
        self.leaf_of = leaf_of
        self.on_leaf = on_leaf
        self.on_register = on_register      # told of each (tensor, node, view, slot) registered

    def source(self, t: torch.Tensor, data: bool = True, read: bool = True) -> tuple[str, Leaf | None]:
        """(node that made ``t``, the leaf when no operator of this iteration did). A tensor from
        outside is a data input when ``data`` (first read by the forward pass), else kind other;
        ``read``: its value is used (not only overwritten), so it is dumped."""
        t = local(t)
        # A view made after the last write to its memory was made by its view op; a write to the
        # memory after the view was made (an in-place op, a collective) is newer and wins.
        best = self.newest(t)
        if best is not None:
            return best[1], None
        # memory torch.empty made whose tensor object is gone (nn.Parameter(torch.empty(...)) keeps the
        # memory in a new object): its allocation made it, and its bytes are no value to read
        maker = self.g.unset.get(storage_ptr(t) or -1)
        if maker is not None:
            return maker, None
        leaf = self.leaf_of(t)
        if leaf is None:
            return self._data_input(t, data, read), None
        self.make_leaf(leaf, t)
        return leaf.name, leaf

    def newest(self, t: torch.Tensor) -> tuple[int, str, Any, int] | None:
        """The newest live (seq, node, tensor ref, slot) that made ``t``'s view or wrote its memory."""
        t = local(t)
        g = self.g
        best = None
        ptr = storage_ptr(t)
        for e in (g.by_view.get(view_key(t, ptr)), g.by_storage.get(ptr)):
            if e is None or (best is not None and e[0] <= best[0]):
                continue
            kept = e[2]()
            # alive, and (a base kept for a view) still owning this memory: FSDP frees and re-allocates
            # its unsharded parameters' storage, and a freed address may come back for another tensor
            if kept is not None and (kept is t or storage_ptr(kept) == ptr):
                best = e
        return best

    def forget_moved(self) -> None:
        """Drop the producers whose memory died or moved. FSDP frees its unsharded parameters after the
        forward pass and re-allocates the same storage for the backward's all-gather; the allocator often
        hands back the same address, and a producer kept from the forward would then claim memory it no
        longer made, in some iterations and not others (whose graphs would then differ)."""
        for table, ptr_of in ((self.g.by_view, lambda k: k[0]), (self.g.by_storage, lambda k: k)):
            for key in [k for k, e in table.items() if not _still_at(e[2], ptr_of(k))]:
                del table[key]

    def slot_of(self, t: torch.Tensor) -> int | None:
        """The output slot of the node that made ``t`` (None: a leaf)."""
        e = self.newest(t)
        return None if e is None else e[3]

    def make_leaf(self, leaf: Leaf, t: torch.Tensor) -> None:
        """The node of a parameter, buffer or optimizer state (once per iteration)."""
        t = local(t)
        g = self.g
        if leaf.name not in g.leaves:
            shape = leaf.shape if leaf.shape is not None else tuple(t.shape)
            rec = NodeRecord(leaf.name, "Parameter" if leaf.kind != Kind.INPUT else "Input", "",
                             outputs=[OutputType(dtype_name(t.dtype), shape)],
                             is_parameter=True, has_default=leaf.kind != Kind.INPUT, kind=leaf.kind, param=leaf.param)
            g.leaves[leaf.name] = rec
            g.nodes.append(rec)
            if leaf.kind in (Kind.WEIGHT, Kind.OPTIMIZER_STATE):
                g.invariant.add(leaf.name)

    def _data_input(self, t: torch.Tensor, data: bool, read: bool) -> str:
        g = self.g
        ptr = storage_ptr(t)
        name = g.inputs_seen.get(ptr)
        # An address seen before is a new tensor (source() finds a tensor seen before as long as it or its
        # base lives: this memory was freed and holds another now, as FSDP's unsharded parameters come
        # and go); empty tensors, which have no memory, are one input
        if name is not None and ptr == 0:
            return name
        name = f"input-{g.input_count}"
        g.input_count += 1
        g.inputs_seen[ptr] = name
        rec = NodeRecord(name, "Input", "", outputs=[OutputType(dtype_name(t.dtype), tuple(t.shape))],
                         is_parameter=True, kind=Kind.INPUT if data else Kind.OTHER)
        g.leaves[name] = rec
        g.nodes.append(rec)
        self.register(t, name)
        if read:
            self.on_leaf(rec, t)
        return name

    def register(self, t: torch.Tensor, node: str, view: bool = False, slot: int = 0) -> None:
        """``node`` made ``t`` (its output ``slot``): a view of existing memory (``view``), or wrote its memory."""
        t = local(t)
        g = self.g
        g.seq += 1
        # A write through a view (FSDP's copy-out into views of its all-gather buffer) is remembered as
        # long as the memory lives: the view's base is kept, not the view, which dies at once
        base = t._base
        try:
            ref = weakref.ref(t if base is None else base)
        except TypeError:
            return
        e = (g.seq, node, ref, slot)
        ptr = storage_ptr(t)
        g.by_view[view_key(t, ptr)] = e
        if not view:
            g.by_storage[ptr] = e
        if self.on_register is not None:
            self.on_register(t, node, view, slot)
