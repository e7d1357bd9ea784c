"""Statistics of a tensor computed where it lives (CPU or GPU), in the columns of debugger.stats.

On a GPU the result is a 1-D float64 tensor of len(STAT_NAMES) on the tensor's device: the caller
stacks an iteration's rows and copies them to the host once. On the CPU it is debugger.stats itself,
in its compiled one-pass form. Value statistics are over finite elements, the
standard deviation has ddof=1 and the L2 norm is derived from the centred sum of squares and the mean,
as in :mod:`debugger.stats`; no finite element gives NaN (which the writer stores as "none").
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from ..stats.core import (ASYMPTOTES, CHUNK, SATURATION_TOLERANCE, STAT_NAMES, UNCHANGED_RTOL, compiled_kernel,
                     compiled_update, quick_stats, stats_in_threads, tensor_stats)
from . import capture as C

NCOLS = len(STAT_NAMES)
_NAN = float("nan")


def _as_float(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == torch.bool:
        return t.to(torch.uint8).to(torch.float64)
    if t.is_complex():
        return t.abs().to(torch.float64)
    if t.is_floating_point():
        return t if t.dtype in (torch.float32, torch.float64) else t.to(torch.float32)
    return t.to(torch.float64)


def stats_row(t: torch.Tensor) -> "torch.Tensor | dict[str, float | None]":
    """The statistics of ``t``: on the CPU a finished mapping (debugger.stats over the tensor's own
    memory, no copy: the numbers ``tdbg convert --statistics`` gives, to rounding); elsewhere one float64 row
    on the tensor's device (no host copy), to be stacked and copied once per iteration."""
    if t.device.type == "cpu":
        return _cpu_stats(t.detach() if t.requires_grad else t)
    with torch.no_grad():
        t = t.detach()
        n = t.numel()
        if n == 0:
            return torch.tensor([0.0] * 7 + [_NAN] * 6, dtype=torch.float64, device=t.device)
        return _masked(_as_float(t).reshape(-1), n)


_scratch: torch.Tensor | None = None


def as_float32(t: torch.Tensor) -> torch.Tensor:
    """A CPU bfloat16 tensor's values as float32, in a buffer kept for the next call (read it before
    calling again): a fresh buffer of this size comes from mmap, and its page faults cost ten times
    the conversion."""
    global _scratch
    n = t.numel()
    if _scratch is None or _scratch.numel() < n:
        _scratch = torch.empty(max(n, 1 << 16), dtype=torch.float32)
    out = _scratch[:n].view(t.shape)
    out.copy_(t)
    return out


def _cpu_stats(t: torch.Tensor) -> dict[str, float | None]:
    return cpu_stats_view(t)[0]


def cpu_stats_view(t: torch.Tensor) -> tuple[dict[str, float | None], np.ndarray]:
    """:func:`stats_row` of a CPU tensor and the numpy view of the memory it read (a bfloat16 tensor's
    float32 copy in the shared buffer of :func:`as_float32`: read it before the next call), which is
    what the tensor's digest hashes: one conversion for both."""
    if t.requires_grad:
        t = t.detach()
    if t.dtype == torch.bfloat16:
        t = as_float32(t)
    if t.is_conj() or t.is_neg():      # (two operator calls saved on every plain tensor)
        t = t.resolve_conj().resolve_neg()
    a = C.host_view(t)
    return _view_stats(a), a


def _view_stats(a: np.ndarray) -> dict[str, float | None]:
    quick = quick_stats(a)      # one kernel call for the common case (about 10 us less per tensor)
    if quick is not None:
        return dict(zip(STAT_NAMES, quick))
    big = a.size > 4 * CHUNK and compiled_kernel() is not None
    st = stats_in_threads(a, _helper().submit) if big else tensor_stats(a, compiled=True)
    return {n: getattr(st, n) for n in STAT_NAMES}


_pool: ThreadPoolExecutor | None = None


