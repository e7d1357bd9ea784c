"""The one place that defines every watchpoint condition: names, targets, parameters, help.

The CLI (`tdbg scan --list-conditions`), the web form (`/api/conditions`) and the README's table
are generated from :data:`CONDITIONS`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..formats.records import Kind

# Comparison suffixes, as in MindInsight: abs_mean_lt -> statistic "abs_mean", op "lt".
OPS = {"gt": lambda a, b: a > b, "lt": lambda a, b: a < b, "ge": lambda a, b: a >= b, "le": lambda a, b: a <= b}
OP_TEXT = {"gt": ">", "lt": "<", "ge": ">=", "le": "<="}

# What a condition needs besides the tensor's own statistics.
STATS, PREVIOUS, HISTORY, UNITS, RANGE, OVERFLOW, LOSS_HISTORY, INITIAL, SERIES = (
    "stats", "previous", "history", "units", "range", "overflow", "loss_history", "initial", "series")

TARGET_KINDS = {
    "weight": (Kind.WEIGHT,),
    "gradient": (Kind.GRADIENT,),
    "activation": (Kind.ACTIVATION,),
    "loss": (Kind.LOSS,),
    "any": (Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE, Kind.ACTIVATION, Kind.LOSS, Kind.INPUT, Kind.OTHER),
    # everything but optimizer state, which is legitimately all zero (moments before the first step,
    # the momentum buffer of plain SGD), and the backward pass's intermediates (below)
    "computed": (Kind.WEIGHT, Kind.GRADIENT, Kind.ACTIVATION, Kind.LOSS, Kind.INPUT, Kind.OTHER),
    # the learning rate and loss scale of a per-step series: no node of a graph
    "scalar": (),
}
# The scan sorts the backward pass's intermediates (kind other on a backward node: the gradients of
# activations) under this key (watch/engine.py); only "any" targets them.
BACKWARD = "backward"
# ... and the outputs of nodes that only route or copy a value (clone, detach, Load) under this one: a copy
# of a zero-initialised bias taken before the first step is all zero, and its value is judged where it
# was made.
COPY = "copy"
# ... and the model's buffers (BatchNorm's running mean and variance: leaves with a value of their own that
# no optimizer trains) under this one: model state a kernel updates in place, not a computed tensor.
BUFFER = "buffer"

# What a scan's headline ("first problem") ranks by before the iteration: a finding nearer the cause of
# a failing run comes first. A NaN made by one kernel poisons everything after it; weights blown up by
# a too-high learning rate then saturate or kill layers; dead or saturated layers starve the gradients
# of the layers before them; a frozen weight is its own cause but rarely the crash; an all-zero tensor,
# a range or a loss that stalls are symptoms.
CAUSES = {
    0: "non-finite origin",
    1: "non-finite values",
    2: "exploding weights or gradients, bad initialisation",
    3: "dead or saturated layer",
    4: "vanishing gradients or updates",
    5: "frozen tensors",
    6: "symptoms (all-zero tensors, ranges, statistics thresholds, loss)",
}

@dataclass(frozen=True)
class Param:
    """One parameter: a comparison (``<statistic>_<op>``) or a setting (rtol, epsilon...)."""

    name: str
    default: float | None = None
    help: str = ""
    type: str = "float"          # "float" | "int" | "bool"
    min: float | None = None
    max: float | None = None
    statistic: str | None = None  # set for comparisons
    op: str | None = None

    @property
    def is_comparison(self) -> bool:
        """Whether the parameter is a threshold that can make a hit."""
        return self.op is not None

    def check(self, value: Any) -> float:
        """Validate and convert a user value."""
        try:
            if self.type == "bool":
                v = float(_as_bool(value))
            elif self.type == "int":
                f = float(value)
                if not f.is_integer():
                    raise ValueError
                v = f
            else:
                v = float(value)
        except (TypeError, ValueError, OverflowError):    # OverflowError: an int of 400 digits
            raise ValueError(f"{self.name} must be a{'n' if self.type == 'int' else ''} {self.type}, "
                             f"got {_short(value)}") from None
        if math.isnan(v):
            raise ValueError(f"{self.name} must not be NaN")
        if math.isinf(v):       # also what float() makes of a number past float64's range
            raise ValueError(f"{self.name} must be a finite number, got {_short(value)}")
        if self.min is not None and v < self.min:
            raise ValueError(f"{self.name} must be >= {self.min:g}, got {v:g}")
        if self.max is not None and v > self.max:
            raise ValueError(f"{self.name} must be <= {self.max:g}, got {v:g}")
        return v

    def describe(self) -> dict[str, Any]:
        """JSON-ready description for forms and docs."""
        return {"name": self.name, "type": self.type, "default": self.default, "help": self.help,
                "min": self.min, "max": self.max, "comparison": self.is_comparison,
                "statistic": self.statistic, "op": self.op}


def _short(value: Any) -> str:
    """A user's value for a message, cut to 40 characters (a 400-digit number is not echoed whole)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _as_bool(v: Any) -> bool:
    if isinstance(v, str):
        if v.lower() in ("1", "true", "yes", "on"):
            return True
        if v.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError
    return bool(v)


