"""Per-file and per-pair computations run by scan workers; plain data in, plain data out."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import DumpError
from ..stats import CHUNK, Stats, compute_stats
from ..tensors import read_npy

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


def run_file_task(task: FileTask) -> FileResult:
    """Read one file once and compute what the task asks."""
    try:
        a = read_npy(task.path)
        res = FileResult()
        if task.base or task.ranges:
            res.stats, res.ranges = compute_stats(a, tuple(sorted(task.ranges)))
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
    x = np.asarray(a)
    if x.ndim < 2:
        x = x.reshape(1, -1)
    n = x.shape[0]
    flat = x.reshape(n, -1)
    units = flat.shape[1]
    if units == 0:
        return 0.0
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
    c = cur.reshape(-1)
    p = prev.reshape(-1)
    total = 0.0
    excess = {r: -np.inf for r in task.rtols}
    for i in range(0, c.size, CHUNK):
        cc = np.asarray(c[i:i + CHUNK], dtype=np.float64)
        pc = np.asarray(p[i:i + CHUNK], dtype=np.float64)
        d = np.abs(cc - pc)
        total += float(d.sum())
        ap = np.abs(pc)
        for r in task.rtols:
            excess[r] = max(excess[r], float((d - r * ap).max()))
    if c.size == 0:
        return PairResult(0.0, {r: 0.0 for r in task.rtols})
    return PairResult(total / c.size, excess)
