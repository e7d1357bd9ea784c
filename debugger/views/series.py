"""What the trends view draws of a rank's per-step series, computed here so the web layer only asks.

- :func:`curve`: one tensor's statistic over a step range, decimated to at most ``points`` buckets with
  each bucket's min and max (a one-step spike stays visible at any zoom);
- :func:`heatmap`: a statistic of every tensor of a role (rows grouped by layer) x step buckets;
- :func:`scalars`: the loss, learning rate, gradient norm and loss scale decimated the same way;
- :func:`spikes`: the loss spikes (:func:`debugger.watch.spikes.find_spikes`, over the window that
  :func:`debugger.watch.spikes.spike_window` adapts to the run's length) with, for each, the deep capture
  (graph, iteration) nearest it, so a view can open it.

The series is the rank's (:attr:`debugger.model.Rank.series`): the one recorded, else its recorded
iterations when they are every step or most (``origin`` "iterations" in :func:`catalog`).

Buckets split the step range evenly by step value, not by sample count, so the x axis stays linear in
steps when the series has gaps (a resumed run). JSON-ready: NaN becomes None.
"""
from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from ..errors import InvalidQueryError, QueryError
from ..formats.base import SeriesSource
from ..formats.records import SERIES_ROLES, SeriesTensor
from ..model import Rank
from ..stats.core import COUNT_NAMES, STAT_NAMES

SCALAR_NAMES = ("loss", "lr", "grad_norm", "loss_scale")
AGGREGATES = ("max", "mean", "min")
MAX_POINTS = 4000        # buckets of a curve at most (a wide screen's pixel columns, twice)
MAX_COLUMNS = 2000       # step buckets of a heatmap at most


def series_of(rank: Rank) -> SeriesSource:
    """The rank's series; a QueryError (404) naming the rank when it records none."""
    s = rank.series
    if s is None:
        raise QueryError(rank.path, f"rank {rank.rank} records no per-step series")
    return s


def layer_of(t: SeriesTensor) -> str:
    """The module a series tensor belongs to: its parameter's module path (``fc1`` for ``fc1.weight``,
    its gradient, update and optimizer state), else its own name less the last part."""
    base = t.param or _param_guess(t)
    return base.rsplit(".", 1)[0] if "." in base else "(model)"


def _param_guess(t: SeriesTensor) -> str:
    """The parameter a series tensor's name says, when the series does not ("fc1.weight.grad": fc1.weight)."""
    for suffix in (".grad", ".update"):
        if t.name.endswith(suffix):
            return t.name[:-len(suffix)]
    return t.name


def catalog(rank: Rank) -> dict[str, Any]:
    """The series' tensors (name, role, param, layer), its step range and what can be asked of it."""
    s = rank.series
    if s is None:
        # a series recorded but never written, or damaged, is said by the rank's load warnings: quoted first
        said = [w for w in rank.warnings if "series" in w]
        why = f"{said[0]}; " if said else ""
        return {"available": False, "rank": rank.rank, "warnings": said,
                "message": f"{why}rank {rank.rank} records no per-step series (Recorder(..., series=True) records "
                           "one; iterations recorded every step, or most, at any level read as one; "
                           "tdbg convert --series makes one of a dump's iterations)"}
    steps = s.steps()
    return {"available": True, "rank": rank.rank, "origin": s.origin,
            "tensors": [{"name": t.name, "role": t.role, "param": t.param, "layer": layer_of(t)} for t in s.catalog()],
            "steps": {"first": int(steps[0]) if len(steps) else None, "last": int(steps[-1]) if len(steps) else None,
                      "count": int(len(steps))},
            "stats": list(STAT_NAMES), "scalars": list(SCALAR_NAMES), "roles": list(SERIES_ROLES),
            "aggregates": list(AGGREGATES), "warnings": list(s.warnings)}


