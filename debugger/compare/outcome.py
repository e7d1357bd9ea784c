"""What comparing two tensors finds: msprobe's six metrics and the outcome that carries them.

For a target tensor N (side a) and a baseline B (side b), element by element:

- ``cosine``: N.B / (|N| |B|); 1.0 when both are all zeros, 0.0 when only one is. It is computed as
  ``1 - (|N-B|^2 - (|N| - |B|)^2) / (2 |N| |B|)``, algebraically the same value, so that float32
  partial sums still give 1 - cos to a few significant digits for cosines within 1e-12 of 1.
- ``max_abs_err``: max |N - B|.
- ``max_rel_err``: max |N - B| / |B|. Where B is exactly 0 the denominator is the machine epsilon
  of B's dtype (float64's for integer and bool tensors), as msprobe does: 0 vs 0 gives 0, x vs 0
  gives |x| / eps (large, but finite).
- ``euclidean``: the L2 norm of N - B.
- ``one_thousandth`` / ``five_thousandths``: the share of elements whose relative error (above) is
  below 0.001 / 0.005.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

METRIC_NAMES = ("cosine", "max_abs_err", "max_rel_err", "euclidean", "one_thousandth", "five_thousandths")


@dataclass(frozen=True, slots=True)
class Metrics:
    """msprobe's six metrics of one pair (see the module docstring)."""

    cosine: float
    max_abs_err: float
    max_rel_err: float
    euclidean: float
    one_thousandth: float
    five_thousandths: float

    def to_dict(self) -> dict[str, float | None]:
        """JSON-ready: a value that overflowed to Inf or NaN becomes None."""
        return {n: (v if math.isfinite(v) else None) for n in METRIC_NAMES for v in (getattr(self, n),)}

    @property
    def finite(self) -> bool:
        """Whether every metric is a finite number."""
        return all(math.isfinite(getattr(self, n)) for n in METRIC_NAMES)


IDENTICAL = Metrics(1.0, 0.0, 0.0, 0.0, 1.0, 1.0)


@dataclass(slots=True)
class Outcome:
    """What comparing two tensors found: plain data, it crosses the process boundary."""

    metrics: Metrics | None = None
    identical: bool = False          # equal values (byte-identical files, or only +0 vs -0)
    only_a: int = 0                  # elements non-finite on a where b is finite
    only_b: int = 0                  # ... on b where a is finite
    nonfinite_differ: int = 0        # non-finite on both sides, but different (NaN vs Inf, +Inf vs -Inf)
    nonfinite_both: int = 0          # the same NaN/Inf on both sides (left out of the metrics)
    dtype_a: str = ""
    dtype_b: str = ""
    shape_a: tuple[int, ...] | None = None
    shape_b: tuple[int, ...] | None = None
    error: str | None = None         # a file could not be read
    nbytes: int = 0                  # data bytes read (both sides)
    # no values on a side: the statistic that differs most, (name, on a, on b, relative difference)
    stat_diff: tuple[str, float, float, float] | None = None

    @property
    def shape_mismatch(self) -> bool:
        """Whether both shapes are known and differ."""
        return self.shape_a is not None and self.shape_b is not None and self.shape_a != self.shape_b
