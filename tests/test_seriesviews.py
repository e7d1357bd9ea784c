"""debugger.views.series' arithmetic on plain arrays: buckets split the step range evenly by step (gaps stay
gaps), each bucket's min, max and mean ignore unknown values, and a tensor's layer comes from its parameter."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from debugger.errors import InvalidQueryError
from debugger.formats.records import SeriesTensor
from debugger.views.series import bucket_edges, check_range, decimate, layer_of


def test_buckets_split_steps_evenly_and_skip_gaps() -> None:
    steps = np.array([0, 1, 2, 3, 10, 11, 12, 13, 14, 15])     # a run resumed at step 10
    starts, first = bucket_edges(steps, 4)                      # width 4: [0,4) [4,8) [8,12) [12,16)
    assert starts.tolist() == [0, 4, 6] and first.tolist() == [0, 10, 12]    # [4,8) holds no step
    starts, first = bucket_edges(steps, 50)
    assert first.tolist() == steps.tolist()


def test_decimate_keeps_a_lone_spike_and_ignores_nan() -> None:
    rng = np.random.default_rng(1)
    steps = np.arange(1000)
    values = rng.random(1000)
    values[437] = 100.0
    values[500:520] = np.nan
    d = decimate(steps, values, None, None, 10)
    assert d["x"] == list(range(0, 1000, 100)) and not d["exact"]
    blocks = values.reshape(10, 100)
    assert d["max"] == pytest.approx(np.nanmax(blocks, axis=1).tolist())
    assert d["min"] == pytest.approx(np.nanmin(blocks, axis=1).tolist())
    assert d["mean"] == pytest.approx(np.nanmean(blocks, axis=1).tolist())
    assert d["max"][4] == 100.0
    z = decimate(steps, values, 505, 510, 10)
    assert z["exact"] and z["x"] == list(range(505, 511)) and z["max"] == [None] * 6
    assert all(v is None or math.isfinite(v) for v in d["max"])


def test_a_range_that_ends_before_it_starts_is_refused() -> None:
    check_range(3, 3)
    with pytest.raises(InvalidQueryError, match="start after stop"):
        check_range(4, 3)


@pytest.mark.parametrize("tensor, layer", [
    (SeriesTensor("fc1.weight", "weight", "fc1.weight"), "fc1"),
    (SeriesTensor("exp_avg_sq.layers.0.attn.weight", "optimizer_state", "layers.0.attn.weight"), "layers.0.attn"),
    (SeriesTensor("fc1.weight.grad", "gradient", None), "fc1"),
    (SeriesTensor("fc1.weight.update", "update", None), "fc1"),
    (SeriesTensor("bias", "weight", "bias"), "(model)"),
    (SeriesTensor("loss", "loss", None), "(model)"),
])
def test_the_layer_of_a_series_tensor(tensor: SeriesTensor, layer: str) -> None:
    assert layer_of(tensor) == layer


def test_the_heatmap_of_a_grown_series_has_its_new_steps(tmp_path: Any) -> None:
    """The kept matrix belongs to one series as listed: a dump opened again after the writer added a
    segment shows the new steps."""
    from debugger import open_dump
    from debugger.formats.tdbg_h5.series import SeriesWriter
    from debugger.formats.tdbg_h5.writer import DumpWriter
    from debugger.views.series import heatmap
    from debugger.stats.core import STAT_NAMES

    root = str(tmp_path / "d")
    DumpWriter(root, 0, "statistics", framework="PyTorch").close()
    rows = lambda step: np.full((2, len(STAT_NAMES)), float(step))   # noqa: E731
    with SeriesWriter(f"{root}/rank_0", ["a", "b"], roles=["weight"] * 2) as w:
        for step in range(4):
            w.add(step, rows(step))
    first = heatmap(open_dump(root).rank(0), "max", columns=100)
    assert first["x"] == [0, 1, 2, 3] and first["values"][1] == [0.0, 1.0, 2.0, 3.0]
    with SeriesWriter(f"{root}/rank_0", ["a", "b"], roles=["weight"] * 2) as w:
        w.add(4, rows(4))
    again = heatmap(open_dump(root).rank(0), "max", columns=100, start=2)
    assert again["x"] == [2, 3, 4] and again["values"][0] == [2.0, 3.0, 4.0]


def test_spikes_of_a_grown_series_are_found_again(tmp_path: Any) -> None:
    """The kept spikes answer belongs to the series as listed: a spike written later is found once the dump is
    opened again (as a followed run's view refreshes)."""
    from debugger import open_dump
    from debugger.formats.tdbg_h5.series import SeriesWriter
    from debugger.formats.tdbg_h5.writer import DumpWriter
    from debugger.views.series import spikes
    from debugger.stats.core import STAT_NAMES

    root = str(tmp_path / "d")
    DumpWriter(root, 0, "statistics", framework="PyTorch").close()
    rng = np.random.default_rng(0)
    row = np.ones((1, len(STAT_NAMES)))
    with SeriesWriter(f"{root}/rank_0", ["w"], roles=["weight"]) as w:
        for step in range(60):
            w.add(step, row, {"loss": 1.0 + 0.01 * rng.standard_normal()})
    assert spikes(open_dump(root).rank(0)) == {"available": True, "window": 30, "spikes": []}   # min(50, 60 // 2)
    with SeriesWriter(f"{root}/rank_0", ["w"], roles=["weight"]) as w:
        w.add(60, row, {"loss": 50.0})
    found = spikes(open_dump(root).rank(0))["spikes"]
    assert [s["step"] for s in found] == [60] and found[0]["deep"] is None
