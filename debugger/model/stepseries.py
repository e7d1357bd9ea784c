"""A rank's per-step series read from its recorded iterations: each iteration is one step, so a dump recorded
every step (or most) at any level reads over time as a recorder's series does (trends, watchpoints over time,
spikes), with no series files. ``tdbg convert --series`` writes the same rows to a series of its own.

A step keeps the outputs of the rank's weights, gradients, optimizer state, losses and activations: their
statistics as the dump stores them (statistics-only dumps) or computed from their values, and, where a
weight's values are dumped at two consecutive iterations, its update (w_t - w_{t-1}). Scalars: the loss (the
mean of the iteration's first loss output) and the gradient norm (when every gradient of a parameter is
known once); the learning rate and loss scale are not in these dumps and stay unknown.

A step that was not recorded is no step of the series: it is missing, never filled in, and the series'
warnings name every such gap.
"""
from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Iterable

import numpy as np

from ..errors import DumpError
from ..formats.base import SeriesSource
from ..formats.records import Kind, SeriesTensor
from ..common.selection import ranges_text
from ..stats import service
from ..stats.core import STAT_NAMES, Stats, tensor_stats

if TYPE_CHECKING:
    from .rank import Rank
    from .tensors import TensorRef

ROLE_OF_KIND = {Kind.WEIGHT: "weight", Kind.GRADIENT: "gradient", Kind.OPTIMIZER_STATE: "optimizer_state",
                Kind.LOSS: "loss", Kind.ACTIVATION: "activation"}
UPDATE = ".update"
# A rank's iterations read as its series when they are this many at least and cover at least this share of
# the steps from the first to the last: a run recorded every step, or most (a few deep captures of a long
# run are no series: their gaps would be the series).
MIN_STEPS = 10
MIN_COVER = 0.5
_STAT_COL = {s: i for i, s in enumerate(STAT_NAMES)}
SCALARS = ("loss", "lr", "loss_scale", "grad_norm")     # as a recorded series' (formats.base.SeriesSource)


def _column(stat: str) -> int:
    """The column of a statistic (DumpError: no such statistic, as a recorded series says)."""
    if stat not in _STAT_COL:
        raise DumpError(None, f"unknown statistic {stat!r}; known: {', '.join(STAT_NAMES)}")
    return _STAT_COL[stat]


def series_name(ref: "TensorRef") -> str:
    """The series name of a tensor: its node (``node:slot`` past the first output)."""
    return ref.node if ref.slot == 0 else f"{ref.node}:{ref.slot}"


def kept(refs: Iterable["TensorRef"]) -> dict[str, "TensorRef"]:
    """The tensors of one iteration a series keeps, by series name (a name in two graphs: the first)."""
    out: dict[str, "TensorRef"] = {}
    for ref in refs:
        if ref.io == "output" and ref.kind in ROLE_OF_KIND:
            out.setdefault(series_name(ref), ref)
    return out


def stats_values(s: Stats) -> list[float]:
    """A Stats as one series row (STAT_NAMES order, NaN unknown)."""
    return [math.nan if v is None else float(v) for v in (getattr(s, n) for n in STAT_NAMES)]


class StepRows:
    """The series rows of a rank's iterations, one step per iteration: the tensors (:attr:`names`, with their
    roles and parameters) and, per iteration, their statistics and the scalars."""

    def __init__(self, rank: "Rank", iterations: list[int], warnings: list[str]) -> None:
        self.rank = rank
        self.warnings = warnings
        catalog: dict[str, tuple[str, str | None]] = {}
        self._weights: set[str] = set()
        for it in iterations:
            for name, ref in kept(rank.tensors(iteration=it, local=True)).items():
                catalog.setdefault(name, (ROLE_OF_KIND[ref.kind], ref.param))
                if ref.kind == Kind.WEIGHT and ref.source.has_values:
                    self._weights.add(name)
        for name in sorted(self._weights):
            catalog[name + UPDATE] = ("update", catalog[name][1])
        self.names = list(catalog)
        self.roles = [r for r, _ in catalog.values()]
        self.params = [p for _, p in catalog.values()]
        self._row_of = {n: i for i, n in enumerate(self.names)}
        self._before: dict[str, tuple[int, np.ndarray]] = {}    # a weight's values at the step before

    def row(self, iteration: int) -> tuple[np.ndarray, dict[str, float]]:
        """One iteration as one step: (tensors x STAT_NAMES, NaN unknown; {"loss", "grad_norm"})."""
        rows = np.full((len(self.names), len(STAT_NAMES)), np.nan)
        refs = kept(self.rank.tensors(iteration=iteration, local=True))
        loss = math.nan
        for name, ref in refs.items():
            try:
                stats = self._stats(name, ref, iteration, rows)
            except DumpError as exc:
                self.warnings.append(f"{exc}; not in the series")
                continue
            if stats is None:
                continue
            rows[self._row_of[name]] = stats_values(stats)
            if ref.kind == Kind.LOSS and math.isnan(loss) and stats.mean is not None:
                loss = stats.mean
        return rows, {"loss": loss, "grad_norm": self._grad_norm(refs, rows)}

    def _stats(self, name: str, ref: "TensorRef", iteration: int, rows: np.ndarray) -> Stats | None:
        """The tensor's statistics (stored, or from its values); a weight's update row filled on the way."""
        src = ref.source
        if not src.has_values:
            stored = src.stored_stats()
            return Stats.from_stored(stored) if stored else None
        if name in self._weights:
            values = ref.value()
            before = self._before.get(name)
            if before is not None and before[0] == iteration - 1 and before[1].shape == values.shape:
                delta = values.astype(np.float64) - before[1]
                rows[self._row_of[name + UPDATE]] = stats_values(tensor_stats(delta))
            self._before[name] = (iteration, np.array(values, dtype=np.float64))
        return service.statistics(src)

    def _grad_norm(self, refs: dict[str, "TensorRef"], rows: np.ndarray) -> float:
        """The global L2 norm of the parameters' gradients; NaN unless each has exactly one, with its norm."""
        by_param: dict[str, list[str]] = {}
        for name, ref in refs.items():
            if ref.kind == Kind.GRADIENT and ref.param:
                by_param.setdefault(ref.param, []).append(name)
        if not by_param or any(len(v) != 1 for v in by_param.values()):
            return math.nan
        l2 = rows[[self._row_of[v[0]] for v in by_param.values()], _STAT_COL["l2norm"]]
        return float(np.sqrt(np.sum(l2 * l2)))     # NaN when one is unknown


