"""A run recorded every step at level "parameters" without series files reads its iterations as its per-step
series (debugger.model.stepseries): `tdbg spikes` finds a planted spike and a healthy run is quiet; steps not
recorded are missing and said; a few deep captures are no series; `scan --follow` reads it too."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

import stepsrun  # noqa: E402
from clirun import run_cli  # noqa: E402

from debugger.model import open_dump  # noqa: E402


@pytest.fixture(scope="module")
def runs(tmp_path_factory: Any) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("paramsrun")
    healthy, spiked = str(base / "healthy"), str(base / "spiked")
    return {"healthy": healthy, "healthy_loss": stepsrun.train(healthy),
            "spiked": spiked, "spiked_loss": stepsrun.train(spiked, plant=stepsrun.PLANT)}


def test_the_recorded_iterations_are_the_series(runs: dict[str, Any]) -> None:
    """Each iteration one step: the loss as the loop computed it, every weight and gradient by parameter."""
    series = open_dump(runs["spiked"]).rank(0).series
    assert series is not None and series.origin == "iterations" and series.warnings == []
    assert series.steps().tolist() == list(range(stepsrun.STEPS))
    steps, loss = series.scalar("loss")
    assert np.array_equal(loss.astype(np.float32), runs["spiked_loss"])
    assert np.isnan(series.scalar("lr")[1]).all()             # not in the dump: unknown, not made up
    roles = {t.name: (t.role, t.param) for t in series.catalog()}
    assert roles["0.weight"] == ("weight", "0.weight") and roles["2.bias.grad"] == ("gradient", "2.bias")
    _, l2 = series.curve("0.weight.grad", "l2norm")
    assert l2.shape == (stepsrun.STEPS,) and np.isfinite(l2).all()
    info = run_cli("info", runs["spiked"], "--json")
    assert info.json["ranks"][0]["series"]["origin"] == "iterations"


def test_spikes_finds_the_planted_spike_and_a_healthy_run_is_quiet(runs: dict[str, Any]) -> None:
    """30 steps, no series=True: the lr x100 at step 20 spikes the loss at 21; the window is half the run (15)."""
    r = run_cli("spikes", runs["spiked"], "--json")
    assert r.code == 1, r.err
    assert r.json["series"] == "iterations" and r.json["window"] == 15 and r.json["steps"] == stepsrun.STEPS
    assert [s["step"] for s in r.json["spikes"]] == [stepsrun.PLANT + 1]
    assert r.json["spikes"][0]["causes"][0]["role"] in ("gradient", "weight")
    r = run_cli("spikes", runs["spiked"])
    assert r.code == 1 and "the 30 recorded iterations are its steps" in r.out and "15-step window" in r.out
    r = run_cli("spikes", runs["healthy"])
    assert r.code == 0 and "no loss spike" in r.out, r.out


def test_a_short_run_recorded_every_step_finds_its_spike(tmp_path: Any) -> None:
    """20 steps (the old fixed 50-step window saw nothing in them): window 10, the spike found; healthy quiet."""
    spiked, healthy = str(tmp_path / "spiked"), str(tmp_path / "healthy")
    stepsrun.train(spiked, steps=20, plant=14)
    stepsrun.train(healthy, steps=20)
    r = run_cli("spikes", spiked, "--json")
    assert r.code == 1 and r.json["window"] == 10 and [s["step"] for s in r.json["spikes"]] == [15]
    r = run_cli("spikes", healthy, "--json")
    assert r.code == 0 and r.json["spikes"] == [] and r.json["warnings"] == []


def test_steps_not_recorded_are_missing_and_said(tmp_path: Any) -> None:
    """Iterations 12-13 not recorded: the series has no such steps (no value made up for them), and the
    warning names them, in the series and in `tdbg spikes`."""
    root = str(tmp_path / "gaps")
    stepsrun.train(root, iterations="0-11,14-29")
    series = open_dump(root).rank(0).series
    assert series is not None and 12 not in series.steps().tolist() and len(series.steps()) == 28
    assert len(series.warnings) == 1 and "steps 12-13 (2 of 30) were not recorded" in series.warnings[0]
    r = run_cli("spikes", root)
    assert "steps 12-13 (2 of 30) were not recorded" in r.err


def test_a_few_deep_captures_are_no_series(tmp_path: Any) -> None:
    """Iterations 0, 10 and 20 of a 30-step run are deep captures, not a series: still 'no per-step series'."""
    root = str(tmp_path / "sparse")
    stepsrun.train(root, iterations="0,10,20")
    assert open_dump(root).rank(0).series is None
    r = run_cli("spikes", root)
    assert r.code == 2 and "no per-step series" in r.err and "record every step" in r.err


def test_scan_follow_runs_watchpoints_over_time_on_the_iterations(runs: dict[str, Any]) -> None:
    """`scan --follow` with a watchpoint over time reads the iterations as the series: the spike at step 21."""
    r = run_cli("scan", runs["spiked"], "--follow", "--idle-exit", "1", "--watch", "loss_spike:window=15")
    assert r.code == 1 and f"series hit: rank 0 step {stepsrun.PLANT + 1}: loss_spike loss" in r.out, r.out + r.err
    r = run_cli("scan", runs["healthy"], "--follow", "--idle-exit", "1", "--watch", "loss_spike:window=15")
    assert r.code == 0 and "series hit" not in r.out, r.out
