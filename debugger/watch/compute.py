"""Per-file and per-pair computations run by scan workers; plain data in, plain data out."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np

from ..errors import DumpError
from ..stats import CHUNK, Stats, stats_of_chunks
from ..tensors import read_exact, read_npy

# A unit-activity spec: (mode, lo, hi, threshold_inactivity); mode "inside" counts a sample as
# active when lo < x < hi, "positive" when x > 0.
UnitSpec = tuple[str, float, float, float]


@dataclass
class FileTask:
    """Everything wanted from one tensor file, computed in one read."""

    path: str
    base: bool = True
    ranges: set[tuple[float, float]] = field(default_factory=set)
    units: set[UnitSpec] = field(default_factory=set)


@dataclass
class FileResult:
    """What a FileTask produced (or the error that stopped it)."""

    stats: Stats | None = None
    ranges: dict[tuple[float, float], int] = field(default_factory=dict)
    units: dict[UnitSpec, float] = field(default_factory=dict)
    error: str | None = None


@dataclass
class PairTask:
    """Differences between a tensor and its previous value."""

    cur: str
    prev: str
    rtols: set[float] = field(default_factory=set)


@dataclass
class PairResult:
    """mean|cur - prev| and, per rtol, max(|cur - prev| - rtol * |prev|)."""

    diff_abs_mean: float | None = None
    excess: dict[float, float] = field(default_factory=dict)
    error: str | None = None


# Large files come back from read_npy memory-mapped. Every page of a map that a pass touches stays
# in the process's resident set until the map goes, so a pass over a 64 MiB tensor would add 64 MiB:
# such files are read instead, one piece at a time through one buffer. Passes that work in float64
# with several temporaries (pairs, units) take pieces of _PIECE elements.
_PIECE = CHUNK // 4


def _layout(a: np.ndarray) -> str:
    """The element order of an array's buffer ("F" for Fortran-ordered files, else "C")."""
    return "F" if a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous else "C"


def _read_pieces(a: np.memmap, sizes: Iterable[int], largest: int) -> Iterator[np.ndarray]:
    """Consecutive pieces (of at most ``largest`` elements) of a memory-mapped file's elements, read
    through one reused buffer."""
    path, dtype = str(a.filename), a.dtype
    buf = np.empty(min(a.size, largest), dtype)
    raw = buf.view(np.uint8).data
    with open(path, "rb", buffering=0) as f:
        f.seek(a.offset)
        for k in sizes:
            read_exact(f, raw, k * dtype.itemsize, path)
            yield buf[:k]


def _chunks(a: np.ndarray, order: str, n: int = CHUNK) -> Iterator[np.ndarray]:
    """The elements of ``a`` in ``order``, ``n`` at a time (a memory-mapped file is read, not mapped)."""
    if isinstance(a, np.memmap) and a.size and _layout(a) == order:
        yield from _read_pieces(a, (min(n, a.size - i) for i in range(0, a.size, n)), n)
        return
    flat = a.reshape(-1, order=order) if a.ndim else a.reshape(1)  # type: ignore[call-overload]
    for i in range(0, flat.size, n):
        yield np.asarray(flat[i:i + n])


def run_file_task(task: FileTask) -> FileResult:
    """Read one file once and compute what the task asks."""
    try:
        a = read_npy(task.path)
        res = FileResult()
        if task.base or task.ranges:
            res.stats, res.ranges = stats_of_chunks(_chunks(a, _layout(a)), tuple(sorted(task.ranges)))
        for spec in task.units:
            res.units[spec] = inactive_unit_percentage(a, spec)
        return res
    except DumpError as exc:
        return FileResult(error=str(exc))
    except (OSError, ValueError) as exc:
        return FileResult(error=f"{task.path}: {exc}")


def inactive_unit_percentage(a: np.ndarray, spec: UnitSpec) -> float:
    """Percent of units (all axes but the batch axis 0) active on too few samples."""
    mode, lo, hi, thr = spec
    n = a.shape[0] if a.ndim >= 2 else 1
    units = a.size // n if n else 0
    if units == 0:
        return 0.0
    if isinstance(a, np.memmap) and _layout(a) == "C" and units <= CHUNK:
        # a large file: whole rows (samples) at a time, counting each unit's active samples
        rows = max(1, _PIECE // units)
        counts = np.zeros(units, np.int64)
        for piece in _read_pieces(a, (min(rows, n - i) * units for i in range(0, n, rows)), rows * units):
            c = piece.reshape(-1, units).astype(np.float64)
            active = (c > 0) if mode == "positive" else ((c > lo) & (c < hi))
            counts += active.sum(axis=0)
        return 100.0 * int(np.count_nonzero(100.0 * counts / n < thr)) / units
    x = np.asarray(a)
    if x.ndim < 2:
        x = x.reshape(1, -1)
    flat = x.reshape(n, -1)
    inactive = 0
    step = max(1, CHUNK // max(n, 1))
    for j in range(0, units, step):
        c = np.asarray(flat[:, j:j + step], dtype=np.float64)
        active = (c > 0) if mode == "positive" else ((c > lo) & (c < hi))
        pct = 100.0 * active.sum(axis=0) / n
        inactive += int(np.count_nonzero(pct < thr))
    return 100.0 * inactive / units


def run_pair_task(task: PairTask) -> PairResult:
    """Compare a tensor with its previous value in bounded memory."""
    try:
        cur = read_npy(task.cur)
        prev = read_npy(task.prev)
    except DumpError as exc:
        return PairResult(error=str(exc))
    if cur.shape != prev.shape:
        return PairResult(error=f"{task.cur}: shape {cur.shape} differs from the previous {prev.shape}")
    size = cur.size
    if size == 0:
        return PairResult(0.0, {r: 0.0 for r in task.rtols})
    order = _layout(cur) if _layout(cur) == _layout(prev) else "C"
    total = 0.0
    excess = {r: -np.inf for r in task.rtols}
    # Inf - Inf is NaN, and a NaN/Inf in either value makes the checks error records anyway: no warnings.
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            for c, p in zip(_chunks(cur, order, _PIECE), _chunks(prev, order, _PIECE)):
                cc = c.astype(np.float64)
                pc = p.astype(np.float64)
                d = np.abs(np.subtract(cc, pc, out=cc), out=cc)
                total += float(d.sum())
                ap = np.abs(pc, out=pc)
                for r in task.rtols:
                    tmp = np.multiply(ap, r)
                    excess[r] = max(excess[r], float(np.subtract(d, tmp, out=tmp).max()))
    except DumpError as exc:
        return PairResult(error=str(exc))
    return PairResult(total / size, excess)
