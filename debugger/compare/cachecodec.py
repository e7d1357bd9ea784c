"""How a compared pair's outcome is kept in the statistics cache: named float values, and back."""
from __future__ import annotations

from typing import Any, Iterator, Mapping

from ..stats.cache import ExtraKey
from .outcome import METRIC_NAMES, Metrics, Outcome

_CACHE_TAG = "cmp1"
_OPTIONAL = ("only_a", "only_b", "nonfinite_differ", "nonfinite_both")


def outcome_to_extras(o: Outcome) -> dict[str, float] | None:
    """The float values a StatsCache keeps of an outcome (None: not worth caching, e.g. an error)."""
    if o.error or o.metrics is None or o.shape_mismatch or o.dtype_a != o.dtype_b:
        return None
    d: dict[str, float] = {n: getattr(o.metrics, n) for n in METRIC_NAMES}
    d["identical"] = 1.0 if o.identical else 0.0
    for n in _OPTIONAL:
        if getattr(o, n):
            d[n] = float(getattr(o, n))
    return d


def _key(pair: tuple[str, str], name: str) -> ExtraKey:
    return ExtraKey.of_pair(pair[0], pair[1], f"{_CACHE_TAG}.{name}")


def cached_outcome(get: Any, pair: tuple[str, str]) -> Outcome | None:
    """An outcome of the files ``pair`` (identities) from cache extras (``get(ExtraKey) -> float | None``), None
    when not cached."""
    vals = {}
    for n in (*METRIC_NAMES, "identical"):
        v = get(_key(pair, n))
        if v is None:
            return None
        vals[n] = v
    o = Outcome(Metrics(*(float(vals[n]) for n in METRIC_NAMES)), identical=vals["identical"] == 1.0)
    for n in _OPTIONAL:
        v = get(_key(pair, n))
        if v is not None:
            setattr(o, n, int(v))
    return o


def cache_names(pair: tuple[str, str], extras: Mapping[str, float]) -> Iterator[tuple[ExtraKey, float]]:
    """(cache key, value) of each extra of the outcome of the files ``pair`` (identities)."""
    for n, v in extras.items():
        yield _key(pair, n), v
