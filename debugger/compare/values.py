"""Two tensors compared value by value: msprobe's metrics of two tensor sources (files) or two arrays."""
from __future__ import annotations

import numpy as np

from ..errors import DumpError
from ..formats.base import TensorSource
from ..stats import CHUNK
from .accumulator import accumulate
from .outcome import Outcome
from .statistics_only import compare_digests


def compare_sources(src_a: TensorSource, src_b: TensorSource, fast: bool = True) -> Outcome:
    """Compare two tensors in one chunked pass over both (``fast``: byte-identical chunks short-cut)."""
    try:
        ha, hb = src_a.header(), src_b.header()
        out = Outcome(dtype_a=ha.dtype.name, dtype_b=hb.dtype.name, shape_a=ha.shape, shape_b=hb.shape)
        if ha.shape != hb.shape:
            return out
        if not (src_a.has_values and src_b.has_values):
            return compare_digests(src_a, src_b, out)
        out.nbytes = ha.nbytes + hb.nbytes
        accumulate(zip(src_a.chunks(CHUNK), src_b.chunks(CHUNK)), ha.dtype, hb.dtype, out, fast)
        return out
    except DumpError as exc:
        return Outcome(error=str(exc))
    except (OSError, ValueError, MemoryError) as exc:
        return Outcome(error=f"{src_a.location} vs {src_b.location}: {exc}")


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
    accumulate(chunks, a.dtype, b.dtype, out, fast)
    return out
