"""The per-step statistics series of a tdbg-h5 rank (formats/tdbg_h5/series.py): values back as written,
immutable segments that a crash or a running writer never leaves half-written, bounded and checked reads."""
from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest

from debugger import open_dump
from debugger.errors import CorruptFileError
from debugger.formats.records import GraphRecord, Kind, NodeRecord, OutputType
from debugger.formats.tdbg_h5.series import SCALARS, SeriesReader, SeriesWriter
from debugger.formats.tdbg_h5.writer import DumpWriter
from debugger.stats.core import COUNT_NAMES, STAT_NAMES


def _stats(step: int, tensors: int) -> np.ndarray:
    rng = np.random.default_rng(step)
    a = np.zeros((tensors, len(STAT_NAMES)))
    a[:, :len(COUNT_NAMES)] = rng.integers(0, 1000, (tensors, len(COUNT_NAMES)))
    a[:, len(COUNT_NAMES):] = rng.standard_normal((tensors, len(STAT_NAMES) - len(COUNT_NAMES)))
    return a


def test_steps_come_back_as_written_across_segments(tmp_path: Any) -> None:
    names = ["fc1.weight", "fc1.weight.grad", "fc2.weight"]
    written = {s: _stats(s, 3) for s in range(0, 25, 2)}        # steps 0, 2, ... 24: 13 steps
    written[6][1, STAT_NAMES.index("nan")] = math.nan            # unknown
    written[8][2, STAT_NAMES.index("max")] = math.nan
    with SeriesWriter(str(tmp_path), names, segment_steps=5) as w:
        for s, a in written.items():
            w.add(s, a, {"loss": 10.0 - s / 10, "lr": 1e-3} if s != 4 else {"loss_scale": 1024.0})
    r = SeriesReader(str(tmp_path))
    assert [(g.first, g.last) for g in r.segments] == [(0, 8), (10, 18), (20, 24)] and r.warnings == []
    assert r.tensors() == names and r.steps().tolist() == list(written)
    for t, name in enumerate(names):
        for k, stat in enumerate(STAT_NAMES):
            steps, got = r.curve(name, stat)
            want = np.array([written[s][t, k] for s in steps])
            if stat in COUNT_NAMES:
                assert np.array_equal(got, want, equal_nan=True), (name, stat)
            else:      # stored as float32
                assert np.array_equal(got, want.astype(np.float32).astype(np.float64), equal_nan=True), (name, stat)
    steps, loss = r.scalar("loss")
    assert loss[steps.tolist().index(4)] != loss[steps.tolist().index(4)]    # NaN: not given at step 4
    assert loss[steps.tolist().index(20)] == pytest.approx(8.0)
    assert r.scalar("loss_scale")[1][2] == 1024.0 and set(SCALARS) >= {"loss", "lr", "loss_scale"}


def test_one_array_refilled_every_step_is_kept_step_by_step(tmp_path: Any) -> None:
    row = np.zeros((1, len(STAT_NAMES)))
    with SeriesWriter(str(tmp_path), ["w"], segment_steps=4) as w:
        for s in range(6):
            row[0, STAT_NAMES.index("mean")] = s      # a recorder fills one buffer in place
            w.add(s, row)
    assert SeriesReader(str(tmp_path)).curve("w", "mean")[1].tolist() == [0, 1, 2, 3, 4, 5]


def test_a_tensor_absent_from_a_segment_is_nan_there(tmp_path: Any) -> None:
    with SeriesWriter(str(tmp_path), ["a"]) as w:
        w.add(0, _stats(0, 1))
    with SeriesWriter(str(tmp_path), ["a", "b"]) as w:        # the model grew a tensor (a new head)
        w.add(1, _stats(1, 2))
    r = SeriesReader(str(tmp_path))
    steps, b = r.curve("b", "mean")
    assert steps.tolist() == [0, 1] and math.isnan(b[0]) and not math.isnan(b[1]) and r.tensors() == ["a", "b"]