def cmp(name: str, default: float | None = None, help: str = "", **kw: Any) -> Param:
    """A comparison parameter named ``<statistic>_<op>``."""
    stat, _, op = name.rpartition("_")
    assert op in OPS, name
    return Param(name, default, help, statistic=stat, op=op, **kw)


def setting(name: str, default: float | None, help: str = "", **kw: Any) -> Param:
    """A non-comparison parameter."""
    return Param(name, default, help, **kw)


@dataclass(frozen=True)
class Condition:
    """A watchpoint condition."""

    name: str
    target: str                  # key of TARGET_KINDS
    help: str
    params: tuple[Param, ...] = ()
    needs: str = STATS
    op_types: tuple[str, ...] = ()   # restrict to nodes applying these activation functions (NodeRecord.activation)
    advice: str = ""
    origin: str = "mindinsight"      # where the condition comes from: "mindinsight" | "sagemaker" | "tdbg"
    rule: str = "thresholds"         # the rule that plans and evaluates it (watch/rules.RULES)
    cause: int = 6                   # headline rank: lower is nearer a cause (see CAUSES)

    @property
    def kinds(self) -> tuple[str, ...]:
        """Node kinds this condition looks at."""
        return TARGET_KINDS[self.target]

    @property
    def scan_keys(self) -> tuple[str, ...]:
        """The keys a scan step's outputs are sorted under that this condition looks at."""
        return self.kinds + ((BACKWARD, COPY, BUFFER) if self.target == "any" else ())

    def param(self, name: str) -> Param:
        """A parameter by name (ValueError when unknown)."""
        for p in self.params:
            if p.name == name:
                return p
        raise ValueError(f"{self.name} has no parameter {name!r} (parameters: "
                         f"{', '.join(p.name for p in self.params) or 'none'})")

    def describe(self) -> dict[str, Any]:
        """JSON-ready description."""
        return {"name": self.name, "target": self.target, "kinds": list(self.kinds), "help": self.help,
                "advice": self.advice, "needs": self.needs, "origin": self.origin,
                "op_types": list(self.op_types), "params": [p.describe() for p in self.params],
                "cause": self.cause}


_TOO_LARGE = (cmp("abs_mean_gt", help="mean of |x| above"), cmp("max_gt", help="max above"),
              cmp("min_gt", help="min above"), cmp("mean_gt", help="mean above"))
_TOO_SMALL = (cmp("abs_mean_lt", help="mean of |x| below"), cmp("max_lt", help="max below"),
              cmp("min_lt", help="min below"), cmp("mean_lt", help="mean below"))
_RANGE = (setting("range_start_inclusive", None, "lower end of the range"),
          setting("range_end_inclusive", None, "upper end of the range"),
          cmp("range_percentage_lt", help="percent of elements inside the range below", min=0, max=100),
          cmp("range_percentage_gt", help="percent of elements inside the range above", min=0, max=100),
          cmp("max_min_lt", help="max - min below", min=0), cmp("max_min_gt", help="max - min above", min=0))
