"""Watchpoints over time: the series-native conditions of the registry (``needs == "series"``), run over every
step of a rank's per-step series with whole-matrix numpy passes (one ``matrix(stat)`` read per statistic).

- ``loss_spike``: the loss's robust z-score against the ``window`` steps before (spikes.trailing_z).
- ``norm_growth``: a gradient's or update's l2 norm, median of a window over the median of the window before;
  medians of consecutive blocks of ``window`` steps (O(steps) per tensor, not a rolling median).
- ``lr_change`` / ``loss_scale_change``: a step-to-step change of the learning rate or loss scale.

The conditions that compare iterations run over the series too where its statistics answer them exactly
(``OVER_SERIES``): the update ratio mean|cur - prev| / (mean|prev| + epsilon) is an update's abs_mean
over the weight's abs_mean the step before, and ``loss_not_decreasing`` reads the loss.
"""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Callable

import numpy as np

from .results import SeriesHit   # defined with the other findings: a stored scan reads it without numpy
from .spikes import trailing_z

if TYPE_CHECKING:
    from ..formats.base import SeriesSource
    from .registry import Watchpoint


def runs_over_series(wp: "Watchpoint") -> bool:
    """Whether a watchpoint can run over a series (a series-native one, or one the series answers)."""
    return wp.condition.rule in SERIES_RULES or wp.condition.rule in OVER_SERIES


def run_series(rank: int, series: "SeriesSource", wps: list["Watchpoint"]) -> list[SeriesHit]:
    """Every hit of the series watchpoints ``wps`` on one rank's series, by step."""
    hits: list[SeriesHit] = []
    for wp in wps:
        rule = SERIES_RULES.get(wp.condition.rule) or OVER_SERIES[wp.condition.rule]
        hits += rule(rank, series, wp)
    return sorted(hits, key=lambda h: (h.step, h.condition, h.tensor))


def _loss_spike(rank: int, series: "SeriesSource", wp: "Watchpoint") -> list[SeriesHit]:
    """Steps whose loss's robust z against the window before is above z_gt (a NaN/Inf loss too)."""
    window, limit = int(wp.setting("window")), wp.params.get("z_gt", 6.0)
    steps, loss = series.scalar("loss")
    z, base = trailing_z(loss, window)
    with np.errstate(invalid="ignore"):
        fire = (z > limit) | ~np.isfinite(loss)
    return [SeriesHit(wp.name, rank, int(steps[i]), "loss", "value", float(loss[i]),
                      f"robust z {z[i]:.1f} > {limit:g} (expected {base[i]:.6g})" if math.isfinite(z[i])
                      else "non-finite loss") for i in np.flatnonzero(fire)]


def _norm_growth(rank: int, series: "SeriesSource", wp: "Watchpoint") -> list[SeriesHit]:
    """For each gradient and update: the first block of ``window`` steps whose median l2 norm is above
    ratio_gt times the median of the block before."""
    window, limit = int(wp.setting("window")), wp.params.get("ratio_gt", 10.0)
    rows = [i for i, t in enumerate(series.catalog()) if t.role in ("gradient", "update")]
    if not rows:
        return []
    steps, values = series.matrix("l2norm")
    blocks = len(steps) // window
    if blocks < 2:
        return []
    names = series.tensors()
    cut = values[rows, :blocks * window].reshape(len(rows), blocks, window)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)             # an all-NaN block: NaN
        med = np.nanmedian(cut, axis=2)
        ratio = med[:, 1:] / med[:, :-1]
        fire = ratio > limit
    hits = []
    for r in np.flatnonzero(fire.any(axis=1)):
        b = int(np.argmax(fire[r]))
        last = int(steps[(b + 2) * window - 1])
        hits.append(SeriesHit(wp.name, rank, last, names[rows[r]], "l2norm", float(med[r, b + 1]),
                              f"median over steps {int(steps[(b + 1) * window])}-{last} is {ratio[r, b]:.3g}x "
                              f"that of the {window} steps before (> {limit:g})"))
    return hits