def test_a_writer_that_dies_leaves_only_whole_segments(tmp_path: Any) -> None:
    """A child process writes 12 steps in segments of 5 and is killed before closing: the two flushed
    segments are read, the pending steps are lost, and a temporary file left behind is a warning."""
    pid = os.fork()
    if pid == 0:   # the training process
        try:
            w = SeriesWriter(str(tmp_path), ["w"], segment_steps=5)
            for s in range(12):
                w.add(s, _stats(s, 1))
            with open(os.path.join(w.folder, ".steps_0000000010-0000000011.h5.999.abcd.tmp"), "wb") as f:
                f.write(b"\x89HDF half")      # what a kill during a flush leaves
        finally:
            os._exit(0)                        # no close, no flush
    os.waitpid(pid, 0)
    r = SeriesReader(str(tmp_path))
    assert r.steps().tolist() == list(range(10))
    assert len(r.warnings) == 1 and "incomplete segment" in r.warnings[0]


def test_bad_input_is_refused_by_the_writer(tmp_path: Any) -> None:
    w = SeriesWriter(str(tmp_path), ["a", "b"])
    with pytest.raises(ValueError, match="shape"):
        w.add(0, np.zeros((3, len(STAT_NAMES))))
    w.add(5, _stats(5, 2))
    with pytest.raises(ValueError, match="steps only grow"):
        w.add(5, _stats(5, 2))
    with pytest.raises(ValueError, match="unknown scalars"):
        w.add(6, _stats(6, 2), {"los": 1.0})
    with pytest.raises(ValueError, match="distinct"):
        SeriesWriter(str(tmp_path), ["a", "a"])


@pytest.mark.parametrize("damage", ["truncated", "dataset removed"])
def test_a_damaged_segment_loses_its_steps_only_and_is_named(tmp_path: Any, damage: str) -> None:
    """Three segments, the middle one damaged (cut short by a full disk, or a table deleted): the other
    two are read (steps, curves), and a warning names the file and the steps lost; the dump still opens."""
    import h5py
    with SeriesWriter(str(tmp_path), ["a"], segment_steps=5) as w:
        for step in range(15):
            w.add(step, _stats(step, 1))
    folder = os.path.join(str(tmp_path), "series")
    seg = os.path.join(folder, sorted(n for n in os.listdir(folder) if n.endswith(".h5"))[1])   # no reader has it open
    if damage == "truncated":
        with open(seg, "r+b") as f:
            f.truncate(200)
    else:
        with h5py.File(seg, "r+") as f:
            del f["stats/mean"]
    r = SeriesReader(str(tmp_path))
    assert r.steps().tolist() == [*range(5), *range(10, 15)]
    assert r.curve("a", "mean")[0].tolist() == r.steps().tolist()
    assert len(r.warnings) == 1 and r.warnings[0].startswith(seg) and "steps 5-9 of the series are lost" in r.warnings[0]


def test_a_segment_damaged_inside_its_values_names_its_file(tmp_path: Any) -> None:
    """Damage the listing cannot see (a table of the right shape whose data is gone) still fails naming
    the file, never as an error of no file."""
    with SeriesWriter(str(tmp_path), ["a"]) as w:
        w.add(0, _stats(0, 1))
    r = SeriesReader(str(tmp_path))
    seg = r.segments[0].path
    with pytest.raises(CorruptFileError) as err:
        r._read(r.segments[0], lambda f: f["no/such/table"])
    assert seg in str(err.value)


def _one_weight_dump(root: str) -> None:
    """A tdbg-h5 dump of one weight at iteration 0 (the series is added beside it)."""
    graph = GraphRecord(0, "step", [NodeRecord("w", "Parameter", "", outputs=[OutputType("float32", (2,))],
                                               is_parameter=True, has_default=True, kind=Kind.WEIGHT, param="w")],
                        outputs=[], source_file="", execution_order=[])
    with DumpWriter(root, rank=0, saved="values", framework="PyTorch", framework_version="2", device_target="CPU") as w:
        w.write_graph(graph)
        with w.iteration(0) as it:
            it.add(0, "w", "Parameter", "output", 0, values=np.ones(2, np.float32))


