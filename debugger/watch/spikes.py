"""Loss spikes of a long run and the tensors that moved first: ``tdbg spikes``.

A spike is a step whose loss lies far above its own recent past: a robust, detrended z-score of the
loss (the step's change against the median and MAD of the changes over the ``window`` steps before it).
For each spike, every series tensor's statistic of its role (and the learning rate, loss scale and
gradient norm) is scored the same way against its own trailing window, over the LOOKBACK steps up to
the spike. A cause is a tensor whose statistic departed (|z| above the threshold and unprecedented in
its own recent past); causes are ranked by how early they departed, then by where in a step the value
is made (STAGE), then by how much: a planted cause departs at the step it happened, its downstream
effects at later stages of that step or one step or more later.

One cause comes before its step's forward: a weight changed outside the optimizer (a bad checkpoint
load, a hook or a bug writing into it). Its update (the change since the previous step) then departs by far
more than an optimizer step could have moved it from the gradient and learning rate it had: an SGD step
grows with the gradient and the learning rate, an Adam step less than that (its second moment grows
too). Such a parameter's weight and update rank at stage EDITED, ahead of the gradients they cause.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..formats.base import SeriesSource
    from ..formats.records import StackFrame
    from ..model.rank import Rank

# The statistics scored for causes, by role: the norms users watch before a spike (update and gradient
# norms, Adam's second moment, a weight's or activation's max). Extremes of noisy tensors (the min of
# exp_avg_sq) jump all the time and would bury the cause in early false departures.
CAUSE_STATS = {"weight": ("l2norm", "max"), "gradient": ("l2norm",), "update": ("l2norm",),
               "optimizer_state": ("l2norm",), "activation": ("max",), "other": ("l2norm",)}
# Within one step, values are made in this order: the learning rate, the activations (forward order),
# the loss, the gradients, then the optimizer state, the update and the weight after the step (a series
# records weights after the optimizer step). Departures at the same step are ranked in this order, then
# by |z| (activations: forward order, the first layer's departure causes the others'): the optimizer
# state jumps whenever the gradient does (and by more: its own changes are smooth), but it is the
# gradient's effect.
EDITED = 0.5             # a weight changed outside the optimizer: before the step's forward, after its lr
STAGE = {"scalar": 0, "activation": 1, "loss": 2, "gradient": 3, "optimizer_state": 4, "update": 5,
         "weight": 6, "other": 7}
LOOKBACK = 10             # steps before a spike searched for departures
SCALAR_CAUSES = ("lr", "loss_scale", "grad_norm")
MAD_TO_SIGMA = 1.4826
# A flat series (a constant learning rate) has MAD 0: its scale floor is this share of its level, so a
# change of the level by 1% scores 10.
REL_FLOOR = 1e-3
UNPRECEDENTED = 2.0
# An update this many times beyond what its gradient's and learning rate's growth explain was not made by
# the optimizer (an optimizer's update grows at most about as much as both; the planted edits grow it
# hundreds of times more)
OUTSIDE_MARGIN = 10.0
# the window a step is scored against, adapted to the run's length (spike_window)
WINDOW, MIN_WINDOW, WINDOW_SHARE = 50, 10, 2


def spike_window(steps: int) -> int:
    """The window for a series of ``steps`` steps: ``min(50, max(10, steps // 2))``. A long run gets 50
    steps; a short one half its steps (a 20-step run is scored over 10 steps from step 10 on, a 30-step
    run over 15), instead of being refused for being shorter than 50; never under 10: over fewer steps
    the median and spread of a noisy loss's changes are themselves noise (a healthy 20-step run then
    shows false spikes at z 6-15)."""
    return min(WINDOW, max(MIN_WINDOW, steps // WINDOW_SHARE))


@dataclass(frozen=True)
class Cause:
    """One tensor statistic that departed from its own recent behaviour before a spike."""

    tensor: str
    role: str
    param: str | None
    stat: str
    first_step: int           # first step in the lookback whose |z| passed the threshold
    lead: int                 # spike step - first_step
    score: float              # |z| at first_step
    layer: str | None         # the parameter's module path
    source: str | None        # "file.py:LINE" of the layer's code, from a deep capture's graph
    outside_optimizer: bool = False   # the weight moved by far more than its optimizer step could have

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (keys: the field names)."""
        return {k: _json_number(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Spike:
    """One loss spike: its step, the loss, the loss expected from the window before, and ranked causes."""

    step: int
    loss: float
    baseline: float
    z: float
    deep_step: int | None     # the deep capture (dump iteration) nearest the spike
    causes: list[Cause] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (keys: the field names)."""
        return {"step": self.step, "loss": _json_number(self.loss), "baseline": _json_number(self.baseline),
                "z": _json_number(self.z), "deep_step": self.deep_step,
                "causes": [c.as_dict() for c in self.causes]}


def _json_number(v: Any) -> Any:
    """Floats JSON can hold: non-finite ones as strings ("nan", "inf")."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def trailing_z(values: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(z, baseline) of each column of ``values`` (... x steps) against the ``window`` steps before it
    (NaN for the first ``window`` steps). Robust and detrended: the step's change from the step before is
    scored against the median and MAD of the changes of the window (a steady drift, such as a falling
    loss or a growing weight, is no departure); the baseline is the value the drift predicts."""
    v = np.asarray(values, dtype=np.float64)
    n = v.shape[-1]
    z = np.full(v.shape, np.nan)
    base = np.full(v.shape, np.nan)
    if n <= window:
        return z, base
    d = np.diff(v, axis=-1)                                                   # d[t-1] = v[t] - v[t-1]
    past = np.lib.stride_tricks.sliding_window_view(d, window - 1, axis=-1)[..., :-1, :]
    with np.errstate(all="ignore"):
        m = _median(past)
        mad = _median(np.abs(past - m[..., None]))
        # the floor: a share of the level the step starts from (a flat series has MAD 0)
        scale = np.maximum(MAD_TO_SIGMA * mad, REL_FLOOR * np.abs(v[..., window - 1:-1]))
        scale = np.where(scale > 0, scale, np.finfo(np.float64).tiny)
        change = d[..., window - 1:]
        z[..., window:] = (change - m) / scale
        base[..., window:] = v[..., window - 1:-1] + m
    return z, base


def _median(a: np.ndarray) -> np.ndarray:
    """Median over the last axis, NaN ignored (np.median's faster path when there is no NaN)."""
    if not np.isnan(a).any():
        return np.median(a, axis=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)                   # all-NaN windows give NaN
        return np.nanmedian(a, axis=-1)


def find_spikes(rank: "Rank", *, window: int = 50, z: float = 6.0, top: int = 10) -> list[Spike]:
    """The loss spikes of a rank's series, the ``top`` biggest, each with its ranked causes (earliest
    departure first, then the bigger z). Raises ValueError when the rank has no series or no loss."""
    series = rank.series
    if series is None:
        raise ValueError("this rank has no per-step series")
    steps, loss = _loss(series)
    if not np.isfinite(loss).any():
        raise ValueError("the series records no loss")
    zs, med = trailing_z(loss, window)
    above = (zs > z) | (~np.isfinite(loss) & (np.arange(len(loss)) >= 1))
    starts = _episode_starts(above, window)
    found = sorted(starts, key=lambda i: -_rank_z(zs[i]))[:max(0, top)]
    deep = _deep_steps(rank)
    reads, sources = _Reads(series), _layer_sources(rank) if found else {}   # shared by every spike
    spikes = []
    for i in sorted(found):
        causes = rank_causes(rank, reads, int(steps[i]), window=window, z=z, sources=sources)
        spikes.append(Spike(step=int(steps[i]), loss=float(loss[i]), baseline=float(med[i]), z=float(zs[i]),
                            deep_step=_nearest(deep, int(steps[i])), causes=causes))
    return spikes


class _Reads:
    """A series whose whole-matrix and scalar reads are kept: the spikes of a run share them."""

    def __init__(self, series: "SeriesSource") -> None:
        self.series = series
        self._kept: dict[tuple[str, str], Any] = {}

    def _keep(self, key: tuple[str, str], read: Any) -> Any:
        if key not in self._kept:
            self._kept[key] = read()
        return self._kept[key]

    def steps(self) -> np.ndarray:
        """As SeriesSource.steps."""
        return self._keep(("steps", ""), self.series.steps)

    def catalog(self) -> list:
        """As SeriesSource.catalog."""
        return self._keep(("catalog", ""), self.series.catalog)

    def matrix(self, stat: str) -> tuple[np.ndarray, np.ndarray]:
        """As SeriesSource.matrix."""
        return self._keep(("matrix", stat), lambda: self.series.matrix(stat))

    def scalar(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """As SeriesSource.scalar."""
        return self._keep(("scalar", name), lambda: self.series.scalar(name))


def _rank_z(v: float) -> float:
    """A spike's size for ordering: a non-finite loss is the biggest."""
    return math.inf if not math.isfinite(v) else v


def _episode_starts(above: np.ndarray, gap: int) -> list[int]:
    """Indices where a run of spike steps starts: one spike per episode (steps within ``gap`` of the
    previous spike step belong to it, as the loss settles back)."""
    starts, last = [], -10 ** 12
    for i in np.flatnonzero(above):
        if i - last > gap:
            starts.append(int(i))
        last = int(i)
    return starts


def _loss(series: "SeriesSource") -> tuple[np.ndarray, np.ndarray]:
    """(steps, loss): the loss scalar, else the mean of a tensor with role "loss"."""
    steps, loss = series.scalar("loss")
    if np.isfinite(loss).any():
        return steps, loss
    for t in series.catalog():
        if t.role == "loss":
            return series.curve(t.name, "mean")
    return steps, loss


def rank_causes(rank: "Rank", series: "SeriesSource", step: int, *, window: int = 50, z: float = 6.0,
                lookback: int | None = None, sources: dict[str, str] | None = None) -> list[Cause]:
    """Every tensor statistic of ``series`` that departed in [step - lookback, step], earliest first
    (then by :data:`STAGE` within the step, then the bigger |z|); one cause per tensor (its earliest,
    biggest statistic)."""
    steps = series.steps()
    end = int(np.searchsorted(steps, step, side="right"))
    look = LOOKBACK if lookback is None else lookback
    lo = max(0, end - 1 - look - 2 * window)   # a window of scored steps before the lookback: the reference
    best: dict[str, tuple[int, float, str]] = {}
    catalog = series.catalog()
    names = [t.name for t in catalog]
    for stat in sorted({s for stats in CAUSE_STATS.values() for s in stats}):
        rows = np.array([stat in CAUSE_STATS.get(t.role, ()) for t in catalog], dtype=bool)
        if not rows.any():
            continue
        _, values = series.matrix(stat)
        _departures(values[rows, lo:end], window, z, steps[lo:end], step - look,
                    [n for n, keep in zip(names, rows) if keep], stat, best)
    for name in SCALAR_CAUSES:
        _, values = series.scalar(name)
        _departures(values[None, lo:end], window, z, steps[lo:end], step - look, [name], "value", best)
    by_name = {t.name: t for t in catalog}
    sources = _layer_sources(rank) if sources is None else sources
    edited = _edited(series, best, by_name, steps, window)
    causes = []
    for name, (first, score, stat) in best.items():
        entry = by_name.get(name)
        param = (entry.param or None) if entry is not None else None
        role = entry.role if entry is not None else ("gradient" if name == "grad_norm" else "scalar")
        layer = _layer_of(param or (name if role == "activation" else None))
        causes.append(Cause(tensor=name, role=role, param=param,
                            stat=stat, first_step=first, lead=step - first, score=score, layer=layer,
                            source=sources.get(layer) if layer else None,
                            outside_optimizer=edited.get(param) == first and role in ("update", "weight")))
    order = {n: i for i, n in enumerate(names)}
    causes.sort(key=lambda c: (c.first_step, EDITED if c.outside_optimizer else STAGE.get(c.role, len(STAGE)),
                               order.get(c.tensor, 0) if c.role == "activation" else -c.score, c.tensor))
    return causes


def _edited(series: "SeriesSource", best: dict[str, tuple[int, float, str]], by_name: dict[str, Any],
            steps: np.ndarray, window: int) -> dict[str, int]:
    """Parameter -> the step its weight was changed outside the optimizer: its update departed there and
    grew OUTSIDE_MARGIN times more than its gradient's and the learning rate's growth explain (each
    against its median over the ``window`` steps before)."""
    updates = {by_name[n].param: first for n, (first, _, _) in best.items()
               if n in by_name and by_name[n].role == "update" and by_name[n].param}
    if not updates:
        return {}
    _, norms = series.matrix("l2norm")
    row = {n: i for i, n in enumerate(by_name)}
    grads = {t.param: row[t.name] for t in by_name.values() if t.role == "gradient" and t.param}
    _, lr = series.scalar("lr")
    out = {}
    for name, t in by_name.items():
        first = updates.get(t.param) if t.role == "update" else None
        j = int(np.searchsorted(steps, first)) if first is not None else 0
        if first is None or j < window or t.param not in grads:
            continue
        grew = _growth(norms[row[name]], j, window)
        explained = max(1.0, _growth(norms[grads[t.param]], j, window)) * max(1.0, _growth(lr, j, window))
        if grew > OUTSIDE_MARGIN * explained:
            out[t.param] = first
    return out


def _growth(values: np.ndarray, j: int, window: int) -> float:
    """|values[j]| over the median |value| of the ``window`` steps before (1 where unknown: NaN, or a zero
    median, as a flat-zero gradient's)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = float(np.nanmedian(np.abs(values[j - window:j])))
        now = abs(float(values[j]))
    if not (math.isfinite(ref) and ref > 0 and math.isfinite(now)):
        return math.inf if ref == 0 and now > 0 and math.isfinite(now) else 1.0
    return now / ref


def _layer_of(name: str | None) -> str | None:
    """The module path of a parameter ("h.0.mlp.c_fc.weight" -> "h.0.mlp.c_fc") or of an activation
    named after its module's output."""
    if not name:
        return None
    return name.rsplit(".", 1)[0] if "." in name else name


def _departures(values: np.ndarray, window: int, threshold: float, steps: np.ndarray, since: int,
                names: list[str], stat: str, best: dict[str, tuple[int, float, str]]) -> None:
    """Record into ``best`` each row's first departure at or after step ``since`` if it beats the one
    known (earlier, or as early and bigger)."""
    if values.shape[-1] <= window:
        return
    zs, _ = trailing_z(values, window)
    zs = np.abs(zs)
    before = steps < since
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # A statistic that often jumps (the min of Adam's second moment) is judged by its own jumps:
        # a departure exceeds, UNPRECEDENTED times, the biggest |z| of the reference steps before.
        reference = np.nan_to_num(np.nanmax(np.where(before, zs, np.nan), axis=1), nan=0.0)
        hit = (zs > threshold) & (zs > UNPRECEDENTED * reference[:, None]) & ~before
    for row in np.flatnonzero(hit.any(axis=1)):
        j = int(np.argmax(hit[row]))
        cand = (int(steps[j]), float(zs[row, j]), stat)
        known = best.get(names[row])
        if known is None or (cand[0], -cand[1]) < (known[0], -known[1]):
            best[names[row]] = cand


def _deep_steps(rank: "Rank") -> list[int]:
    """The rank's deep captures (dump iterations); none when the rank holds only a series."""
    try:
        return rank.iterations()
    except Exception:   # noqa: BLE001 - a series-only rank may have no graphs to ask
        return []


def _nearest(steps: list[int], step: int) -> int | None:
    """The step of ``steps`` nearest ``step`` (the earlier on a tie); None when there is none."""
    return min(steps, key=lambda s: (abs(s - step), s)) if steps else None


def _layer_sources(rank: "Rank") -> dict[str, str]:
    """Layer module path -> "file.py:LINE" of the layer's code, from a deep capture's graphs: the innermost
    frame of its forward nodes outside torch itself (a user's model: the line calling the layer in its
    forward; a library's model: the library's line)."""
    out: dict[str, str] = {}
    try:
        graphs = rank.graphs
    except Exception:   # noqa: BLE001 - no graphs: no code lines
        return out
    for g in graphs.values():
        for node in g.nodes():
            if not node.module or node.module in out or node.is_parameter or node.is_backward:
                continue
            frame = _layer_frame(node.stack)
            if frame is not None:
                out[node.module] = f"{frame.file}:{frame.line}"
    return out


def _layer_frame(frames: "tuple[StackFrame, ...]") -> "StackFrame | None":
    """The innermost frame (frames are innermost first) not in torch's own package."""
    for f in frames:
        parts = f.file.replace("\\", "/").split("/")
        if "torch" not in parts[:-1]:
            return f
    return frames[0] if frames else None