def _scalar_change(name: str) -> Callable[[int, "SeriesSource", "Watchpoint"], list[SeriesHit]]:
    """A rule: steps where the scalar changed from the step before by more than change_percent_gt %."""
    def rule(rank: int, series: "SeriesSource", wp: "Watchpoint") -> list[SeriesHit]:
        limit = wp.params.get("change_percent_gt", 0.0)
        steps, v = series.scalar(name)
        prev, cur = v[:-1], v[1:]
        known = np.isfinite(prev) & np.isfinite(cur)
        with np.errstate(all="ignore"):
            pct = np.where(prev != 0, np.abs(cur - prev) / np.abs(prev) * 100, np.where(cur != 0, np.inf, 0.0))
        fire = known & (pct > limit) & (cur != prev)
        return [SeriesHit(wp.name, rank, int(steps[i + 1]), name, "value", float(cur[i]),
                          f"{prev[i]:.6g} -> {cur[i]:.6g} ({pct[i]:.3g}% > {limit:g}%)")
                for i in np.flatnonzero(fire)]
    return rule


SERIES_RULES: dict[str, Callable[[int, "SeriesSource", "Watchpoint"], list[SeriesHit]]] = {
    "series_loss_spike": _loss_spike,
    "series_norm_growth": _norm_growth,
    "series_lr_change": _scalar_change("lr"),
    "series_loss_scale_change": _scalar_change("loss_scale"),
}


def _update_ratio(rank: int, series: "SeriesSource", wp: "Watchpoint") -> list[SeriesHit]:
    """weight_change_too_large/small, weight_update_ratio: each weight's update ratio at every step."""
    catalog = series.catalog()
    index = {t.name: i for i, t in enumerate(catalog)}
    pairs = [(index[t.param], i, t.param) for i, t in enumerate(catalog)
             if t.role == "update" and t.param and t.param in index and catalog[index[t.param]].role == "weight"]
    if not pairs:
        return []
    steps, abs_mean = series.matrix("abs_mean")
    eps = wp.setting("epsilon")
    w, u = abs_mean[[p[0] for p in pairs], :-1], abs_mean[[p[1] for p in pairs], 1:]
    with np.errstate(all="ignore"):
        ratio = u / (w + eps)
        if wp.name == "weight_update_ratio":
            large, small = wp.setting("large_threshold"), wp.setting("small_threshold")
            fire, why = (ratio > large) | (ratio < small), f"outside [{small:g}, {large:g}]"
        else:
            fire = np.zeros(ratio.shape, dtype=bool)
            for p, limit in wp.comparisons():
                fire |= OPS_NP[p.op](ratio, limit)
            why = ", ".join(f"{p.name}={limit:g}" for p, limit in wp.comparisons())
        fire &= np.isfinite(ratio) & (w > 0)    # a zero previous weight has no ratio (as over iterations)
    return [SeriesHit(wp.name, rank, int(steps[t + 1]), pairs[r][2], "abs_mean_update_ratio",
                      float(ratio[r, t]), why) for r, t in zip(*np.nonzero(fire))]


def _loss_history(rank: int, series: "SeriesSource", wp: "Watchpoint") -> list[SeriesHit]:
    """loss_not_decreasing: steps whose loss is not below the loss num_steps steps earlier by diff_percent %."""
    back, pct = int(wp.setting("num_steps")), wp.setting("diff_percent")
    steps, loss = series.scalar("loss")
    if len(loss) <= back:
        return []
    earlier, now = loss[:-back], loss[back:]
    with np.errstate(invalid="ignore"):
        fire = np.isfinite(earlier) & np.isfinite(now) & (now > earlier - np.abs(earlier) * pct / 100)
    return [SeriesHit(wp.name, rank, int(steps[i + back]), "loss", "value", float(now[i]),
                      f"not below {earlier[i]:.6g} ({back} steps before) by {pct:g}%")
            for i in np.flatnonzero(fire)]


OPS_NP = {"gt": np.greater, "lt": np.less, "ge": np.greater_equal, "le": np.less_equal}
OVER_SERIES: dict[str, Callable[[int, "SeriesSource", "Watchpoint"], list[SeriesHit]]] = {
    "update_ratio": _update_ratio,
    "loss_history": _loss_history,
}