def _helper() -> ThreadPoolExecutor:
    """One thread that reads every other chunk of a big CPU tensor beside the caller (the training
    waits for the statistics anyway, and the kernel releases the GIL)."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(1, thread_name_prefix="tdbg-stats")
    return _pool


def _masked(x: torch.Tensor, n: int) -> torch.Tensor:
    """No host synchronisation: every statistic from masks (the device path, and non-finite CPU tensors)."""
    f64 = torch.float64
    nan = torch.isnan(x).sum(dtype=f64)
    pinf = torch.isposinf(x).sum(dtype=f64)
    ninf = torch.isneginf(x).sum(dtype=f64)
    fin = torch.isfinite(x)
    nf = fin.sum(dtype=f64)
    xf = torch.where(fin, x, torch.zeros((), dtype=x.dtype, device=x.device))
    total = torch.full((), float(n), dtype=f64, device=x.device)
    zeros = (xf == 0).sum(dtype=f64) - (total - nf)     # non-finite entries were set to 0 in xf
    pos = (xf > 0).sum(dtype=f64)
    neg = (xf < 0).sum(dtype=f64)
    inf = torch.full((), math.inf, dtype=x.dtype, device=x.device)
    mn = torch.where(fin, x, inf).amin().to(f64)
    mx = torch.where(fin, x, -inf).amax().to(f64)
    s = xf.sum(dtype=f64)
    mean = s / nf
    d = torch.where(fin, xf.to(f64) - mean, torch.zeros((), dtype=f64, device=x.device))
    m2 = (d * d).sum()
    abs_mean = xf.abs().sum(dtype=f64) / nf
    std = torch.where(nf > 1, torch.sqrt(m2 / (nf - 1).clamp(min=1)), torch.zeros((), dtype=f64, device=x.device))
    l2 = torch.sqrt((m2 + mean * mean * nf).clamp(min=0))
    none = nf == 0
    vals = [torch.where(none, torch.full((), _NAN, dtype=f64, device=x.device), v) for v in (mn, mx, mean, abs_mean, std, l2)]
    return torch.stack([total, nan, pinf, ninf, zeros, pos, neg, *vals])


def rows_to_dicts(rows: "list[torch.Tensor | dict[str, float | None]]") -> list[dict[str, float | None]]:
    """Stack the rows, copy them to the host once, and return one stats mapping per row."""
    by_dev: dict[torch.device, list[int]] = {}
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            by_dev.setdefault(r.device, []).append(i)
    out: list[Any] = list(rows)      # a CPU row is a mapping already (no new object: fewer for the collector)
    for idx in by_dev.values():
        host = torch.stack([rows[i] for i in idx]).cpu().numpy()
        for i, vals in zip(idx, host):
            out[i] = {name: (None if math.isnan(v) and name not in ("count",) else float(v))
                      for name, v in zip(STAT_NAMES, vals.tolist())}
    return out


def saturated_row(t: torch.Tensor, activation: str, tolerance: float = SATURATION_TOLERANCE) -> dict[str, Any]:
    """:func:`debugger.stats.saturated_count` where the tensor lives (bfloat16 compared as float32,
    the dtype it is stored as); the count is a 0-d tensor on the device until :func:`extras_to_host`."""
    lo, hi = ASYMPTOTES[activation]
    with torch.no_grad():
        x = t.detach()
        if x.dtype == torch.bfloat16:
            x = x.to(torch.float32)
        n = ((x >= lo) & (x <= lo + tolerance)).sum(dtype=torch.float64) + \
            ((x >= hi - tolerance) & (x <= hi)).sum(dtype=torch.float64)
    return {"saturated": n, "saturated_tolerance": float(tolerance)}


def update_row(cur: torch.Tensor, prev: torch.Tensor, rtol: float = UNCHANGED_RTOL) -> dict[str, Any]:
    """:func:`debugger.stats.update_stats` where the weight lives (0-d float64 tensors on its device;
    floats from one compiled pass on the CPU)."""
    quick = _cpu_update(cur, prev, rtol)
    if quick is not None:
        return quick
    with torch.no_grad():
        c = cur.detach().to(torch.float64).reshape(-1)
        p = prev.detach().to(torch.float64).reshape(-1)
        if c.numel() == 0 or c.shape != p.shape:
            return {}
        d = (c - p).abs_()
        ap = p.abs_()
        finite = torch.isfinite(c).all() & torch.isfinite(p).all()
        nan = torch.full((), _NAN, dtype=torch.float64, device=c.device)
        vals = {"update_abs_mean": d.mean(), "update_max": d.max(), "update_excess": (d - ap * rtol).max(),
                "previous_abs_mean": ap.mean()}
        vals = {k: torch.where(finite, v, nan) for k, v in vals.items()}
    return {**vals, "update_rtol": float(rtol)}


def _cpu_update(cur: torch.Tensor, prev: torch.Tensor, rtol: float) -> dict[str, float] | None:
    """:func:`update_row` of finite contiguous float32/float64 CPU tensors in one compiled pass (None:
    not such tensors, or a non-finite element, which the tensor path handles)."""
    if cur.device.type != "cpu" or prev.device.type != "cpu" or cur.dtype != prev.dtype or \
            cur.dtype not in (torch.float32, torch.float64) or cur.shape != prev.shape or cur.numel() == 0 or \
            not (cur.is_contiguous() and prev.is_contiguous()):
        return None
    kernel = compiled_update()
    if kernel is None:
        return None
    n = cur.numel()
    c, p = C.host_view(cur.reshape(-1)), prev.detach().reshape(-1).numpy()   # prev: the recorder's copy
    if n > 4 * CHUNK:       # two halves at once, as _cpu_stats reads a big tensor
        half = n // 2
        other = _helper().submit(kernel, c[half:], p[half:], rtol)
        a, b = kernel(c[:half], p[:half], rtol), other.result()
        d_sum, d_max, excess, p_sum = a[0] + b[0], max(a[1], b[1]), max(a[2], b[2]), a[3] + b[3]
    else:
        d_sum, d_max, excess, p_sum = kernel(c, p, rtol)
    if not (math.isfinite(d_sum) and math.isfinite(p_sum)):
        return None
    return {"update_abs_mean": d_sum / n, "update_max": d_max, "update_excess": excess,
            "previous_abs_mean": p_sum / n, "update_rtol": float(rtol)}


def extras_to_host(extras: "list[dict[str, Any]]") -> list[dict[str, float]]:
    """The extra statistics as floats, each device's tensors copied to the host at once."""
    by_dev: dict[torch.device, list[tuple[int, str]]] = {}
    out: list[dict[str, float]] = [{} for _ in extras]
    for i, e in enumerate(extras):
        for k, v in e.items():
            if isinstance(v, torch.Tensor):
                by_dev.setdefault(v.device, []).append((i, k))
            else:
                out[i][k] = float(v)
    for keys in by_dev.values():
        host = torch.stack([extras[i][k].reshape(()) for i, k in keys]).cpu().tolist()
        for (i, k), v in zip(keys, host):
            out[i][k] = v
    return out
