"""Grades of a compared pair (pass, warning, error) and the thresholds that set them."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

from .outcome import Outcome

PASS, WARNING, ERROR = "pass", "warning", "error"
GRADES = (PASS, WARNING, ERROR)
_FLOATS = frozenset({"bfloat16", "float16", "float32", "float64"})


def is_float(dtype: str | None) -> bool:
    """Whether a dtype name is a float."""
    return dtype in _FLOATS


@dataclass(frozen=True)
class GradeThresholds:
    """When a pair is graded error or warning (every bound is strict: ``<`` and ``>``).

    error when (cosine < cos_error and max_abs_err > abs_error) or cosine < cos_fail or
    max_abs_err > abs_fail: msprobe's mismatch rule, unchanged, so that a pair msprobe calls "No"
    is an error here too. Structural differences (dtype, shape, missing tensor, NaN/Inf on one side
    only) are errors whatever the thresholds.

    warning when not an error and cosine < cos_warn, max_abs_err > abs_warn or
    one_thousandth < ratio_warn: differences too small for msprobe's rule but larger than rounding.
    cos_warn puts 1 - cos ten times tighter than cos_error; abs_warn is ten times below abs_error
    and above a float32 rounding step (ulp) for values up to 1024, so the last-bit noise of
    re-ordered sums does not warn; ratio_warn warns when more than 0.1 % of the elements are off
    by 0.1 % or more (a local corruption that cosine and a small max_abs_err both hide).
    """

    cos_error: float = 0.99
    abs_error: float = 1e-3
    cos_fail: float = 0.9
    abs_fail: float = 1.0
    cos_warn: float = 0.999
    abs_warn: float = 1e-4
    ratio_warn: float = 0.999
    # Statistics-only tensors (no values, digests differ or absent): the largest relative difference
    # of a statistic both sides stored (max, min, mean, l2norm ...). An error above stat_error (a
    # perturbed weight moves its norm by percents), a warning above stat_warn (float32 rounding of
    # re-ordered sums stays near 1e-7).
    stat_error: float = 1e-3
    stat_warn: float = 1e-5

    @classmethod
    def parse(cls, text: str | None) -> "GradeThresholds":
        """``cos_warn=0.9999,abs_warn=1e-5`` -> the defaults with those replaced (ValueError when bad)."""
        if not text or not text.strip():
            return cls()
        values: dict[str, float] = {}
        for part in text.split(","):
            if not part.strip():
                continue
            name, sep, value = part.partition("=")
            values[name.strip()] = value.strip() if sep else ""  # type: ignore[assignment]
        return cls().with_overrides(values)

    def with_overrides(self, values: Mapping[str, Any]) -> "GradeThresholds":
        """A copy with some bounds replaced (ValueError on an unknown name or a non-number)."""
        known = {f.name for f in fields(self)}
        out: dict[str, float] = {}
        for name, value in values.items():
            if name not in known:
                raise ValueError(f"unknown threshold {name!r} (known: {', '.join(sorted(known))})")
            try:
                v = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"threshold {name} needs a number, got {value!r}") from None
            if not math.isfinite(v):
                raise ValueError(f"threshold {name} must be finite, got {value!r}")
            out[name] = v
        return replace(self, **out)

    def to_dict(self) -> dict[str, float]:
        """Plain dict."""
        return asdict(self)


def as_grade_thresholds(value: "GradeThresholds | Mapping[str, Any] | str | None") -> GradeThresholds:
    """Grade thresholds from an object, a dict of overrides or ``name=value,...`` text."""
    if value is None:
        return GradeThresholds()
    if isinstance(value, GradeThresholds):
        return value
    if isinstance(value, str):
        return GradeThresholds.parse(value)
    return GradeThresholds().with_overrides(value)


def _g(v: float) -> str:
    return f"{v:.6g}"


def grade(outcome: Outcome, th: GradeThresholds, floats_may_differ: bool = False) -> tuple[str, str]:
    """(grade, reason) of a compared pair (``floats_may_differ``: two float dtypes are not an error, as when
    a bfloat16 run is graded against a float32 one at bfloat16's precision)."""
    if outcome.error:
        return ERROR, outcome.error
    if outcome.shape_mismatch:
        return ERROR, f"shape {outcome.shape_a} vs {outcome.shape_b}"
    errors: list[str] = []
    if outcome.dtype_a and outcome.dtype_b and outcome.dtype_a != outcome.dtype_b and not (
            floats_may_differ and is_float(outcome.dtype_a) and is_float(outcome.dtype_b)):
        errors.append(f"dtype {outcome.dtype_a} vs {outcome.dtype_b}")
    if outcome.only_a:
        errors.append(f"NaN/Inf on a only ({outcome.only_a} element{'s' * (outcome.only_a != 1)})")
    if outcome.only_b:
        errors.append(f"NaN/Inf on b only ({outcome.only_b} element{'s' * (outcome.only_b != 1)})")
    if outcome.nonfinite_differ:
        errors.append(f"different NaN/Inf on the two sides ({outcome.nonfinite_differ} element"
                      f"{'s' * (outcome.nonfinite_differ != 1)})")
    m = outcome.metrics
    if m is None and outcome.stat_diff is not None:
        return _grade_statistics(outcome.stat_diff, errors, th)
    if m is None:
        return ERROR, "; ".join(errors) or "no metrics"
    if not m.finite:
        errors.append("values too large to compare (a metric overflowed)")
    c, x = m.cosine, m.max_abs_err
    if c < th.cos_error and x > th.abs_error:
        errors.append(f"cosine {_g(c)} < {_g(th.cos_error)} and max_abs_err {_g(x)} > {_g(th.abs_error)}")
    elif c < th.cos_fail:
        errors.append(f"cosine {_g(c)} < {_g(th.cos_fail)}")
    if x > th.abs_fail:
        errors.append(f"max_abs_err {_g(x)} > {_g(th.abs_fail)}")
    if errors:
        return ERROR, "; ".join(errors)
    warnings: list[str] = []
    if c < th.cos_warn:
        warnings.append(f"cosine {_g(c)} < {_g(th.cos_warn)}")
    if x > th.abs_warn:
        warnings.append(f"max_abs_err {_g(x)} > {_g(th.abs_warn)}")
    if m.one_thousandth < th.ratio_warn:
        warnings.append(f"one_thousandth {_g(m.one_thousandth)} < {_g(th.ratio_warn)}")
    if warnings:
        return WARNING, "; ".join(warnings)
    extra = f" ({outcome.nonfinite_both} NaN/Inf on both sides)" if outcome.nonfinite_both else ""
    return PASS, ("identical" if outcome.identical else "within thresholds") + extra


def _grade_statistics(diff: tuple[str, float, float, float], errors: list[str], th: GradeThresholds) -> tuple[str, str]:
    name, a, b, rel = diff
    what = f"{name} {_g(a)} vs {_g(b)} (relative difference {_g(rel)})"
    if rel > th.stat_error:
        errors.append(f"statistics differ: {what} > {_g(th.stat_error)}")
    if errors:
        return ERROR, "; ".join(errors) + " [from statistics: values not stored]"
    if rel > th.stat_warn:
        return WARNING, f"statistics differ: {what} > {_g(th.stat_warn)} [from statistics: values not stored]"
    return PASS, ("statistics equal" if rel == 0 else f"statistics within {_g(th.stat_warn)}") + \
        " (values not stored: equal statistics do not prove equal values)"
