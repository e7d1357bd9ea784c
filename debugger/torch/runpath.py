"""One dump, one run at a time: a recorder never writes into a rank folder that already holds a recorded run
(its iterations would replace the earlier run's, and every reader would judge the mixture as one run),
unless asked to resume it (``Recorder(resume=True)``, after a checkpoint restart): then the new run's
iterations, graphs and series steps follow everything already there, and the rank's metadata lists both
runs with the iteration where each began."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..formats.tdbg_h5.layout import GRAPH_RE, ITERATION_RE, RANK_JSON, rank_dir_name
from ..formats.tdbg_h5.series import SEGMENT_RE, SERIES_DIR


@dataclass
class EarlierRun:
    """What a rank folder holds of the runs recorded there before."""

    rank_dir: str
    iterations: list[int]
    graph_ids: list[int]
    series_steps: list[int]                    # the last step of each series segment
    metadata: dict[str, Any] = field(default_factory=dict)    # rank.json's "metadata"
    saved: str | None = None

    @property
    def empty(self) -> bool:
        """Nothing recorded."""
        return not (self.iterations or self.graph_ids or self.series_steps)

    @property
    def next_iteration(self) -> int:
        """The first iteration number no earlier run used (deep or in the series)."""
        return max(self.iterations + self.series_steps, default=-1) + 1

    @property
    def next_graph_id(self) -> int:
        """The first graph id no earlier run used."""
        return max(self.graph_ids, default=-1) + 1

    def runs(self) -> list[dict[str, Any]]:
        """The earlier runs as the metadata lists them (one, from iteration 0, when it lists none)."""
        listed = self.metadata.get("runs")
        if isinstance(listed, list) and listed:
            return [dict(r) for r in listed if isinstance(r, dict)]
        return [{"first_iteration": 0, "levels": self.metadata.get("levels"), "series": self.metadata.get("series")}]


def earlier_run(root: str, rank: int) -> EarlierRun:
    """What rank ``rank`` of the dump at ``root`` holds already."""
    rank_dir = os.path.join(os.path.abspath(root), rank_dir_name(rank))
    held = _listed(rank_dir)
    its = sorted(int(m.group(1)) for n in held if (m := ITERATION_RE.match(n)))
    graphs = sorted(int(m.group(1)) for n in held if (m := GRAPH_RE.match(n)))
    steps = sorted(int(m.group(2)) for n in _listed(os.path.join(rank_dir, SERIES_DIR)) if (m := SEGMENT_RE.match(n)))
    meta, saved = _rank_json(rank_dir)
    return EarlierRun(rank_dir, its, graphs, steps, meta, saved)


def refuse_earlier_run(root: str, rank: int) -> None:
    """FileExistsError naming the folder when rank ``rank`` of the dump at ``root`` was recorded before."""
    held = earlier_run(root, rank)
    if held.empty:
        return
    what = ", ".join(p for p in (f"{len(held.iterations)} iteration(s)" if held.iterations else "",
                                 f"{len(held.graph_ids)} graph(s)" if held.graph_ids else "",
                                 f"{len(held.series_steps)} series segment(s)" if held.series_steps else "") if p)
    raise FileExistsError(f"{held.rank_dir} already holds a recorded run ({what}): a new run there would mix with "
                          "it (its iterations replacing the earlier ones); record into a new folder, remove this "
                          "one, or continue it after a restart with Recorder(..., resume=True)")


def resumed_runs(held: EarlierRun, saved: str, levels: Any, series: bool) -> list[dict[str, Any]]:
    """The rank's runs with this one added, resuming ``held`` (ValueError when it cannot be resumed: it was
    recorded in another save mode, whose files would not read as one rank)."""
    if held.saved is not None and held.saved != saved:
        raise ValueError(f"{held.rank_dir} was recorded with save={held.saved!r}; resume it with the same save "
                         f"mode (asked: {saved!r}), or record into a new folder")
    return held.runs() + [{"first_iteration": held.next_iteration, "resumed": True, "levels": levels,
                           "series": series, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}]


def _rank_json(rank_dir: str) -> tuple[dict[str, Any], str | None]:
    try:
        with open(os.path.join(rank_dir, RANK_JSON), encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError):
        return {}, None
    if not isinstance(raw, dict):
        return {}, None
    meta = raw.get("metadata")
    return (meta if isinstance(meta, dict) else {}), raw.get("saved")


def _listed(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:         # absent (a new dump), or unreadable: the writer then says so
        return []
