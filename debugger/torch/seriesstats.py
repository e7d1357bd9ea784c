"""Statistics of many tensors at once for the per-step series (``Recorder(series=True)``).

CPU tensors: every statistic of debugger.stats from one compiled pass over each tensor's own memory
(no copy). Other devices: one (tensors x 13) float64 tensor on the device from a few multi-tensor
(``torch._foreach_*``) kernels, copied to the host later in batches; there the element counts by sign
are unknown (NaN), and the non-finite counts are 0 when a tensor's L2 norm is finite, unknown otherwise.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from ..stats.core import STAT_NAMES, quick_stats
from .devstats import stats_row

NCOLS = len(STAT_NAMES)
COL = {n: i for i, n in enumerate(STAT_NAMES)}


def cpu_rows(tensors: Sequence[torch.Tensor], out: np.ndarray) -> None:
    """Fill ``out`` (len(tensors) x 13) with the statistics of CPU tensors (NaN: unknown)."""
    for i, t in enumerate(tensors):
        if t.dtype == torch.float32 and t.is_contiguous() and not t.requires_grad and t.numel():
            quick = quick_stats(t.numpy().reshape(-1))      # one kernel call (the common case)
            if quick is not None:
                out[i] = quick
                continue
        row = stats_row(t.detach())
        out[i] = [math.nan if row.get(n) is None else row[n] for n in STAT_NAMES]     # type: ignore[union-attr]


def device_rows(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """(len(tensors) x 13) float64 statistics on the tensors' (one) device, from multi-tensor kernels."""
    f64 = torch.float64
    dev = tensors[0].device
    empty = [i for i, t in enumerate(tensors) if t.numel() == 0]
    if empty:       # no maximum of nothing: their rows say count 0, every value unknown
        full = [t if t.numel() else torch.zeros(1, dtype=t.dtype, device=dev) for t in tensors]
        rows = device_rows(full)
        rows[empty] = torch.tensor([0.0] + [math.nan] * (NCOLS - 1), dtype=f64, device=dev)
        return rows
    with torch.no_grad():
        ts = [t.detach().reshape(-1) for t in tensors]
        ts = [t if t.dtype in (torch.float32, torch.float64) else t.float() for t in ts]
        n = torch.tensor([float(t.numel()) for t in ts], dtype=f64, device=dev)
        l2 = torch.stack(torch._foreach_norm(ts, 2)).to(f64)
        l1 = torch.stack(torch._foreach_norm(ts, 1)).to(f64)
        mx = torch.stack(torch._foreach_max(ts)).to(f64)
        mn = -torch.stack(torch._foreach_max(torch._foreach_neg(ts))).to(f64)
        s = torch.stack([t.sum(dtype=f64) for t in ts])
        mean = s / n
        var = (l2 * l2 - n * mean * mean).clamp(min=0) / (n - 1).clamp(min=1)
        finite = torch.isfinite(l2)
        zero = torch.zeros_like(l2)
        nan = torch.full_like(l2, math.nan)
        known = torch.where(finite, zero, nan)      # all finite: no NaN or Inf element
        cols = [n, known, known, known, nan, nan, nan, mn, mx, mean, l1 / n, var.sqrt(), l2]
        return torch.stack(cols, dim=1)


def rows_of(tensors: Sequence[torch.Tensor]) -> "np.ndarray | torch.Tensor":
    """The rows of ``tensors`` (all on one device): a numpy array for CPU tensors, else a device tensor."""
    if not tensors:
        return np.zeros((0, NCOLS))
    if tensors[0].device.type == "cpu":
        out = np.full((len(tensors), NCOLS), math.nan)
        cpu_rows(tensors, out)
        return out
    return device_rows(tensors)


def to_host(rows: "np.ndarray | torch.Tensor") -> np.ndarray:
    """A rows block as a numpy array (a device tensor copied once)."""
    return rows if isinstance(rows, np.ndarray) else rows.cpu().numpy()