_WHOLE_LAYER = setting("whole_layer", None, "1: fire only when every checked parameter of the layer (the parameters "
                       "sharing a module path) does", type="bool")
_EPS = setting("epsilon", 1e-9, "added to the previous mean |x| in the ratio's denominator", min=0)
_UNITS = (setting("threshold_inactivity", 1.0, "a unit is inactive when active on fewer than this percent of samples", min=0, max=100),
          setting("threshold_layer", 50.0, "fires when more than this percent of units are inactive", min=0, max=100))

_CONDITIONS = [
    # MindInsight's catalogue, same names and parameters.
    Condition("weight_initialization", "weight", "Initial weights (first iteration only) all zero or out of range.",
              (cmp("zero_percentage_ge", 100.0, "percent of zeros at least", min=0, max=100),
               cmp("max_gt", help="max above"), cmp("min_lt", help="min below")), INITIAL,
              advice="Check the initializer of this layer.", rule="initial", cause=2),
    Condition("weight_overflow", "weight", "Weight contains NaN or +-Inf.", (), STATS,
              advice="Lower the learning rate or enable loss scaling / gradient clipping.", rule="nonfinite", cause=1),
    Condition("gradient_exploding", "gradient", "Gradient contains NaN or +-Inf.", (), STATS,
              advice="Clip gradients, lower the learning rate, check the loss for log(0) or division by zero.",
              rule="nonfinite", cause=1),
    Condition("tensor_overflow", "any", "Tensor contains NaN or +-Inf.", (), STATS, rule="nonfinite", cause=1),
    Condition("weight_too_large", "weight", "Weight statistics above thresholds.", _TOO_LARGE, cause=2),
    Condition("gradient_too_large", "gradient", "Gradient statistics above thresholds.", _TOO_LARGE,
              advice="Clip gradients or lower the learning rate.", cause=2),
    Condition("tensor_too_large", "any", "Tensor statistics above thresholds.", _TOO_LARGE),
    Condition("weight_too_small", "weight", "Weight statistics below thresholds.", _TOO_SMALL),
    Condition("gradient_vanishing", "gradient", "Gradient too small to train (mean |g| below a threshold).",
              (cmp("abs_mean_lt", 1e-9, "mean of |g| below"),) + _TOO_SMALL[1:] + (_WHOLE_LAYER,),
              advice="Saturated activations or a too deep net without normalisation kill gradients.", cause=4),
    Condition("tensor_too_small", "any", "Tensor statistics below thresholds.", _TOO_SMALL),
    Condition("tensor_all_zero", "computed", "Tensor (nearly) all zero (optimizer state is not checked).",
              (cmp("zero_percentage_ge", 100.0, "percent of zeros at least", min=0, max=100),)),
    Condition("weight_not_changed", "weight",
              "Weight unchanged since the previous iteration: every |cur - prev| <= atol + rtol * |prev|.",
              (setting("rtol", 1e-5, "relative tolerance", min=0), setting("atol", 1e-8, "absolute tolerance", min=0),
               _WHOLE_LAYER),
              PREVIOUS, advice="A zero learning rate, a frozen layer or a zero gradient.", rule="unchanged", cause=5),
    Condition("weight_change_too_large", "weight",
              "Update ratio mean|cur - prev| / (mean|prev| + epsilon) above a threshold.",
              (cmp("abs_mean_update_ratio_gt", 0.1, "update ratio above", min=0), _EPS), PREVIOUS,
              advice="Lower the learning rate.", rule="update_ratio", cause=2),
    Condition("weight_change_too_small", "weight",
              "Update ratio mean|cur - prev| / (mean|prev| + epsilon) below a threshold.",
              (cmp("abs_mean_update_ratio_lt", 1e-4, "update ratio below", min=0), _EPS), PREVIOUS,
              advice="Raise the learning rate or check for vanishing gradients.", rule="update_ratio", cause=4),
    Condition("activation_range", "activation", "Share of activation values inside a range, or their spread.",
              _RANGE, RANGE, rule="range"),
    Condition("tensor_range", "any", "Share of tensor values inside a range, or their spread.", _RANGE, RANGE,
              rule="range"),
    # SageMaker-style rules: several iterations or a per-unit view of a layer.
    Condition("activation_saturation", "activation",
              "Saturated tanh/sigmoid: a unit is saturated when its input is inside the active range on fewer "
              "than threshold_inactivity % of the samples; fires when more than threshold_layer % of units are.",
              _UNITS, UNITS, ("tanh", "sigmoid"), "Re-initialise the layer before it with smaller weights, "
              "normalise its input or lower the learning rate.", "sagemaker", rule="units", cause=3),
    Condition("activation_dead_relu", "activation",
              "Dead ReLU: a unit is dead when positive on fewer than threshold_inactivity % of the samples; "
              "fires when more than threshold_layer % of units are.",
              _UNITS, UNITS, ("relu", "relu6"), "Lower the learning rate or use LeakyReLU.", "sagemaker",
              rule="units", cause=3),
    # tdbg: the same two faults judged on the whole layer's outputs, which does not depend on the batch size.
    Condition("activation_saturated_layer", "activation",
              "Saturated tanh/sigmoid layer: the share of its outputs within tolerance of an asymptote (tanh: "
              "-1 or 1, sigmoid: 0 or 1) is above saturated_percentage_gt.",
              (setting("tolerance", 1e-3, "an output this close to an asymptote is saturated", min=0, max=0.5),
               cmp("saturated_percentage_gt", 50.0, "percent of saturated outputs above", min=0, max=100)),
              RANGE, ("tanh", "sigmoid"), "Re-initialise the layer before it with smaller weights, normalise "
              "its input or lower the learning rate.", "tdbg", rule="saturated", cause=3),
    Condition("activation_dead_layer", "activation",
              "Dead ReLU layer: the share of its outputs that are exactly zero is above zero_percentage_gt "
              "(a healthy ReLU layer outputs zero for about half of its inputs).",
              (cmp("zero_percentage_gt", 90.0, "percent of zero outputs above", min=0, max=100),),
              STATS, ("relu", "relu6"), "Lower the learning rate, check the bias initialisation or "
              "use LeakyReLU.", "tdbg", rule="thresholds", cause=3),
    Condition("tensor_unchanged", "any",
              "Tensor unchanged (allclose) over the last num_steps dumped iterations.",
              (setting("num_steps", 3, "number of dumped iterations compared (this one included)", type="int", min=2),
               setting("rtol", 1e-5, "relative tolerance", min=0), setting("atol", 1e-8, "absolute tolerance", min=0)),
              HISTORY, origin="sagemaker", rule="unchanged", cause=5),
    Condition("weight_update_ratio", "weight",
              "Update ratio mean|cur - prev| / (mean|prev| + epsilon) outside [small_threshold, large_threshold].",
              (setting("large_threshold", 10.0, "fires when the ratio is above", min=0),
               setting("small_threshold", 1e-8, "fires when the ratio is below", min=0), _EPS), PREVIOUS,
              origin="sagemaker", rule="update_ratio", cause=2),
    Condition("loss_not_decreasing", "loss",
              "Loss not lower than num_steps iterations earlier by at least diff_percent %.",
              (setting("num_steps", 10, "iterations back to compare with", type="int", min=1),
               setting("diff_percent", 0.0, "fires when the loss fell by at most this percent")),
              LOSS_HISTORY, origin="sagemaker", rule="loss_history"),
    Condition("tensor_exploding", "any", "Non-finite values (only NaN when only_nan is set).",
              (setting("only_nan", 0, "count only NaN, not +-Inf", type="bool"),), STATS, origin="sagemaker",
              rule="nonfinite", cause=1),
    # tdbg: where the first NaN/Inf came from.
    Condition("overflow", "any",
              "Origin of non-finite values: the first kernel in execution order whose inputs are finite and "
              "whose outputs are not, in the earliest iteration with any NaN/Inf.", (), OVERFLOW,
              advice="Look at this kernel's inputs: log/div/sqrt of zero or negatives, or an fp16 overflow.",
              origin="tdbg", rule="overflow_origin", cause=0),
    # tdbg: what every scan does whatever its watchpoints (watch/sweep.py); listed for its help and rank.
    Condition("nonfinite_sweep", "any",
              "Always on, in every scan: the first tensor of each rank, in iteration and execution order, that "
              "holds NaN or Inf, where no other non-finite finding comes at or before it (a dump that does not "
              "hold the operator that made it), with what the dump says of its origin.", (), STATS,
              advice="Where the note says the origin is not in the dump, record the operators of that iteration "
                     "(a full dump, level \"ops\").", origin="tdbg", rule="sweep", cause=0),
    # tdbg, over time: run over every step of a rank's per-step series (watch/series_conditions.py), not
    # over the dumped iterations.
    Condition("loss_spike", "loss",
              "Loss spike over the per-step series: the step's change of the loss, as a robust z-score against "
              "the median and MAD of the changes over the window steps before, is above z_gt (a NaN/Inf loss too).",
              (setting("window", 50, "steps of recent behaviour", type="int", min=3),
               cmp("z_gt", 6.0, "robust z-score above", min=0)), SERIES,
              advice="`tdbg spikes DUMP` ranks the tensors that moved first.", origin="tdbg",
              rule="series_loss_spike", cause=2),
    Condition("norm_growth", "gradient",
              "Growth of a gradient's or update's l2 norm over the per-step series: the median over a block of "
              "window steps is above ratio_gt times the median of the block before (first block per tensor).",
              (setting("window", 100, "steps per block", type="int", min=2),
               cmp("ratio_gt", 10.0, "ratio of the block medians above", min=0)), SERIES,
              advice="Lower the learning rate, clip gradients, check the layer's inputs.", origin="tdbg",
              rule="series_norm_growth", cause=2),
    Condition("lr_change", "scalar",
              "Learning-rate change over the per-step series: a step's learning rate differs from the step "
              "before's by more than change_percent_gt %.",
              (cmp("change_percent_gt", 50.0, "percent change above (a smooth schedule moves ~1%/step)", min=0),),
              SERIES, advice="A scheduler's jump or a resumed run with another learning rate.", origin="tdbg",
              rule="series_lr_change", cause=2),
    Condition("loss_scale_change", "scalar",
              "Loss-scale change over the per-step series: a step's loss scale differs from the step before's "
              "by more than change_percent_gt % (a drop: the scaler found an overflow).",
              (cmp("change_percent_gt", 0.0, "percent change above", min=0),), SERIES,
              advice="Repeated drops: fp16 overflows in the backward pass.", origin="tdbg",
              rule="series_loss_scale_change", cause=1),
]

