"""Statistics-only comparison: a side without values (a statistics-only dump) is compared by exact digests,
else by the value statistics both sides stored."""
from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, Mapping

from ..formats.base import TensorSource
from ..stats import service
from .outcome import Metrics, Outcome


# Value statistics compared when a side has no values (those a statistics-only dump may store).
_STAT_COMPARED = ("max", "min", "mean", "l2norm", "abs_mean", "std")
_NONFINITE_COUNTS = ("nan", "pos_inf", "neg_inf")


def compare_digests(src_a: TensorSource, src_b: TensorSource, out: Outcome) -> Outcome:
    """A side without values: equal exact digests are identical values; otherwise the statistics
    both sides stored say how far apart they are (an error only when they share none)."""
    da, db = src_a.digest(), src_b.digest()
    if da is not None and da == db and out.dtype_a == out.dtype_b:
        n = math.prod(out.shape_a or ())
        out.metrics = Metrics(1.0, 0.0, 0.0, 0.0, 1.0, 1.0) if n else None
        out.identical = True
        return out
    if compare_statistics(_stats_of(src_a), _stats_of(src_b), out):
        return out
    missing = src_a if not src_a.has_values else src_b
    out.error = str(missing._no_values())
    if da is not None and db is not None:
        out.error += " (their digests differ)"
    return out


def _stats_of(src: TensorSource) -> Mapping[str, Any]:
    """Stored statistics, or (a side with values) computed from the values."""
    stored = src.stored_stats()
    if stored:
        return stored
    if not src.has_values:
        return {}
    return asdict(service.compute(src)[0])


def _magnitude(s: Mapping[str, Any]) -> float:
    """A typical element size: the root mean square, else the mean of |x|, else the larger extreme."""
    def num(k: str) -> float | None:
        v = s.get(k)
        return float(v) if v is not None and math.isfinite(v) else None

    l2, n = num("l2norm"), num("count")
    if l2 is not None and n:
        return l2 / math.sqrt(n)
    am = num("abs_mean")
    if am is not None:
        return abs(am)
    ext = [abs(v) for v in (num("max"), num("min")) if v is not None]
    return max(ext, default=0.0)


def compare_statistics(sa: Mapping[str, Any], sb: Mapping[str, Any], out: Outcome) -> bool:
    """Fill ``out.stat_diff`` (and one-sided NaN/Inf) from two sets of statistics; False when they
    share no value statistic."""
    def count(s: Mapping[str, Any]) -> int | None:
        vals = [s.get(k) for k in _NONFINITE_COUNTS]
        return None if all(v is None for v in vals) else int(sum(v or 0 for v in vals))

    ca, cb = count(sa), count(sb)
    if ca is not None and cb is not None:
        if ca and not cb:
            out.only_a = ca
        elif cb and not ca:
            out.only_b = cb
    # Differences are relative to the tensor's magnitude, not only to the statistic: a mean near
    # zero (a centred weight) would make rounding noise look like a large relative change.
    floor = max(_magnitude(sa), _magnitude(sb))
    worst: tuple[str, float, float, float] | None = None
    for name in _STAT_COMPARED:
        a, b = sa.get(name), sb.get(name)
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
            continue
        a, b = float(a), float(b)
        scale = max(abs(a), abs(b), floor)
        rel = abs(a - b) / scale if scale > 0 else 0.0
        if worst is None or rel > worst[3]:
            worst = (name, a, b, rel)
    if worst is None:
        return False
    out.stat_diff = worst
    return True
