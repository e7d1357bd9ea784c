"""Per-file and per-pair computations run by scan workers; plain data in, plain data out."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import DumpError
from ..stats import service
from ..stats.core import CHUNK, Stats
from ..formats.base import TensorSource

# A unit-activity spec: (mode, lo, hi, threshold_inactivity); mode "inside" counts a sample as
# active when lo < x < hi, "positive" when x > 0.
UnitSpec = tuple[str, float, float, float]


@dataclass
class FileTask:
    """Everything wanted from one tensor, computed in one read."""

    source: TensorSource
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

    cur: TensorSource
    prev: TensorSource
    rtols: set[float] = field(default_factory=set)


@dataclass
class PairResult:
    """mean|cur - prev| and, per rtol, max(|cur - prev| - rtol * |prev|)."""

    diff_abs_mean: float | None = None
    excess: dict[float, float] = field(default_factory=dict)
    error: str | None = None


# Passes that work in float64 with several temporaries (pairs, units) take pieces of _PIECE elements.
_PIECE = CHUNK // 4


def run_file_task(task: FileTask) -> FileResult:
    """Read one tensor once and compute what the task asks."""
    src = task.source
    try:
        res = FileResult()
        if task.base or task.ranges:
            res.stats, res.ranges = service.compute(src, tuple(sorted(task.ranges)))
        for spec in task.units:
            res.units[spec] = inactive_unit_percentage(src, spec)
        return res
    except DumpError as exc:
        return FileResult(error=str(exc))
    except (OSError, ValueError) as exc:
        return FileResult(error=f"{src.location}: {exc}")


def inactive_unit_percentage(src: TensorSource, spec: UnitSpec) -> float:
    """Percent of units (all axes but the batch axis 0) active on too few samples."""
    mode, lo, hi, thr = spec
    shape = src.header().shape
    n = shape[0] if len(shape) >= 2 else 1
    size = math.prod(shape)
    units = size // n if n else 0
    if units == 0:
        return 0.0
    if units <= CHUNK:
        # whole rows (samples) at a time, counting each unit's active samples
        rows = max(1, _PIECE // units)
        counts = np.zeros(units, np.int64)
        for piece in src.chunks(rows * units):
            c = piece.reshape(-1, units).astype(np.float64)
            active = (c > 0) if mode == "positive" else ((c > lo) & (c < hi))
            counts += active.sum(axis=0)
        return 100.0 * int(np.count_nonzero(100.0 * counts / n < thr)) / units
    flat = np.asarray(src.array()).reshape(n, -1)   # a unit row over CHUNK elements: column blocks of the map
    inactive = 0
    step = max(1, CHUNK // max(n, 1))
    for j in range(0, units, step):
        c = np.asarray(flat[:, j:j + step], dtype=np.float64)
        active = (c > 0) if mode == "positive" else ((c > lo) & (c < hi))
        pct = 100.0 * active.sum(axis=0) / n
        inactive += int(np.count_nonzero(pct < thr))
    return 100.0 * inactive / units


def pair_mismatch(cur: TensorSource, prev: TensorSource) -> str | None:
    """Why a tensor cannot be compared element by element with its previous value (None when it can)."""
    try:
        hc, hp = cur.header(), prev.header()
    except DumpError as exc:
        return str(exc)
    if hc.shape != hp.shape:
        return f"{cur.location}: shape {hc.shape} differs from the previous {hp.shape}"
    return None


def run_pair_task(task: PairTask) -> PairResult:
    """Compare a tensor with its previous value in bounded memory."""
    mismatch = pair_mismatch(task.cur, task.prev)
    if mismatch:
        return PairResult(error=mismatch)
    hc = task.cur.header()
    if hc.size == 0:
        return PairResult(0.0, {r: 0.0 for r in task.rtols})
    total = 0.0
    excess = {r: -np.inf for r in task.rtols}
    # Inf - Inf is NaN, and a NaN/Inf in either value makes the checks error records anyway: no warnings.
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            for c, p in zip(task.cur.chunks(_PIECE), task.prev.chunks(_PIECE)):
                if c.dtype.kind == "c" or p.dtype.kind == "c":     # complex: the magnitudes of both
                    pc = p.astype(np.complex128)
                    d, ap = np.abs(c.astype(np.complex128) - pc), np.abs(pc)
                else:
                    cc = c.astype(np.float64)
                    pc = p.astype(np.float64)
                    d = np.abs(np.subtract(cc, pc, out=cc), out=cc)
                    ap = np.abs(pc, out=pc)
                total += float(d.sum())
                for r in task.rtols:
                    tmp = np.multiply(ap, r)
                    excess[r] = max(excess[r], float(np.subtract(d, tmp, out=tmp).max()))
    except DumpError as exc:
        return PairResult(error=str(exc))
    return PairResult(total / hc.size, excess)
