"""One pass over a tensor -> a Stats record; chunked so memory stays bounded for any size."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Iterable, Mapping

import numpy as np

# Elements per chunk: 256 Ki elements (1 MiB of float32) keeps every pass over a chunk in the
# CPU cache, so the several reductions per chunk cost about one read of the tensor.
CHUNK = 1 << 18

STAT_NAMES = ("count", "nan", "pos_inf", "neg_inf", "zeros", "positives", "negatives",
              "min", "max", "mean", "abs_mean", "std", "l2norm")
# The statistics that count elements (integers); the others are values (None when no element is finite).
COUNT_NAMES = ("count", "nan", "pos_inf", "neg_inf", "zeros", "positives", "negatives")


@dataclass(frozen=True)
class Stats:
    """Statistics of one tensor; value statistics are over finite elements (None when none)."""

    count: int
    nan: int
    pos_inf: int
    neg_inf: int
    zeros: int
    positives: int
    negatives: int
    min: float | None
    max: float | None
    mean: float | None
    abs_mean: float | None
    std: float | None        # sample standard deviation (ddof=1), as MindInsight
    l2norm: float | None

    @property
    def has_nonfinite(self) -> bool:
        """Whether any element is NaN or +-Inf."""
        return bool(self.nan or self.pos_inf or self.neg_inf)

    @property
    def finite(self) -> int:
        """Number of finite elements."""
        return self.count - self.nan - self.pos_inf - self.neg_inf

    @property
    def zero_percentage(self) -> float:
        """Percentage of elements equal to zero."""
        return 100.0 * self.zeros / self.count if self.count else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Stats":
        """Inverse of :meth:`to_dict`."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: d.get(k) for k in names})  # type: ignore[arg-type]

    @classmethod
    def from_stored(cls, d: Mapping[str, float]) -> "Stats":
        """Statistics a dump stores (some of :data:`STAT_NAMES`): counts as ints, absent names None."""
        return cls(**{n: (int(d[n]) if n in COUNT_NAMES else float(d[n])) if n in d and d[n] is not None
                      else None for n in STAT_NAMES})  # type: ignore[arg-type]


# numba's one-pass kernel for float32/float64 chunks (sum, sum of squares, |x| sum, zeros, positives,
# min, max): None until loaded, False when numba is missing.
Kernel = Callable[[np.ndarray, np.ndarray], tuple[float, float, float, int, int, float, float]]
_kernel: Kernel | None | bool = None
_KERNEL_BITS = {np.dtype(np.float32): np.dtype(np.int32), np.dtype(np.float64): np.dtype(np.int64)}


def compiled_kernel() -> Kernel | None:
    """The one-pass compiled kernel for float chunks (numba, installed with ``tdbg[torch]``), loaded
    once per process (about 1 s); None without numba."""
    global _kernel
    if _kernel is None:
        try:
            from .kernel import one_pass   # local: numba is optional and costs ~1 s to start (see its docstring)
        except ImportError:      # no numba, or its JIT disabled
            _kernel = False
        else:
            _kernel = one_pass
    return _kernel or None


def compiled_update() -> Any:
    """The compiled one-pass update statistics (:func:`update_stats` in one pass over two float
    arrays; see stats_kernel.update_pass), loaded with :func:`compiled_kernel`; None without numba."""
    if compiled_kernel() is None:
        return None
    from .kernel import update_pass   # local: as compiled_kernel
    return update_pass