def check_range(start: int | None, stop: int | None) -> None:
    """A step range is ``start <= stop`` (either end open)."""
    if start is not None and stop is not None and start > stop:
        raise InvalidQueryError(f"bad step range {start}-{stop}: start after stop")


def _count(name: str, n: int | None, default: int, most: int) -> int:
    if n is None:
        return default
    if not 1 <= n <= most:
        raise InvalidQueryError(f"bad {name} {n}: expected 1 to {most}")
    return n


def bucket_edges(steps: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(first index of each non-empty bucket, its first step) for ``n`` buckets of equal step width over
    the sorted ``steps``; each step is its own bucket when there are no more than ``n``."""
    if len(steps) <= n:
        return np.arange(len(steps)), steps.astype(np.int64)
    lo, hi = float(steps[0]), float(steps[-1]) + 1.0
    cut = lo + (hi - lo) * np.arange(n) / n
    starts = np.unique(np.searchsorted(steps, cut, side="left"))
    starts = starts[starts < len(steps)]
    return starts, steps[starts].astype(np.int64)


def _reduce(values: np.ndarray, starts: np.ndarray, how: str) -> np.ndarray:
    """Per bucket (along the last axis) the NaN-ignoring min, max or mean; NaN where all are NaN."""
    if values.shape[-1] == 0:
        return values
    finite_count = np.add.reduceat(~np.isnan(values), starts, axis=-1)
    if how == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.add.reduceat(np.nan_to_num(values, nan=0.0, posinf=np.inf, neginf=-np.inf), starts, axis=-1) / finite_count
    else:
        out = (np.fmax if how == "max" else np.fmin).reduceat(values, starts, axis=-1)
    return np.where(finite_count > 0, out, np.nan)


def _window(steps: np.ndarray, start: int | None, stop: int | None) -> slice:
    lo = 0 if start is None else int(np.searchsorted(steps, start, side="left"))
    hi = len(steps) if stop is None else int(np.searchsorted(steps, stop, side="right"))
    return slice(lo, hi)


def _json(a: np.ndarray) -> list[Any]:
    return [None if math.isnan(v) else v for v in a.tolist()]


def decimate(steps: np.ndarray, values: np.ndarray, start: int | None, stop: int | None, points: int) -> dict[str, Any]:
    """``values`` over steps in [start, stop] as at most ``points`` buckets: first step, min, max, mean."""
    w = _window(steps, start, stop)
    st, v = steps[w], values[w]
    starts, first = bucket_edges(st, points)
    return {"start": int(st[0]) if len(st) else start, "stop": int(st[-1]) if len(st) else stop,
            "count": int(len(st)), "x": first.tolist(),
            "min": _json(_reduce(v, starts, "min")), "max": _json(_reduce(v, starts, "max")),
            "mean": _json(_reduce(v, starts, "mean")), "exact": bool(len(st) <= points)}


def curve(rank: Rank, tensor: str, stat: str, *, start: int | None = None, stop: int | None = None,
          points: int | None = None) -> dict[str, Any]:
    """One tensor's statistic over [start, stop], decimated to at most ``points`` min/max buckets."""
    s = series_of(rank)
    _stat(stat)
    check_range(start, stop)
    points = _count("points", points, 800, MAX_POINTS)
    known = {t.name: t for t in s.catalog()}
    if tensor not in known:
        raise QueryError(rank.path, f"no tensor {tensor!r} in rank {rank.rank}'s series ({len(known)} tensors)")
    steps, values = s.curve(tensor, stat)
    t = known[tensor]
    return {"tensor": tensor, "role": t.role, "param": t.param, "layer": layer_of(t), "stat": stat,
            **decimate(steps, values, start, stop, points)}


def _stat(stat: str) -> None:
    if stat not in STAT_NAMES:
        raise InvalidQueryError(f"bad stat {stat!r}: expected one of {', '.join(STAT_NAMES)}")


def scalars(rank: Rank, *, start: int | None = None, stop: int | None = None, points: int | None = None) -> dict[str, Any]:
    """The loss, lr, grad_norm and loss_scale over [start, stop], each decimated like :func:`curve`
    (a scalar the run never recorded is all None, with ``"known": false``)."""
    s = series_of(rank)
    check_range(start, stop)
    points = _count("points", points, 800, MAX_POINTS)
    out: dict[str, Any] = {}
    for name in SCALAR_NAMES:
        steps, values = s.scalar(name)
        out[name] = {**decimate(steps, values, start, stop, points), "known": bool(np.any(~np.isnan(values)))}
    return {"rank": rank.rank, "scalars": out}


def _rows(s: SeriesSource, role: str) -> list[tuple[int, SeriesTensor, str]]:
    """(matrix row, tensor, layer) of every tensor of ``role`` ("all": every one), layers in first-seen
    order and each layer's tensors together."""
    if role != "all" and role not in SERIES_ROLES:
        raise InvalidQueryError(f"bad role {role!r}: expected all or one of {', '.join(SERIES_ROLES)}")
    picked = [(i, t, layer_of(t)) for i, t in enumerate(s.catalog()) if role in ("all", t.role)]
    order = {layer: k for k, layer in enumerate(dict.fromkeys(layer for _, _, layer in picked))}
    return sorted(picked, key=lambda x: (order[x[2]], x[0]))


_last_matrix: list[Any] = []          # [(series, its fingerprint, stat, steps, values)]: the last one read
_matrix_lock = threading.Lock()


def _matrix(s: SeriesSource, stat: str) -> tuple[np.ndarray, np.ndarray]:
    """``s.matrix(stat)``, the last one kept (values as float32, as stored): a zoom or another aggregate of
    the same statistic reads no segment again (0.5 s for 100,000 steps x 200 tensors). The series object
    itself is kept with it (its id cannot be reused meanwhile) and its fingerprint, so a series that grew
    is read again."""
    fp = s.fingerprint()
    with _matrix_lock:
        got = next((x for x in _last_matrix if x[0] is s and x[1] == fp and x[2] == stat), None)
    if got is None:
        steps, m = s.matrix(stat)
        got = (s, fp, stat, steps, m if stat in COUNT_NAMES else m.astype(np.float32))
        with _matrix_lock:
            _last_matrix[:] = [got]
    return got[3], got[4]


def heatmap(rank: Rank, stat: str, *, role: str = "weight", start: int | None = None, stop: int | None = None,
            columns: int | None = None, agg: str = "max", log: bool = False) -> dict[str, Any]:
    """A statistic of every tensor of ``role`` (rows, grouped by layer) x at most ``columns`` step buckets
    over [start, stop]; a bucket's value is the ``agg`` (max, mean, min) of its steps, then with ``log``
    log10 of its magnitude (0: None)."""
    s = series_of(rank)
    _stat(stat)
    check_range(start, stop)
    if agg not in AGGREGATES:
        raise InvalidQueryError(f"bad agg {agg!r}: expected one of {', '.join(AGGREGATES)}")
    columns = _count("columns", columns, 200, MAX_COLUMNS)
    rows = _rows(s, role)
    steps, m = _matrix(s, stat)
    w = _window(steps, start, stop)
    starts, first = bucket_edges(steps[w], columns)
    vals = _reduce(m[[i for i, _, _ in rows]][:, w].astype(np.float64), starts, agg) if rows else np.zeros((0, len(starts)))
    if log:
        with np.errstate(divide="ignore", invalid="ignore"):
            vals = np.log10(np.abs(vals))
        vals[~np.isfinite(vals)] = np.nan
    fin = vals[np.isfinite(vals)]
    groups: list[dict[str, Any]] = []
    for k, (_, _, layer) in enumerate(rows):
        if not groups or groups[-1]["name"] != layer:
            groups.append({"name": layer, "start": k, "count": 0})
        groups[-1]["count"] += 1
    return {"stat": stat, "role": role, "agg": agg, "log": log,
            "start": int(steps[w][0]) if len(starts) else start, "stop": int(steps[w][-1]) if len(starts) else stop,
            "rows": [{"name": t.name, "role": t.role, "param": t.param, "layer": layer} for _, t, layer in rows],
            "groups": groups, "x": first.tolist(), "values": [_json(r) for r in vals],
            "lo": float(fin.min()) if fin.size else None, "hi": float(fin.max()) if fin.size else None}


def nearest_deep(rank: Rank, step: int) -> dict[str, Any] | None:
    """The deep capture (recorded iteration) nearest ``step``: {iteration, graph (the first that dumped it),
    distance}; None when the rank recorded no iteration."""
    best: tuple[int, int, int] | None = None         # (distance, iteration, graph)
    for g in rank.graph_ids:
        its = rank.iterations(g)
        if not its:
            continue
        k = int(np.searchsorted(its, step))
        for it in its[max(0, k - 1):k + 1]:
            cand = (abs(it - step), it, g)
            if best is None or cand < best:
                best = cand
    return None if best is None else {"iteration": best[1], "graph": best[2], "distance": best[0]}


def spikes(rank: Rank, *, window: int | None = None, z: float | None = None, top: int | None = None) -> dict[str, Any]:
    """The loss spikes of the rank's series, each with its ranked causes and the nearest deep capture (the
    last answer kept until the series or the deep captures change: a followed run's view refreshes often)."""
    s = series_of(rank)
    from ..watch.spikes import find_spikes, spike_window     # numpy's series work: loaded when asked for
    # the window adapts to a short run (spike_window), as `tdbg spikes`'s; the answer says the one used
    opts: dict[str, Any] = {"window": _count("window", window, 50, 100_000) if window is not None
                            else spike_window(len(s.steps()))}
    if z is not None:
        if not (math.isfinite(z) and z > 0):
            raise InvalidQueryError(f"bad z {z}: expected a positive number")
        opts["z"] = z
    if top is not None:
        opts["top"] = _count("top", top, 10, 1000)
    its = rank.iterations()
    key = (s.fingerprint(), len(its), its[-1] if its else None, tuple(sorted(opts.items())))
    with _matrix_lock:
        kept = next((x[2] for x in _last_spikes if x[0] is s and x[1] == key), None)
    if kept is None:
        kept = _spikes(rank, find_spikes, opts)
        with _matrix_lock:
            _last_spikes[:] = [(s, key, kept)]
    return kept


_last_spikes: list[Any] = []           # [(series, (fingerprint, options), answer)]: a refresh of an unchanged run


def _spikes(rank: Rank, find_spikes: Any, opts: dict[str, Any]) -> dict[str, Any]:
    """find_spikes' answer as JSON, each spike with its nearest deep capture and each cause with its node."""
    try:
        found = find_spikes(rank, **opts)
    except ValueError as exc:        # a series without a loss: nothing to find spikes in, said as such
        return {"available": False, "spikes": [], "message": str(exc)}
    out = []
    for sp in found:
        d = sp.as_dict()
        d["deep"] = nearest_deep(rank, d["step"])
        for c in d["causes"]:
            c["node"] = _node_in(rank, d["deep"], c)
        out.append(d)
    return {"available": True, "window": opts["window"], "spikes": out}


def _node_in(rank: Rank, deep: dict[str, Any] | None, cause: dict[str, Any]) -> str | None:
    """The node of the deep capture's graph a cause links to: its tensor, else its parameter (an update,
    an optimizer state the graph names otherwise); None when the graph has neither."""
    if deep is None:
        return None
    graph = rank.graph(deep["graph"])
    for name in (cause.get("tensor"), cause.get("param")):
        if name and name in graph:
            return name
    return None
