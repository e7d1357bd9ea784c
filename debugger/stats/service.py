"""The one source of a tensor's statistics, whatever its reader: what the dump stores, else the cache, else one
chunked pass over its values (:func:`compute`), then cached. The scan's workers, its look-ups while evaluating,
the web's tensor view and history, and the triage all ask here; convert's writer runs the same pass
(:func:`debugger.stats.core.stats_of_chunks`) over the chunks it stores. A tensor's numbers are therefore the
same wherever they are shown."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
