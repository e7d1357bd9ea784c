"""The one source of a tensor's statistics, whatever its reader: what the dump stores, else the cache, else one
chunked pass over its values (:func:`compute`), then cached. The scan's workers, its look-ups while evaluating,
the web's tensor view and history, and the triage all ask here; convert's writer runs the same pass
(:func:`debugger.stats.core.stats_of_chunks`) over the chunks it stores. A tensor's numbers are therefore the
same wherever they are shown."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DumpError
from .core import CHUNK, COUNT_NAMES, STAT_NAMES, Stats, stats_of_chunks

if TYPE_CHECKING:
    from ..formats.base import TensorSource
    from .cache import StatsCache


def stored(source: "TensorSource") -> Stats | None:
    """Every statistic, when the dump stores them all (a statistics dump, or a converted one beside its values):
    no read needed. The writer computed them with :func:`compute`'s pass; None when some are missing."""
    try:
        given = source.stored_stats()
    except DumpError:
        return None   # reading the values reports the problem
    if not given or any(given.get(n) is None for n in COUNT_NAMES) or not all(n in given for n in STAT_NAMES):
        return None
    return Stats.from_stored(given)


def compute(source: "TensorSource", ranges: tuple[tuple[float, float], ...] = ()) -> tuple[Stats, dict[Any, int]]:
    """One pass over the tensor's values, CHUNK elements at a time: its statistics, and the count of elements
    inside each ``(lo, hi)`` of ``ranges``."""
    return stats_of_chunks(source.chunks(CHUNK), ranges)


def statistics(source: "TensorSource", cache: "StatsCache | None" = None, identity: str | None = None) -> Stats:
    """The tensor's statistics: stored, else cached, else computed and cached. ``identity``: the cache key (a
    scan's, from its listing); default the file as it is now (a view outlives the listing). A tensor without
    values (a statistics dump) gives what is stored, None where a statistic is not."""
    known = stored(source)
    if known is not None:
        return known
    if not source.has_values:
        return Stats.from_stored(source.stored_stats() or {})
    use_cache = cache is not None and cache.enabled
    ident = identity or source.current_identity()
    found = cache.get(ident) if use_cache else None     # type: ignore[union-attr]
    if found is None:
        found = compute(source)[0]
        if use_cache:
            cache.put(ident, found)      # type: ignore[union-attr]
    return found


def histogram(source: "TensorSource", stats: Stats, bins: int) -> dict[str, list[float]]:
    """:func:`debugger.stats.core.histogram` of the tensor's finite values, from one chunked pass binned over
    ``stats``' range (the tensor's statistics from :func:`statistics`); a range that leaves a finite value out
    (statistics stored by another tool, rounded) is measured from the values in a second pass."""
    if stats.min is None or stats.max is None or not stats.finite:
        return {"edges": [], "counts": []}
    edges, counts = _binned(source, (stats.min, stats.max), bins)
    if counts is None:
        edges, counts = _binned(source, _finite_range(source), bins)
    assert counts is not None
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


def _finite_range(source: "TensorSource") -> tuple[float, float]:
    lo, hi = math.inf, -math.inf
    for chunk in source.chunks(CHUNK):
        flat = _finite64(chunk)
        if flat.size:
            lo, hi = min(lo, float(flat.min())), max(hi, float(flat.max()))
    return lo, hi


def _binned(source: "TensorSource", span: tuple[float, float], bins: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Edges and counts over ``span`` (numpy's bins: the same for one pass over all values as summed over
    chunks); counts None when a finite value falls outside ``span``."""
    counts = np.zeros(bins, np.int64)
    edges = np.histogram_bin_edges(np.empty(0), bins=bins, range=span)
    for chunk in source.chunks(CHUNK):
        flat = _finite64(chunk)
        got, _ = np.histogram(flat, bins=bins, range=span)     # numpy's uniform bins, as over the whole
        if int(got.sum()) != flat.size:
            return edges, None
        counts += got
    return edges, counts


def _finite64(chunk: np.ndarray) -> np.ndarray:
    flat = np.asarray(chunk).reshape(-1)
    if flat.dtype.kind == "b":
        flat = flat.astype(np.uint8)
    if flat.dtype.kind == "f":
        flat = flat[np.isfinite(flat)]
    return flat.astype(np.float64)