CONDITIONS: dict[str, Condition] = {c.name: c for c in _CONDITIONS}

# The preset a user gets with no options. Thresholds and why: README "Watchpoints".
PRESETS: dict[str, list[str]] = {
    "recommended": [
        "overflow",
        "gradient_vanishing:abs_mean_lt=1e-9,whole_layer=1",
        "weight_change_too_large:abs_mean_update_ratio_gt=10,epsilon=1e-3",
        "weight_not_changed:rtol=0,atol=0,whole_layer=1",
        "tensor_all_zero:zero_percentage_ge=100",
        "activation_saturated_layer:tolerance=1e-3,saturated_percentage_gt=50",
        "activation_dead_layer:zero_percentage_gt=90",
    ],
    # what a dump of weights, gradients and optimizer state answers (the recorder's level "parameters"):
    # the recommended preset without the activation watchpoints, which such a dump leaves unanswered
    "parameters": [
        "overflow",
        "gradient_vanishing:abs_mean_lt=1e-9,whole_layer=1",
        "weight_change_too_large:abs_mean_update_ratio_gt=10,epsilon=1e-3",
        "weight_not_changed:rtol=0,atol=0,whole_layer=1",
        "tensor_all_zero:zero_percentage_ge=100",
    ],
}


def describe_conditions() -> list[dict[str, Any]]:
    """Every condition as JSON-ready dicts, in registry order."""
    return [c.describe() for c in _CONDITIONS]