def reads_as_series(iterations: list[int]) -> bool:
    """Whether recorded iterations are a run recorded every step, or most (MIN_STEPS, MIN_COVER)."""
    if len(iterations) < MIN_STEPS:
        return False
    return len(iterations) >= MIN_COVER * (iterations[-1] - iterations[0] + 1)


def gaps(iterations: list[int]) -> list[int]:
    """The steps between the first and the last recorded iteration that were not recorded."""
    have = set(iterations)
    return [s for s in range(iterations[0], iterations[-1] + 1) if s not in have] if iterations else []


class IterationSeries(SeriesSource):
    """The per-step series of a rank without series files, read from its recorded iterations (each one a
    step; the steps not recorded are missing, named in :attr:`warnings`). Read on first use, then kept."""

    origin = "iterations"

    def __init__(self, rank: "Rank", iterations: list[int]) -> None:
        self.rank = rank
        self.iterations = list(iterations)
        missing = gaps(self.iterations)
        self.warnings: list[str] = [] if not missing else [
            f"rank {rank.rank}: the per-step series is read from the recorded iterations, and steps "
            f"{ranges_text(missing)} ({len(missing)} of {self.iterations[-1] - self.iterations[0] + 1}) were not "
            "recorded: they are missing from it, not filled in"]
        self._rows: StepRows | None = None
        self._table: tuple[np.ndarray, dict[str, np.ndarray]] | None = None
        self._lock = threading.RLock()      # the web server's threads share one rank's series

    def _step_rows(self) -> StepRows:
        with self._lock:
            if self._rows is None:
                self._rows = StepRows(self.rank, self.iterations, self.warnings)
            return self._rows

    def _read(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(tensors x steps x STAT_NAMES, {scalar: steps}): every iteration read once (one thread at a time:
        the rows carry each weight's previous values from step to step)."""
        with self._lock:
            if self._table is None:
                self._table = self._read_all()
            return self._table

    def _read_all(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        rows = self._step_rows()
        values = np.full((len(rows.names), len(self.iterations), len(STAT_NAMES)), np.nan)
        scalars: dict[str, np.ndarray] = {"loss": np.full(len(self.iterations), np.nan),
                                          "grad_norm": np.full(len(self.iterations), np.nan)}
        for j, it in enumerate(self.iterations):
            values[:, j, :], step_scalars = rows.row(it)
            for name, v in step_scalars.items():
                scalars[name][j] = v
        return values, scalars

    def catalog(self) -> list[SeriesTensor]:
        """Every tensor of the recorded iterations, first seen first (updates of weights with values last)."""
        rows = self._step_rows()
        return [SeriesTensor(n, r, p) for n, r, p in zip(rows.names, rows.roles, rows.params)]

    def first_step_catalog(self) -> list[SeriesTensor]:
        """The tensors of the first step alone (cheap: one iteration read, where :meth:`catalog` reads all)."""
        refs = kept(self.rank.tensors(iteration=self.iterations[0], local=True))
        return [SeriesTensor(n, ROLE_OF_KIND[r.kind], r.param) for n, r in refs.items()]

    def steps(self) -> np.ndarray:
        """The recorded iterations, in order."""
        return np.asarray(self.iterations, dtype=np.int64)

    def curve(self, tensor: str, stat: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one statistic of one tensor (all NaN: a tensor the iterations do not hold)."""
        col = _column(stat)
        names = self._step_rows().names
        if tensor not in names:
            return self.steps(), np.full(len(self.iterations), np.nan)
        return self.steps(), self._read()[0][names.index(tensor), :, col].copy()

    def matrix(self, stat: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, tensors x steps) of one statistic."""
        return self.steps(), self._read()[0][:, :, _column(stat)].copy()

    def scalar(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values): the loss and gradient norm; lr and loss_scale all NaN (not in the iterations)."""
        if name not in SCALARS:
            raise DumpError(None, f"unknown scalar {name!r}; known: {', '.join(SCALARS)}")
        got = self._read()[1].get(name)
        return self.steps(), got.copy() if got is not None else np.full(len(self.iterations), np.nan)

    def fingerprint(self) -> str:
        """The recorded iterations (a running job's new iteration changes it)."""
        return f"iterations:{len(self.iterations)}:{self.iterations[0]}:{self.iterations[-1]}"


def iteration_series(rank: "Rank", iterations: list[int]) -> IterationSeries | None:
    """An :class:`IterationSeries` of ``iterations`` when they read as a series (:func:`reads_as_series`),
    else None."""
    return IterationSeries(rank, iterations) if reads_as_series(iterations) else None