class _Part:
    """The statistics of one chunk, for :class:`_StatsAccumulator` to merge in chunk order."""

    __slots__ = ("count", "nan", "pos_inf", "neg_inf", "zeros", "positives", "n", "mean", "m2",
                 "abs_sum", "min", "max")

    def __init__(self, chunk: np.ndarray, kernel: Kernel | None = None) -> None:
        # Called under np.errstate(over="ignore", invalid="ignore") (stats_of_chunks).
        # Float chunks stay in their own precision (float16 is widened to float32): SIMD sums
        # (einsum, 3x faster than np.add.reduce) and BLAS dot products are accurate to ~1e-7 and
        # several times faster than float64.
        chunk = chunk.reshape(-1)            # readers may hand any shape
        self.count = chunk.size
        self.nan = self.pos_inf = self.neg_inf = self.zeros = self.positives = self.n = 0
        kind = chunk.dtype.kind
        if kind == "b":
            chunk = chunk.view(np.uint8)
            kind = "u"
        elif kind == "c":       # complex: the statistics of the magnitudes, NaN and Inf counted as a float's
            chunk = np.abs(chunk)
            kind = "f"
        if kind == "f" and chunk.dtype.itemsize < 4:
            chunk = chunk.astype(np.float32)
        elif kind in "iu":
            chunk = chunk.astype(np.float64)
        if kernel is not None and chunk.dtype in _KERNEL_BITS and chunk.flags.c_contiguous \
                and chunk.size and self._from_kernel(kernel, chunk):
            return
        if kind == "f":
            s = float(np.einsum("i->", chunk))   # Inf, NaN or an overflowing sum: handled below
            if not math.isfinite(s):
                finite = np.isfinite(chunk)
                if not finite.all():
                    self.nan = int(np.count_nonzero(np.isnan(chunk)))
                    self.pos_inf = int(np.count_nonzero(np.isposinf(chunk)))
                    self.neg_inf = int(np.count_nonzero(np.isneginf(chunk)))
                    chunk = chunk[finite]
                s = float(np.add.reduce(chunk, dtype=np.float64))  # a finite float32 sum can overflow
        elif kind in "iu":
            s = float(np.add.reduce(chunk))
        else:  # complex and the like: magnitudes
            chunk = np.abs(chunk).astype(np.float64)
            s = float(np.add.reduce(chunk))
        n = self.n = chunk.size
        if n == 0:
            return
        lo = self.min = float(chunk.min())
        hi = self.max = float(chunk.max())
        # A chunk of one sign (what a ReLU or a softmax makes) needs no pass for its positives or its
        # absolute sum: they follow from the zeros and the sum; and none for its zeros when 0 is
        # outside [min, max].
        sign = 1.0 if lo >= 0 else -1.0 if hi <= 0 else 0.0
        if lo > 0 or hi < 0:
            self.zeros = 0
        else:
            flags = np.equal(chunk, 0)
            self.zeros = int(np.count_nonzero(flags))
        if sign:
            self.positives = n - self.zeros if sign > 0 else 0
        else:
            self.positives = int(np.count_nonzero(np.greater(chunk, 0, out=flags)))
        m = self.mean = s / n
        # The sum of squared deviations as sum(x^2) - n*mean^2 (one BLAS pass, no temporary) when
        # the mean is small beside the spread, so the subtraction loses at most 2 bits; otherwise
        # (and for an overflowing sum of squares) centred first.
        sq = float(np.dot(chunk, chunk))
        m2 = sq - n * m * m
        d = None
        if not m2 > 0.25 * sq:
            d = np.subtract(chunk, chunk.dtype.type(m))
            m2 = float(np.dot(d, d))
        if sign:
            abs_sum = sign * s
        else:
            d = np.abs(chunk, out=d)
            abs_sum = float(np.einsum("i->", d))
        if not (math.isfinite(m2) and math.isfinite(abs_sum)):
            # finite values near the float32 limit: their squares or sums overflow float32
            x = chunk.astype(np.float64)
            dx = x - m
            m2 = float(np.dot(dx, dx))
            abs_sum = float(np.add.reduce(np.abs(x)))
        self.m2 = m2
        self.abs_sum = abs_sum

    def _from_kernel(self, kernel: Kernel, chunk: np.ndarray) -> bool:
        """The statistics of a float chunk from the compiled kernel; False (nothing set) for a chunk
        with a non-finite element, which numpy's passes count."""
        s, sq, abs_sum, zeros, positives, lo, hi = kernel(chunk, chunk.view(_KERNEL_BITS[chunk.dtype]))
        if not math.isfinite(sq):     # NaN or Inf anywhere (or float64 squares past the limit)
            return False
        n = chunk.size
        m = s / n
        m2 = sq - n * m * m
        # float64 sums of squares: sum(x^2) - n*mean^2 keeps 30 bits or more while it is at least
        # 1e-6 of sum(x^2); a mean further from zero beside the spread takes one centred pass more.
        if not m2 >= 1e-6 * sq:
            d = np.subtract(chunk, chunk.dtype.type(m))   # in the chunk's precision, as numpy's path
            m2 = float(np.dot(d, d))
            if not math.isfinite(m2):
                return False
        self.n = n
        self.min = lo
        self.max = hi
        self.zeros = zeros
        self.positives = positives
        self.mean = m
        self.m2 = m2
        self.abs_sum = abs_sum
        return True


