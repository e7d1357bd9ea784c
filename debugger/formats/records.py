"""Plain records every reader returns; the model is built from these alone."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..errors import CorruptFileError

# Real scopes nest a few dozen levels; the scope tree, its views and exports walk them recursively, so a
# graph whose names nest deeper than this is refused as damaged rather than exhausting Python's stack.
MAX_SCOPE_DEPTH = 256


class Kind(str, Enum):
    """What a node's value is, as every format assigns it (from graph evidence, never from names alone).
    A ``str``: ``Kind.WEIGHT == "weight"`` and JSON holds the word."""

    WEIGHT = "weight"
    GRADIENT = "gradient"
    OPTIMIZER_STATE = "optimizer_state"
    ACTIVATION = "activation"
    LOSS = "loss"
    INPUT = "input"
    CONSTANT = "constant"
    OTHER = "other"

    def __str__(self) -> str:   # f"{kind}" is the word, as it was when kinds were plain strings
        return self.value

    __format__ = str.__format__


KINDS: tuple[str, ...] = tuple(k.value for k in Kind)

# What a tensor of a per-step series is: a node kind, or the step's update of a weight (w_t - w_{t-1}).
SERIES_ROLES: tuple[str, ...] = ("weight", "gradient", "optimizer_state", "update", "activation", "loss", "other")


@dataclass(frozen=True)
class SeriesTensor:
    """One tensor of a per-step series: its name (the graph node's name where the run has a graph), what it
    is, and the parameter it belongs to (None: none)."""

    name: str
    role: str = "other"
    param: str | None = None


@dataclass(frozen=True)
class StackFrame:
    """One frame of the source stack that made a node: where, which lines, the code text, and whether
    it is framework code; each format builds these from what it stores."""

    file: str
    line: int
    end_line: int = 0              # last line of a multi-line statement (0 or ``line``: one line)
    column: int = 0                # 1-based column where the code starts (0: unknown)
    code: str = ""
    is_framework: bool = False     # framework or library code, not the user's
    forward_candidate: bool = False  # from a backward node's list of the forward code it derives from

    def __post_init__(self) -> None:
        if self.end_line < self.line:
            object.__setattr__(self, "end_line", self.line)

    @property
    def location(self) -> str:
        """``file:line`` as users type it."""
        return f"{self.file}:{self.line}"

    def covers(self, line: int) -> bool:
        """True when a query for ``line`` should find this frame."""
        if self.line == line:
            return True
        # A multi-line statement covers its lines, but a `def` frame spans the whole body:
        # letting it match would return every node of the function.
        return self.line < line <= self.end_line and not self.code.lstrip().startswith(("def ", "@"))


@dataclass
class OutputType:
    """Type of one node output: a numpy dtype name (or MindSpore's word) and a shape; and what the format
    knows of this output alone, when a kernel's outputs differ (BatchNormGrad: the input's gradient,
    then the gradients of gamma and beta)."""

    dtype: str | None
    shape: tuple[int, ...] | None
    kind: Kind | None = None       # this output's kind when it is not the node's (None: the node's)
    param: str | None = None       # with ``kind``: the weight it belongs to
    undefined: bool = False        # its contents mean nothing (a slot the kernel does not write and no
                                   # node reads): listed, never checked by watchpoints


@dataclass
class NodeRecord:
    """One graph node as a reader found it."""

    name: str                      # full name, the key used everywhere
    op_type: str
    scope: str
    inputs: list[tuple[str, str]] = field(default_factory=list)  # (source full name, "data"|"control")
    outputs: list[OutputType] = field(default_factory=list)
    stack: tuple[StackFrame, ...] = ()   # the source stack that made it, innermost first
    module: str = ""               # dotted path of the layer/module it runs in ("backbone.fc3"; "" unknown)
    instance_name: str = ""
    is_parameter: bool = False
    is_constant: bool = False
    has_default: bool = False      # parameters: holds a value of its own (weights, state)
    # Facts the format knows about the node (the MindSpore reader derives them from the graph,
    # tdbg's own format stores them); the model and the engines use these, never op names.
    kind: Kind = Kind.OTHER
    # The activation function the node applies as a layer, in words common to every format ("relu",
    # "relu6", "tanh", "sigmoid", "gelu", "silu", "softmax" ...; see docs/tdbg-h5-format.md), whatever
    # the op is called (relu_, threshold(x, 0, 0), ReLUV2); "" when it is none, also for a tanh or
    # sigmoid that is only a part of a composite function (GPT-2's tanh-approximated GELU).
    activation: str = ""
    param: str | None = None       # the weight a weight, gradient or optimizer state belongs to
    is_backward: bool = False
    is_routing: bool = False       # only routes values (no computation): hidden in graph views
    stops_gradient: bool = False   # passes its input's value cut off from autograd (torch's detach): what
                                   # reads it is not trained through it
    is_collective: bool = False    # exchanges values between ranks (all-reduce, all-gather ...)
    group: tuple[int, ...] = ()    # a collective's process group: the global ranks it exchanges with
                                   # (() : every rank, or unknown)
    per_rank: bool = False         # its outputs differ between data-parallel ranks by design (random, scatter)
    input_roles: tuple[str, ...] = ()   # optimizer update kernels: "weight" | "gradient" | "state" | "hyper" per input
    value_inputs: tuple[str, ...] = ()  # per input slot, the node whose value arrives (through routing nodes)
    base_name: str = ""            # the name without numbers that change between runs ("" = name)
    item: int | None = None        # a node that passes on one element of its input's tuple (MindSpore's
                                   # TupleGetItem): which one, when the graph says


@dataclass
class GraphRecord:
    """One graph: its nodes in topological order and the names of its outputs."""

    graph_id: int
    name: str
    nodes: list[NodeRecord]
    outputs: list[str]
    source_file: str               # the file it was read from
    execution_order: list[str] = field(default_factory=list)   # kernels as they ran ([]: unknown)
    # how finely it was recorded: LEVEL_OPS (every operator; what a framework's own dump holds),
    # LEVEL_MODULES (one node per module call) or LEVEL_PARAMETERS (weights, gradients, optimizer
    # state and the loss only): what the watchpoints can answer on it
    level: str = "ops"
    # its operators are those of a compiled program (torch.compile's graphs as Inductor built them):
    # decomposed and fused, so an operator of the same code run eagerly may have no counterpart here
    compiled: bool = False

    def __post_init__(self) -> None:
        for n in self.nodes:
            depth = max(n.name.count("/"), n.scope.count("/"))
            if depth > MAX_SCOPE_DEPTH:
                raise CorruptFileError(self.source_file, f"node {n.name[:80]!r}...: its scope nests {depth} levels "
                                       f"deep (a graph holds at most {MAX_SCOPE_DEPTH}); not a graph tdbg can show")


LEVEL_OPS, LEVEL_MODULES, LEVEL_PARAMETERS = "ops", "modules", "parameters"
LEVELS = (LEVEL_PARAMETERS, LEVEL_MODULES, LEVEL_OPS)      # coarsest first


@dataclass(frozen=True)
class IterationFacts:
    """What the run knew about one iteration beyond its tensors (a recorder's facts; None when unknown)."""

    # weights (parameter names) whose optimizer's step() did not run in the iteration
    not_stepped: frozenset[str] = frozenset()
    # a loss scaler checked the gradients for NaN/Inf in the iteration (torch.amp.GradScaler's unscale)
    loss_scaler: bool = False
    # weights whose optimizer stepped with learning rate 0 in every parameter group (a warm-up's first step)
    lr_zero: frozenset[str] = frozenset()

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (stored in tdbg-h5's iteration files)."""
        d: dict[str, object] = {"not_stepped": sorted(self.not_stepped), "loss_scaler": self.loss_scaler}
        if self.lr_zero:
            d["lr_zero"] = sorted(self.lr_zero)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> "IterationFacts":
        """Inverse of :meth:`to_dict` (ValueError when malformed)."""
        names, lr_zero = d.get("not_stepped", []), d.get("lr_zero", [])
        for key, v in (("not_stepped", names), ("lr_zero", lr_zero)):
            if not isinstance(v, list) or not all(isinstance(n, str) for n in v):
                raise ValueError(f"{key} must be a list of parameter names")
        return cls(frozenset(names), bool(d.get("loss_scaler", False)), frozenset(lr_zero))
