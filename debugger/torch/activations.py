"""The activation function an ATen operator applies, as NodeRecord.activation names it.

In-place and functional variants are one function (``relu_`` and ``relu`` are "relu"); operators
that take the function's constants say which one they are (``threshold(x, 0, 0)`` is a ReLU,
``hardtanh(x, 0, 6)`` a ReLU6). A tanh or sigmoid that is only a part of a composite function
(GPT-2's ``NewGELUActivation`` computes ``0.5 * x * (1 + tanh(...))``) is no tanh or sigmoid layer:
see :class:`Composites`.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from . import capture as C

# ATen operator (without a trailing "_") -> the function it applies.
_BY_OP = {
    "relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "tanh": "tanh", "gelu": "gelu", "silu": "silu",
    "hardswish": "hardswish", "hardsigmoid": "hardsigmoid", "leaky_relu": "leaky_relu", "elu": "elu",
    "celu": "celu", "selu": "selu", "softplus": "softplus", "mish": "mish", "prelu": "prelu",
    "_prelu_kernel": "prelu", "rrelu_with_noise": "rrelu", "log_sigmoid_forward": "log_sigmoid",
    "_softmax": "softmax", "softmax": "softmax", "_log_softmax": "log_softmax", "log_softmax": "log_softmax",
    "softshrink": "softshrink", "hardshrink": "hardshrink", "glu": "glu",
}
# Functions whose tanh/sigmoid may be part of a composite (checked against the module's output).
PART_OF_COMPOSITE = frozenset({"tanh", "sigmoid"})


def _number(v: Any, default: float) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def activation_of(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The canonical activation ``op`` applies with these arguments ("" when none)."""
    base = op[:-1] if op.endswith("_") and not op.endswith("__") else op
    if base == "threshold":      # threshold(x, t, v): x if x > t else v
        t = _number(args[1] if len(args) > 1 else kwargs.get("threshold"), math_nan())
        v = _number(args[2] if len(args) > 2 else kwargs.get("value"), math_nan())
        return "relu" if t == 0.0 and v == 0.0 else "threshold"
    if base == "hardtanh":
        lo = _number(args[1] if len(args) > 1 else kwargs.get("min_val", -1.0), -1.0)
        hi = _number(args[2] if len(args) > 2 else kwargs.get("max_val", 1.0), 1.0)
        return "relu6" if (lo, hi) == (0.0, 6.0) else "hardtanh"
    return _BY_OP.get(base, "")


def math_nan() -> float:
    """NaN (an argument that is not a number matches no constant)."""
    return float("nan")


def owns_parameters(module: torch.nn.Module) -> bool:
    """Whether the module or any module below it holds a parameter."""
    return next(module.parameters(), None) is not None


class Composites:
    """tanh/sigmoid outputs made inside a module without parameters, pending that module's end: its
    output is the function's output (a Tanh layer), anything else is a part of a composite function."""

    def __init__(self) -> None:
        self.pending: dict[int, list[tuple[Any, Any]]] = {}   # id(module) -> [(record, weakref to its output)]
        self._owns: dict[int, bool] = {}

    def needs_check(self, module: torch.nn.Module | None) -> bool:
        """Whether a tanh/sigmoid run directly in ``module`` waits for the module's output."""
        if module is None:
            return False
        got = self._owns.get(id(module))
        if got is None:
            got = self._owns[id(module)] = owns_parameters(module)
        return not got

    def add(self, module: torch.nn.Module, record: Any, out: torch.Tensor) -> None:
        """Hold ``record`` until ``module`` returns."""
        try:
            ref = weakref.ref(out)
        except TypeError:
            return
        self.pending.setdefault(id(module), []).append((record, ref))

    def settle(self, module: torch.nn.Module, output: Any) -> None:
        """The module returned ``output``: its pending records that did not make it are no layer."""
        held = self.pending.pop(id(module), None)
        if not held:
            return
        # the module returns the function's values (maybe reshaped): the same live memory; a freed
        # output's memory may hold the module's output now, so a dead one is no match
        returned = {C.storage_ptr(t) for t in C.flat_tensors(output) if C.is_plain(t)}
        for record, ref in held:
            t = ref()
            if t is None or C.storage_ptr(t) not in returned:
                record.activation = ""
                if record.kind == "activation":
                    record.kind = "other"

    def clear(self) -> None:
        """Forget pending records (a new iteration)."""
        self.pending.clear()
