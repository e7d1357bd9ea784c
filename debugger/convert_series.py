"""The per-step series of any dump (`tdbg convert --series`): each iteration of a rank becomes one step of
its tdbg-h5 series, so a MindSpore statistic.csv run or an msprobe statistics dump reads over time as a
recorder's series does (trends, watchpoints over time, spikes).

A step keeps the outputs of the rank's weights, gradients, optimizer state, losses and activations: their
statistics as the dump stores them (statistics-only dumps) or computed from their values, and, where a
weight's values are dumped at two consecutive iterations, its update (w_t - w_{t-1}). Scalars: the loss
(the mean of the iteration's first loss output) and the gradient norm (when every gradient of a parameter
is known once); the learning rate and loss scale are not in these dumps and stay unknown.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from .errors import DumpError
from .formats.records import Kind
from .formats.tdbg_h5.series import SeriesWriter
from .model import Rank, TensorRef
from .stats import STAT_NAMES, Stats, tensor_stats

ROLE_OF_KIND = {Kind.WEIGHT: "weight", Kind.GRADIENT: "gradient", Kind.OPTIMIZER_STATE: "optimizer_state",
                Kind.LOSS: "loss", Kind.ACTIVATION: "activation"}
UPDATE = ".update"


def series_name(ref: TensorRef) -> str:
    """The series name of a tensor: its node (``node:slot`` past the first output)."""
    return ref.node if ref.slot == 0 else f"{ref.node}:{ref.slot}"


def kept(refs: Iterable[TensorRef]) -> dict[str, TensorRef]:
    """The tensors of one iteration a series keeps, by series name (a name in two graphs: the first)."""
    out: dict[str, TensorRef] = {}
    for ref in refs:
        if ref.io == "output" and ref.kind in ROLE_OF_KIND:
            out.setdefault(series_name(ref), ref)
    return out


class SeriesBuilder:
    """One rank's series, written step by step into ``rank_dir/series`` of a tdbg-h5 target."""

    def __init__(self, rank: Rank, rank_dir: str, iterations: list[int], warnings: list[str]) -> None:
        self.rank = rank
        self.warnings = warnings
        self.iterations = iterations
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
        self._row_of = {n: i for i, n in enumerate(self.names)}
        self._writer = SeriesWriter(rank_dir, self.names, roles=[r for r, _ in catalog.values()],
                                    params=[p for _, p in catalog.values()])
        self._before: dict[str, tuple[int, np.ndarray]] = {}    # a weight's values at the step before

    def add(self, iteration: int) -> None:
        """One iteration as one step."""
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
        self._writer.add(iteration, rows, {"loss": loss, "grad_norm": self._grad_norm(refs, rows)})

    def _stats(self, name: str, ref: TensorRef, iteration: int, rows: np.ndarray) -> Stats | None:
        """The tensor's statistics (stored, or from its values); a weight's update row filled on the way."""
        src = ref.source
        if not src.has_values:
            stored = src.stored_stats()
            return Stats.from_stored(stored) if stored else None
        values = ref.value()
        if name in self._weights:
            before = self._before.get(name)
            if before is not None and before[0] == iteration - 1 and before[1].shape == values.shape:
                delta = values.astype(np.float64) - before[1]
                rows[self._row_of[name + UPDATE]] = stats_values(tensor_stats(delta))
            self._before[name] = (iteration, np.array(values, dtype=np.float64))
        return tensor_stats(values)

    def _grad_norm(self, refs: dict[str, TensorRef], rows: np.ndarray) -> float:
        """The global L2 norm of the parameters' gradients; NaN unless each has exactly one, with its norm."""
        by_param: dict[str, list[str]] = {}
        for name, ref in refs.items():
            if ref.kind == Kind.GRADIENT and ref.param:
                by_param.setdefault(ref.param, []).append(name)
        if not by_param or any(len(v) != 1 for v in by_param.values()):
            return math.nan
        l2 = rows[[self._row_of[v[0]] for v in by_param.values()], STAT_NAMES.index("l2norm")]
        return float(np.sqrt(np.sum(l2 * l2)))     # NaN when one is unknown

    def close(self) -> None:
        """Write what is pending."""
        self._writer.close()


def stats_values(s: Stats) -> list[float]:
    """A Stats as one series row (STAT_NAMES order, NaN unknown)."""
    return [math.nan if v is None else float(v) for v in (getattr(s, n) for n in STAT_NAMES)]
