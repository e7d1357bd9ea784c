"""Two tensors compared value by value: msprobe's metrics of two tensor sources (files) or two arrays."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..errors import DumpError
from ..formats.base import TensorHeader, TensorSource
from ..stats.core import CHUNK
from .accumulator import accumulate
from .outcome import Outcome
from .statistics_only import compare_digests


Whole = tuple[TensorHeader, np.ndarray]


def compare_many(tasks: Iterable[tuple[TensorSource, TensorSource]], fast: bool = True) -> list[Outcome]:
    """:func:`compare_sources` of each pair; a side b shared by consecutive pairs is read once (every rank
    against one base rank: the base's tensor, read for the first of its pairs, serves them all)."""
    out = []
    last_b: tuple[str, Whole | str | None] = ("", None)   # (identity, values, or why unreadable)
    for a, b in tasks:
        if last_b[0] != b.identity:
            try:
                last_b = (b.identity, b.whole())
            except DumpError as exc:
                last_b = (b.identity, str(exc))
            except (OSError, ValueError, MemoryError) as exc:
                last_b = (b.identity, f"{b.location}: {exc}")
        whole_b = last_b[1]
        if isinstance(whole_b, str):
            out.append(Outcome(error=whole_b))
        else:
            out.append(compare_sources(a, b, fast, whole_b))
    return out


def compare_sources(src_a: TensorSource, src_b: TensorSource, fast: bool = True,
                    whole_b: Whole | None = None) -> Outcome:
    """Compare two tensors in one chunked pass over both (``fast``: byte-identical chunks short-cut);
    ``whole_b``: side b's :meth:`TensorSource.whole`, when read already."""
    try:
        whole_a = src_a.whole()
        whole_b = whole_b or (src_b.whole() if whole_a is not None else None)
        if whole_a is not None and whole_b is not None:
            return _compare_whole(whole_a, whole_b, fast)
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


def _compare_whole(whole_a: Whole, whole_b: Whole, fast: bool) -> Outcome:
    """Two small tensors read whole (flat values, shapes from their headers)."""
    (ha, a), (hb, b) = whole_a, whole_b
    out = Outcome(dtype_a=ha.dtype.name, dtype_b=hb.dtype.name, shape_a=ha.shape, shape_b=hb.shape)
    if ha.shape != hb.shape:
        return out
    out.nbytes = a.nbytes + b.nbytes
    accumulate(((a[i:i + CHUNK], b[i:i + CHUNK]) for i in range(0, a.size, CHUNK)), a.dtype, b.dtype, out, fast)
    return out


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
