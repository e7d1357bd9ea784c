"""The per-step series of any dump (`tdbg convert --series`): each iteration of a rank becomes one step of
its tdbg-h5 series, so a MindSpore statistic.csv run or an msprobe statistics dump reads over time as a
recorder's series does (trends, watchpoints over time, spikes).

The rows are the model's (:class:`debugger.model.stepseries.StepRows`, which also reads a dump recorded
every step as its series without converting it): the outputs of the rank's weights, gradients, optimizer
state, losses and activations, a weight's update where its values are dumped at two consecutive
iterations, the loss and the gradient norm; the learning rate and loss scale are not in these dumps and
stay unknown.
"""
from __future__ import annotations

from ..formats.tdbg_h5.series import SeriesWriter
from ..model import Rank
from ..model.stepseries import StepRows


class SeriesBuilder:
    """One rank's series, written step by step into ``rank_dir/series`` of a tdbg-h5 target."""

    def __init__(self, rank: Rank, rank_dir: str, iterations: list[int], warnings: list[str]) -> None:
        self.rows = StepRows(rank, iterations, warnings)
        self.iterations = iterations
        self._writer = SeriesWriter(rank_dir, self.rows.names, roles=self.rows.roles, params=self.rows.params)

    def add(self, iteration: int) -> None:
        """One iteration as one step."""
        self._writer.add(iteration, *self.rows.row(iteration))

    def close(self) -> None:
        """Write what is pending."""
        self._writer.close()