def condition(name: str) -> Condition:
    """A condition by name (ValueError listing the known ones when unknown)."""
    try:
        return CONDITIONS[name]
    except KeyError:
        raise ValueError(f"unknown condition {name!r}; known: {', '.join(CONDITIONS)}") from None


@dataclass(frozen=True)
class Watchpoint:
    """A condition with its parameters and optional target filters."""

    condition: Condition
    params: dict[str, float] = field(default_factory=dict)   # every effective parameter value
    node: str | None = None      # glob on the node full name or parameter name
    scope: str | None = None     # scope prefix

    @property
    def name(self) -> str:
        """The condition's name."""
        return self.condition.name

    def comparisons(self) -> list[tuple[Param, float]]:
        """Set comparison parameters with their thresholds."""
        return [(p, self.params[p.name]) for p in self.condition.params
                if p.is_comparison and p.name in self.params]

    def setting(self, name: str) -> float:
        """A setting's value (its default when the user gave none)."""
        if name in self.params:
            return self.params[name]
        d = self.condition.param(name).default
        if d is None:
            raise ValueError(f"{self.name}: {name} must be set")
        return d

    @classmethod
    def create(cls, name: str, params: dict[str, Any] | None = None, node: str | None = None,
               scope: str | None = None) -> "Watchpoint":
        """Validate parameters; with no comparison given, the condition's defaults apply."""
        cond = condition(name)
        given = {k: cond.param(k).check(v) for k, v in (params or {}).items()}
        has_cmp = any(cond.param(k).is_comparison for k in given)
        values = dict(given)
        for p in cond.params:
            if p.name in values or p.default is None:
                continue
            if not p.is_comparison or not has_cmp:
                values[p.name] = float(p.default)
        cmps = [p for p in cond.params if p.is_comparison]
        if cmps and not any(p.name in values for p in cmps):
            raise ValueError(f"{name}: set at least one of {', '.join(p.name for p in cmps)}")
        if cond.needs == RANGE:
            uses_range = any(k.startswith("range_percentage") for k in values)
            has_bounds = "range_start_inclusive" in values or "range_end_inclusive" in values
            if uses_range and not has_bounds:
                raise ValueError(f"{name}: range_percentage_* needs range_start_inclusive and/or range_end_inclusive")
            lo, hi = values.get("range_start_inclusive"), values.get("range_end_inclusive")
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"{name}: range_start_inclusive ({lo:g}) > range_end_inclusive ({hi:g})")
        return cls(cond, values, node, scope)

    @classmethod
    def parse(cls, text: str) -> "Watchpoint":
        """Parse ``NAME[:param=value,...]``."""
        name, _, rest = text.strip().partition(":")
        params: dict[str, str] = {}
        for item in filter(None, (s.strip() for s in rest.split(","))):
            k, eq, v = item.partition("=")
            if not eq:
                raise ValueError(f"bad watchpoint {text!r}: expected param=value, got {item!r}")
            params[k.strip()] = v.strip()
        node = params.pop("node", None)
        scope = params.pop("scope", None)
        return cls.create(name.strip(), params, node, scope)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Watchpoint":
        """From ``{"name": ..., "params": {...}, "node": ..., "scope": ...}``."""
        if not isinstance(d, dict) or "name" not in d:
            raise ValueError(f"bad watchpoint {d!r}: expected an object with a 'name'")
        return cls.create(str(d["name"]), d.get("params") or {}, d.get("node"), d.get("scope"))

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "params"}`` plus the filters that are set."""
        out: dict[str, Any] = {"name": self.name, "params": dict(self.params)}
        if self.node:
            out["node"] = self.node
        if self.scope:
            out["scope"] = self.scope
        return out


def preset(name: str) -> list[Watchpoint]:
    """The watchpoints of a preset."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return [Watchpoint.parse(s) for s in PRESETS[name]]