def test_a_dump_with_a_series_opens_as_before(tmp_path: Any) -> None:
    """The series folder is additive: the dump's reader neither reads nor warns about it."""
    root = str(tmp_path / "d")
    _one_weight_dump(root)
    with SeriesWriter(os.path.join(root, "rank_0"), ["w"]) as s:
        s.add(0, _stats(0, 1))
    d = open_dump(root)
    assert d.all_warnings() == [] and d.rank(0).iterations() == [0]


def test_a_dump_whose_only_segment_is_damaged_still_opens(tmp_path: Any) -> None:
    """info reads the dump (exit 0) and names the lost segment; spikes, which needs the series, says that the
    dump has none and why (the warning), instead of an error naming no file."""
    from clirun import run_cli
    root = str(tmp_path / "d")
    _one_weight_dump(root)
    with SeriesWriter(os.path.join(root, "rank_0"), ["w"]) as s:
        for step in range(30):
            s.add(step, _stats(step, 1), {"loss": 1.0})
    folder = os.path.join(root, "rank_0", "series")
    seg = os.path.join(folder, os.listdir(folder)[0])
    with open(seg, "r+b") as f:
        f.truncate(300)
    info = run_cli("info", root, "--json")
    assert info.code == 0 and any(w.startswith(seg) and "steps 0-29" in w for w in info.json["warnings"])
    spikes = run_cli("spikes", root)
    assert spikes.code == 2 and "no per-step series" in spikes.err and seg in spikes.err


def test_overlapping_segments_are_said(tmp_path: Any) -> None:
    """A run resumed from an earlier checkpoint writes steps again: both segments are read, with a warning."""
    with SeriesWriter(str(tmp_path), ["w"]) as w:
        for s in range(10):
            w.add(s, _stats(s, 1))
    with SeriesWriter(str(tmp_path), ["w"]) as w:
        for s in range(8, 12):
            w.add(s, _stats(s, 1))
    r = SeriesReader(str(tmp_path))
    assert len(r.steps()) == 14 and len(r.warnings) == 1 and "overlap" in r.warnings[0]


def test_roles_params_and_the_whole_matrix_through_the_model(tmp_path: Any) -> None:
    """A dump's rank hands its series out through the reader seam: catalog, and each statistic's matrix
    read whole, tensors absent from a segment NaN there."""
    root = str(tmp_path / "d")
    w = DumpWriter(root, 0, "statistics", framework="PyTorch")
    w.close()
    rank_dir = os.path.join(root, "rank_0")
    with SeriesWriter(rank_dir, ["w", "w.grad"], roles=["weight", "gradient"], params=["w", "w"],
                      segment_steps=3) as sw:
        for s in range(3):
            sw.add(s, _stats(s, 2), {"loss": float(s)})
    with SeriesWriter(rank_dir, ["w.grad", "exp_avg_sq.w"], roles=["gradient", "optimizer_state"],
                      params=["w", "w"]) as sw:
        sw.add(3, _stats(3, 2))
    series = open_dump(root).rank(0).series
    assert series is not None
    assert [(t.name, t.role, t.param) for t in series.catalog()] == [
        ("w", "weight", "w"), ("w.grad", "gradient", "w"), ("exp_avg_sq.w", "optimizer_state", "w")]
    steps, m = series.matrix("max")
    assert steps.tolist() == [0, 1, 2, 3] and m.shape == (3, 4)
    k = STAT_NAMES.index("max")
    assert m[0, :3].tolist() == [np.float32(_stats(s, 2)[0, k]) for s in range(3)] and math.isnan(m[0, 3])
    assert m[1, 3] == np.float32(_stats(3, 2)[0, k]) and np.isnan(m[2, :3]).all()
    for t, name in enumerate(series.tensors()):
        assert np.array_equal(series.curve(name, "max")[1], m[t], equal_nan=True)


def test_a_rank_without_series_says_none(tmp_path: Any) -> None:
    root = str(tmp_path / "d")
    DumpWriter(root, 0, "statistics", framework="PyTorch").close()
    assert open_dump(root).rank(0).series is None


def test_unknown_roles_are_refused(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="unknown roles"):
        SeriesWriter(str(tmp_path), ["w"], roles=["weights"])