class _StatsAccumulator:
    """Mergeable partial statistics (Chan et al. for the variance)."""

    def __init__(self) -> None:
        self.count = self.nan = self.pos_inf = self.neg_inf = self.zeros = 0
        self.positives = self.negatives = 0
        self.n = 0               # finite elements
        self.mean = 0.0
        self.m2 = 0.0
        self.abs_sum = 0.0
        self.min = math.inf
        self.max = -math.inf

    def merge(self, p: _Part) -> None:
        self.count += p.count
        self.nan += p.nan
        self.pos_inf += p.pos_inf
        self.neg_inf += p.neg_inf
        n = p.n
        if n == 0:
            return
        self.zeros += p.zeros
        self.positives += p.positives
        self.negatives += n - p.zeros - p.positives
        self.abs_sum += p.abs_sum
        self.min = min(self.min, p.min)
        self.max = max(self.max, p.max)
        total = self.n + n
        delta = p.mean - self.mean
        self.m2 += p.m2 + delta * delta * self.n * n / total
        self.mean += delta * n / total
        self.n = total

    def result(self) -> Stats:
        if self.n == 0:
            return Stats(self.count, self.nan, self.pos_inf, self.neg_inf, self.zeros, self.positives,
                         self.negatives, None, None, None, None, None, None)
        std = math.sqrt(self.m2 / (self.n - 1)) if self.n > 1 else 0.0
        l2 = math.sqrt(max(self.m2 + self.mean * self.mean * self.n, 0.0))
        return Stats(self.count, self.nan, self.pos_inf, self.neg_inf, self.zeros, self.positives,
                     self.negatives, self.min, self.max, self.mean, self.abs_sum / self.n, std, l2)


def c_order_chunks(a: np.ndarray) -> Iterable[np.ndarray]:
    """``a``'s elements in C order, CHUNK at a time: the pieces a dump's tensor source gives
    (``TensorSource.chunks(CHUNK)``), so statistics of values in memory are those of the same values read
    from a file, to the bit (float32 sums are taken chunk by chunk)."""
    flat = a.reshape(-1) if a.ndim else a.reshape(1)
    for i in range(0, flat.size, CHUNK):
        yield flat[i:i + CHUNK]


def _flat_chunks(a: np.ndarray):  # type: ignore[no-untyped-def]
    flat = a.reshape(-1, order="A") if a.ndim else a.reshape(1)
    for i in range(0, flat.size, CHUNK):
        yield np.asarray(flat[i:i + CHUNK])


def quick_stats(a: np.ndarray) -> tuple[float, ...] | None:
    """:func:`tensor_stats` of a contiguous float32/float64 array of one chunk with only finite
    elements, as a tuple in STAT_NAMES order, from one call of the compiled kernel (the same numbers,
    for a fraction of the Python work: the recorder calls this once per operator output); None
    where :func:`tensor_stats` is needed (no kernel, another dtype or layout, a non-finite element)."""
    kernel = compiled_kernel()
    n = a.size
    bits = _KERNEL_BITS.get(a.dtype)
    if kernel is None or bits is None or not 0 < n <= CHUNK or not a.flags.c_contiguous:
        return None
    flat = a.reshape(-1)
    s, sq, abs_sum, zeros, positives, lo, hi = kernel(flat, flat.view(bits))
    if not math.isfinite(sq):
        return None
    m = s / n
    m2 = sq - n * m * m
    if not m2 >= 1e-6 * sq:      # as _Part._from_kernel: one centred pass more
        with np.errstate(over="ignore", invalid="ignore"):
            d = np.subtract(flat, flat.dtype.type(m))
            m2 = float(np.dot(d, d))
        if not math.isfinite(m2):
            return None
    # _StatsAccumulator.result after merging this one chunk (the same operations, the same bits)
    mean = 0.0 + (m - 0.0) * n / n
    std = math.sqrt(m2 / (n - 1)) if n > 1 else 0.0
    l2 = math.sqrt(max(m2 + mean * mean * n, 0.0))
    return (n, 0, 0, 0, zeros, positives, n - zeros - positives, lo, hi, mean, abs_sum / n, std, l2)


def compute_stats(a: np.ndarray, ranges: tuple[tuple[float, float], ...] = (), *, compiled: bool = False
                  ) -> tuple[Stats, dict[tuple[float, float], int]]:
    """Statistics of ``a`` and, for each closed range [lo, hi], how many elements fall inside."""
    return stats_of_chunks(_flat_chunks(a), ranges, compiled=compiled)


def stats_of_chunks(chunks: Iterable[np.ndarray], ranges: tuple[tuple[float, float], ...] = (), *,
                    compiled: bool = False) -> tuple[Stats, dict[tuple[float, float], int]]:
    """:func:`compute_stats` over a tensor given as 1-D chunks (each used only until the next arrives).
    ``compiled``: float chunks in one pass of :func:`compiled_kernel` (float64 sums: equal to numpy's
    float32 ones to rounding); scans leave it off so that every process gives the same bits."""
    kernel = compiled_kernel() if compiled else None
    acc = _StatsAccumulator()
    counts = {r: 0 for r in ranges}
    # One errstate for the whole tensor, not one per reduction: Inf, NaN and overflowing float32
    # sums are handled by _Part itself (a warning would say nothing more).
    with np.errstate(over="ignore", invalid="ignore"):
        for c in chunks:
            acc.merge(_Part(c, kernel))
            if ranges and c.dtype.kind in "biuf":
                for lo, hi in ranges:
                    counts[(lo, hi)] += int(np.count_nonzero((c >= lo) & (c <= hi)))
    return acc.result(), counts


