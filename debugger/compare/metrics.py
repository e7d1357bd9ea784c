"""Per-pair comparison metrics (msprobe's) in one bounded-memory pass, and their grades.

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

Elements that are NaN or +-Inf on both sides with the same value are left out of the metrics; one
that is non-finite on one side only (or NaN against Inf) makes the pair an error. The pass reads both
files a chunk of :data:`debugger.stats.CHUNK` elements at a time through reused buffers, so memory
stays bounded whatever the tensor size, and byte-identical chunks cost one comparison and one dot
product.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Iterator, Mapping

import numpy as np

from ..errors import DumpError
from ..stats import CHUNK
from ..formats.base import TensorSource

PASS, WARNING, ERROR = "pass", "warning", "error"
GRADES = (PASS, WARNING, ERROR)
METRIC_NAMES = ("cosine", "max_abs_err", "max_rel_err", "euclidean", "one_thousandth", "five_thousandths")


@dataclass(frozen=True)
class Thresholds:
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
    def parse(cls, text: str | None) -> "Thresholds":
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

    def with_overrides(self, values: Mapping[str, Any]) -> "Thresholds":
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


def as_thresholds(value: "Thresholds | Mapping[str, Any] | str | None") -> Thresholds:
    """Thresholds from an object, a dict of overrides or ``name=value,...`` text."""
    if value is None:
        return Thresholds()
    if isinstance(value, Thresholds):
        return value
    if isinstance(value, str):
        return Thresholds.parse(value)
    return Thresholds().with_overrides(value)


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


# -- grading ------------------------------------------------------------------------------------
def _g(v: float) -> str:
    return f"{v:.6g}"


def grade(outcome: Outcome, th: Thresholds) -> tuple[str, str]:
    """(grade, reason) of a compared pair."""
    if outcome.error:
        return ERROR, outcome.error
    if outcome.shape_mismatch:
        return ERROR, f"shape {outcome.shape_a} vs {outcome.shape_b}"
    errors: list[str] = []
    if outcome.dtype_a and outcome.dtype_b and outcome.dtype_a != outcome.dtype_b:
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


def _grade_statistics(diff: tuple[str, float, float, float], errors: list[str], th: Thresholds) -> tuple[str, str]:
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


# -- the pass -----------------------------------------------------------------------------------
def _compute_dtype(da: np.dtype, db: np.dtype) -> np.dtype:
    """float32 when both sides fit it exactly (float32/16, small ints, bool), else float64."""
    def small(d: np.dtype) -> bool:
        return (d.kind == "f" and d.itemsize <= 4) or (d.kind in "biu" and d.itemsize <= 2)
    return np.dtype(np.float32) if small(da) and small(db) else np.dtype(np.float64)


def _real(d: np.dtype) -> np.dtype:
    """Complex tensors are compared as their interleaved real and imaginary parts."""
    return np.dtype(d.char.lower()) if d.kind == "c" else d


def _eps(d: np.dtype) -> float:
    d = _real(d)
    return float(np.finfo(d).eps) if d.kind == "f" else float(np.finfo(np.float64).eps)


_BUFS: dict[tuple[str, str], np.ndarray] = {}
_SUB = CHUNK // 4


def _buf(tag: str, dtype: np.dtype) -> np.ndarray:
    """A reused CHUNK-element buffer per (purpose, dtype) of this process."""
    k = (tag, dtype.str)
    b = _BUFS.get(k)
    if b is None:
        b = _BUFS[k] = np.empty(CHUNK, dtype)
    return b


def _raw_equal(x: np.ndarray, y: np.ndarray) -> bool:
    """Byte equality of two same-dtype chunks (NaN payloads included)."""
    if x.nbytes % 8 == 0 and x.flags.c_contiguous and y.flags.c_contiguous:
        return bool(np.array_equal(x.view(np.uint64), y.view(np.uint64)))
    return bool(np.array_equal(x.view(np.uint8), y.view(np.uint8)))


class _Acc:
    """Running sums and extremes over chunk pairs."""

    __slots__ = ("dd", "aa", "bb", "max_abs", "max_rel", "c1", "c5", "n", "only_a", "only_b", "differ",
                 "both", "identical", "eps")

    def __init__(self, eps: float) -> None:
        self.dd = self.aa = self.bb = 0.0
        self.max_abs = self.max_rel = 0.0
        self.c1 = self.c5 = self.n = 0
        self.only_a = self.only_b = self.differ = self.both = 0
        self.identical = True
        self.eps = eps

    def same(self, x: np.ndarray) -> None:
        """A chunk whose two sides are byte-identical."""
        aa = float(np.dot(x, x))
        n = x.size
        if not math.isfinite(aa):
            fin = np.isfinite(x)
            k = int(np.count_nonzero(fin))
            self.both += n - k
            n = k
            xf = x[fin].astype(np.float64)
            with np.errstate(over="ignore"):
                aa = float(np.dot(xf, xf))
        self.aa += aa
        self.bb += aa
        self.n += n
        self.c1 += n
        self.c5 += n

    def add(self, x: np.ndarray, y: np.ndarray, d: np.ndarray, t: np.ndarray) -> None:
        """A chunk pair in the compute dtype; ``d`` and ``t`` are scratch buffers of its size."""
        with np.errstate(over="ignore", invalid="ignore"):
            np.subtract(x, y, out=d)
            dd, aa, bb = float(np.dot(d, d)), float(np.dot(x, x)), float(np.dot(y, y))
        if not (math.isfinite(dd) and math.isfinite(aa) and math.isfinite(bb)):
            self._add_nonfinite(x, y)
            return
        n = x.size
        self.aa += aa
        self.bb += bb
        self.n += n
        np.abs(d, out=d)
        mx = float(d.max()) if n else 0.0
        if mx == 0.0:
            self.c1 += n
            self.c5 += n
            return
        self.identical = False
        self.dd += dd
        if mx > self.max_abs:
            self.max_abs = mx
        np.abs(y, out=t)
        if float(t.min()) == 0.0:   # zero baselines divide by eps (adding a masked eps beats putmask 5x)
            t += (t == 0) * t.dtype.type(self.eps)
        with np.errstate(over="ignore"):
            np.divide(d, t, out=d)
        r = float(d.max())
        if r > self.max_rel:
            self.max_rel = r
        self.c1 += int(np.count_nonzero(d < 0.001))
        self.c5 += int(np.count_nonzero(d < 0.005))

    def _add_nonfinite(self, x: np.ndarray, y: np.ndarray) -> None:
        fx, fy = np.isfinite(x), np.isfinite(y)
        oa = int(np.count_nonzero(~fx & fy))
        ob = int(np.count_nonzero(fx & ~fy))
        nb = ~fx & ~fy
        if nb.any():
            xs, ys = x[nb], y[nb]
            agree = (xs == ys) | (np.isnan(xs) & np.isnan(ys))
            k = int(np.count_nonzero(agree))
            self.both += k
            self.differ += xs.size - k
        self.only_a += oa
        self.only_b += ob
        if oa or ob or self.differ:
            self.identical = False
        keep = fx & fy
        x64, y64 = x[keep].astype(np.float64), y[keep].astype(np.float64)
        if x64.size == 0:
            return
        with np.errstate(over="ignore", invalid="ignore"):
            self.add_finite64(x64, y64)

    def add_finite64(self, x: np.ndarray, y: np.ndarray) -> None:
        """Finite float64 values (the slow path): overflow to Inf is kept and reported."""
        d = x - y
        n = x.size
        self.aa += float(np.dot(x, x))
        self.bb += float(np.dot(y, y))
        self.n += n
        dd = float(np.dot(d, d))
        ad = np.abs(d)
        mx = float(ad.max())
        if mx == 0.0:
            self.c1 += n
            self.c5 += n
            return
        self.identical = False
        self.dd += dd
        self.max_abs = max(self.max_abs, mx)
        den = np.abs(y)
        den[den == 0] = self.eps
        rel = ad / den
        self.max_rel = max(self.max_rel, float(rel.max()))
        self.c1 += int(np.count_nonzero(rel < 0.001))
        self.c5 += int(np.count_nonzero(rel < 0.005))

    def metrics(self) -> Metrics:
        if self.n == 0:
            return IDENTICAL
        na, nb = math.sqrt(self.aa), math.sqrt(self.bb)
        if self.dd == 0.0 and self.max_abs == 0.0:
            cos = 1.0
        elif na == 0.0 and nb == 0.0:
            cos = 1.0
        elif na == 0.0 or nb == 0.0:
            cos = 0.0
        else:
            cos = 1.0 - (self.dd - (na - nb) ** 2) / (2.0 * na * nb)
            cos = min(1.0, max(-1.0, cos)) if math.isfinite(cos) else cos
        return Metrics(cos, self.max_abs, self.max_rel, math.sqrt(self.dd), self.c1 / self.n, self.c5 / self.n)


def compare_sources(src_a: TensorSource, src_b: TensorSource, fast: bool = True) -> Outcome:
    """Compare two tensors in one chunked pass over both (``fast``: byte-identical chunks short-cut)."""
    try:
        ha, hb = src_a.header(), src_b.header()
        out = Outcome(dtype_a=ha.dtype.name, dtype_b=hb.dtype.name, shape_a=ha.shape, shape_b=hb.shape)
        if ha.shape != hb.shape:
            return out
        if not (src_a.has_values and src_b.has_values):
            return _compare_digests(src_a, src_b, out)
        out.nbytes = ha.nbytes + hb.nbytes
        _run(zip(src_a.chunks(CHUNK), src_b.chunks(CHUNK)), ha.dtype, hb.dtype, out, fast)
        return out
    except DumpError as exc:
        return Outcome(error=str(exc))
    except (OSError, ValueError, MemoryError) as exc:
        return Outcome(error=f"{src_a.location} vs {src_b.location}: {exc}")


# Value statistics compared when a side has no values (those a statistics-only dump may store).
_STAT_COMPARED = ("max", "min", "mean", "l2norm", "abs_mean", "std")
_NONFINITE_COUNTS = ("nan", "pos_inf", "neg_inf")


def _compare_digests(src_a: TensorSource, src_b: TensorSource, out: Outcome) -> Outcome:
    """A side without values: equal exact digests are identical values; otherwise the statistics
    both sides stored say how far apart they are (an error only when they share none)."""
    da, db = src_a.digest(), src_b.digest()
    if da is not None and da == db and out.dtype_a == out.dtype_b:
        n = math.prod(out.shape_a or ())
        out.metrics = Metrics(1.0, 0.0, 0.0, 0.0, 1.0, 1.0) if n else None
        out.identical = True
        return out
    if _compare_statistics(_stats_of(src_a), _stats_of(src_b), out):
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
    from ..stats import stats_of_chunks

    return asdict(stats_of_chunks(src.chunks(CHUNK))[0])


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


def _compare_statistics(sa: Mapping[str, Any], sb: Mapping[str, Any], out: Outcome) -> bool:
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


def compare_arrays(a: np.ndarray, b: np.ndarray, fast: bool = True) -> Outcome:
    """Compare two in-memory (or memory-mapped) arrays, CHUNK elements at a time."""
    a, b = np.asarray(a), np.asarray(b)
    out = Outcome(dtype_a=a.dtype.name, dtype_b=b.dtype.name, shape_a=tuple(a.shape), shape_b=tuple(b.shape),
                  nbytes=a.nbytes + b.nbytes)
    if a.shape != b.shape:
        return out
    fa, fb = a.reshape(-1), b.reshape(-1)
    chunks = ((np.ascontiguousarray(fa[i:i + CHUNK]), np.ascontiguousarray(fb[i:i + CHUNK]))
              for i in range(0, fa.size, CHUNK))
    _run(chunks, a.dtype, b.dtype, out, fast)
    return out


def _run(chunks: Any, da: np.dtype, db: np.dtype, out: Outcome, fast: bool) -> None:
    """Feed chunk pairs (native dtypes) through the accumulator and store the result in ``out``."""
    ct = _compute_dtype(_real(da), _real(db))
    acc = _Acc(_eps(db))
    same_dtype = da == db
    xbuf = ybuf = None
    for ca, cb in chunks:
        if fast and same_dtype and _raw_equal(ca, cb):
            if ca.dtype.kind == "c":
                ca = ca.view(_real(ca.dtype))
            if ca.dtype == ct:
                acc.same(ca)
            else:
                xbuf = _buf("x", ct) if xbuf is None else xbuf
                x = xbuf[:ca.size]
                np.copyto(x, ca, casting="unsafe")
                acc.same(x)
            continue
        if ca.dtype.kind == "c":
            ca, cb = ca.view(_real(ca.dtype)), cb.view(_real(cb.dtype))
        n = ca.size
        if ca.dtype == ct:
            x = ca
        else:
            xbuf = _buf("x", ct) if xbuf is None else xbuf
            x = xbuf[:n]
            np.copyto(x, ca, casting="unsafe")
        if cb.dtype == ct:
            y = cb
        else:
            ybuf = _buf("y", ct) if ybuf is None else ybuf
            y = ybuf[:n]
            np.copyto(y, cb, casting="unsafe")
        # a read chunk is measured in quarter blocks: x, y and the two scratch buffers then stay in
        # a core's L2 cache across the dozen passes (about 30 % faster than whole chunks)
        d, t = _buf("d", ct)[:_SUB], _buf("t", ct)[:_SUB]
        for i in range(0, n, _SUB):
            k = min(_SUB, n - i)
            acc.add(x[i:i + k], y[i:i + k], d[:k], t[:k])
    out.metrics = acc.metrics()
    out.identical = acc.identical and same_dtype
    out.only_a, out.only_b = acc.only_a, acc.only_b
    out.nonfinite_differ, out.nonfinite_both = acc.differ, acc.both


# -- cache records --------------------------------------------------------------------------------
_CACHE_TAG = "cmp1"
_OPTIONAL = ("only_a", "only_b", "nonfinite_differ", "nonfinite_both")


def outcome_to_extras(o: Outcome) -> dict[str, float] | None:
    """The float values a StatsCache keeps of an outcome (None: not worth caching, e.g. an error)."""
    if o.error or o.metrics is None or o.shape_mismatch or o.dtype_a != o.dtype_b:
        return None
    d: dict[str, float] = {n: getattr(o.metrics, n) for n in METRIC_NAMES}
    d["identical"] = 1.0 if o.identical else 0.0
    for n in _OPTIONAL:
        if getattr(o, n):
            d[n] = float(getattr(o, n))
    return d


def cached_outcome(get: Any, key: str) -> Outcome | None:
    """An outcome from cache extras (``get(name) -> float | None``), None when not cached."""
    vals = {}
    for n in (*METRIC_NAMES, "identical"):
        v = get(f"{_CACHE_TAG}|{key}|{n}")
        if v is None:
            return None
        vals[n] = v
    o = Outcome(Metrics(*(float(vals[n]) for n in METRIC_NAMES)), identical=vals["identical"] == 1.0)
    for n in _OPTIONAL:
        v = get(f"{_CACHE_TAG}|{key}|{n}")
        if v is not None:
            setattr(o, n, int(v))
    return o


def cache_names(key: str, extras: Mapping[str, float]) -> Iterator[tuple[str, float]]:
    """(cache key, value) of each extra of an outcome."""
    for n, v in extras.items():
        yield f"{_CACHE_TAG}|{key}|{n}", v


__all__ = ["Thresholds", "Metrics", "Outcome", "grade", "compare_sources", "compare_arrays", "as_thresholds",
           "PASS", "WARNING", "ERROR", "GRADES", "METRIC_NAMES", "IDENTICAL"]