def stats_in_threads(a: np.ndarray, submit: Callable[..., Any]) -> Stats:
    """:func:`tensor_stats` with ``compiled=True`` (the very numbers: the chunks' parts are merged in
    order), the chunks read two at a time: every other one by ``submit(fn, chunk)`` (a thread pool's
    submit; the kernel releases the GIL), the rest here. For a tensor of several chunks."""
    kernel = compiled_kernel()

    def part(c: np.ndarray) -> _Part:
        with np.errstate(over="ignore", invalid="ignore"):
            return _Part(c, kernel)

    chunks = list(_flat_chunks(a))
    theirs = [submit(part, c) for c in chunks[1::2]]
    ours = [part(c) for c in chunks[0::2]]
    acc = _StatsAccumulator()
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(len(chunks)):
            acc.merge(ours[i // 2] if i % 2 == 0 else theirs[i // 2].result())
    return acc.result()


def tensor_stats(a: np.ndarray, *, compiled: bool = False) -> Stats:
    """Statistics of ``a`` (``compiled``: as in :func:`stats_of_chunks`)."""
    return compute_stats(a, compiled=compiled)[0]


def histogram(a: np.ndarray, bins: int = 40) -> dict[str, list[float]]:
    """A histogram of the finite values: bin edges and counts."""
    flat = np.asarray(a).reshape(-1)
    if flat.dtype.kind == "b":
        flat = flat.astype(np.uint8)
    if flat.dtype.kind == "f":
        flat = flat[np.isfinite(flat)]
    if flat.size == 0:
        return {"edges": [], "counts": []}
    counts, edges = np.histogram(flat.astype(np.float64), bins=bins)
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


# -- statistics that answer a watchpoint without values ---------------------------------------------
# Stored beside STAT_NAMES for the tensors they apply to (NaN, read as absent, elsewhere):
#   saturated, saturated_tolerance: outputs of a tanh/sigmoid layer within the tolerance of an
#       asymptote (closed ranges [lo, lo + tol] and [hi - tol, hi]), and that tolerance;
#   update_abs_mean, update_max: mean and max of |cur - prev| of a trained weight against its value
#       before this iteration's update (the value at the end of the iteration before);
#   update_excess, update_rtol: max(|cur - prev| - rtol * |prev|) at that rtol (unchanged within
#       rtol/atol exactly when update_excess <= atol);
#   previous_abs_mean: mean |prev| (the denominator of the update ratio).
EXTRA_STAT_NAMES = ("saturated", "saturated_tolerance", "update_abs_mean", "update_max", "update_excess",
                    "update_rtol", "previous_abs_mean")
SATURATION_TOLERANCE = 1e-3      # the recommended activation_saturated_layer's tolerance
UNCHANGED_RTOL = 1e-5            # the recommended weight_not_changed's rtol
ASYMPTOTES = {"tanh": (-1.0, 1.0), "sigmoid": (0.0, 1.0)}


def saturated_count(a: np.ndarray, activation: str, tolerance: float = SATURATION_TOLERANCE) -> dict[str, float]:
    """``saturated`` and ``saturated_tolerance`` of a tanh/sigmoid output (compared in its own dtype,
    as a scan counts ranges)."""
    lo, hi = ASYMPTOTES[activation]
    flat = np.asarray(a).reshape(-1)
    n = int(np.count_nonzero((flat >= lo) & (flat <= lo + tolerance))) + \
        int(np.count_nonzero((flat >= hi - tolerance) & (flat <= hi)))
    return {"saturated": float(n), "saturated_tolerance": float(tolerance)}


def update_stats(cur: np.ndarray, prev: np.ndarray, rtol: float = UNCHANGED_RTOL) -> dict[str, float]:
    """The update statistics of a weight from its value now and before (float64, as a scan compares);
    NaN where a value is not finite (read as absent)."""
    c = np.asarray(cur, np.float64).reshape(-1)
    p = np.asarray(prev, np.float64).reshape(-1)
    if c.size == 0 or c.shape != p.shape:
        return {}
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(c - p)
        ap = np.abs(p)
        vals = {"update_abs_mean": float(d.mean()), "update_max": float(d.max()),
                "update_excess": float((d - ap * rtol).max()), "previous_abs_mean": float(ap.mean())}
    if not (np.isfinite(c).all() and np.isfinite(p).all()):
        vals = {k: math.nan for k in vals}
    return {**vals, "update_rtol": float(rtol)}
