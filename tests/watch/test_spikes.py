"""`find_spikes` and `tdbg spikes` on real training runs with a planted cause at step K.

Each run trains a real model (a 2-layer GPT-2 from a transformers config, or a 3-layer MLP) with AdamW;
the series holds statistics computed with plain torch (tests/watch/spikes_runs.py). The planted causes:
a learning-rate jump, one layer's weight scaled x50, a batch of huge values. Each must be ranked first.
"""
from __future__ import annotations

import math
import os
import sys
from typing import Any

import numpy as np
import pytest
import torch

from debugger import open_dump
from debugger.formats.tdbg_h5.series import SeriesWriter
from debugger.watch.spikes import find_spikes, trailing_z

sys.path.insert(0, os.path.dirname(__file__))
from clirun import run_cli  # noqa: E402
from spikes_runs import BATCH, DEEP_STEP, LAYER_FILE, MLP, gpt2, mlp_task, train_series  # noqa: E402

K = 120            # the step of every planted cause
STEPS = 135
SCALED = "transformer.h.0.mlp.c_fc"


def _lr_jump(step: int, model: Any, opt: Any, batch: torch.Tensor) -> torch.Tensor:
    if step == K:
        for group in opt.param_groups:
            group["lr"] *= 30
    return batch


def _scale_layer(step: int, model: Any, opt: Any, batch: torch.Tensor) -> torch.Tensor:
    if step == -K - 1:                       # right after step K's optimizer step
        with torch.no_grad():
            model.get_submodule(SCALED).weight.mul_(50)
    return batch


def _scale_before_forward(step: int, model: Any, opt: Any, batch: torch.Tensor) -> torch.Tensor:
    if step == K:                            # before step K's forward: its gradients move at K too
        with torch.no_grad():
            model.get_submodule(SCALED).weight.mul_(50)
    return batch


def _huge_batch(step: int, model: Any, opt: Any, batch: torch.Tensor) -> torch.Tensor:
    if step == K:
        batch = batch.clone()
        batch[:, :16] *= -1000               # huge values (of flipped sign: the model's answers go wrong)
    return batch


@pytest.fixture(scope="module")
def runs(tmp_path_factory: Any) -> dict[str, str]:
    """Five trained runs (healthy, lr jump, a layer scaled after an optimizer step or before a forward:
    GPT-2; huge batch: MLP), shared by the tests."""
    base = tmp_path_factory.mktemp("spikes")
    return {"healthy": train_series(str(base / "healthy"), STEPS),
            "lr": train_series(str(base / "lr"), STEPS, _lr_jump),
            "scaled": train_series(str(base / "scaled"), STEPS, _scale_layer),
            "scaled_early": train_series(str(base / "scaled_early"), STEPS, _scale_before_forward),
            "huge": train_series(str(base / "huge"), STEPS, _huge_batch, task=mlp_task, activations=True)}


def _spikes(root: str) -> list[Any]:
    return find_spikes(open_dump(root).rank(0))


def test_a_healthy_run_has_no_spike(runs: dict[str, str]) -> None:
    assert _spikes(runs["healthy"]) == []
    r = run_cli("spikes", runs["healthy"])
    assert r.code == 0 and "no loss spike" in r.out


def test_a_learning_rate_jump_is_ranked_first_then_the_updates(runs: dict[str, str]) -> None:
    spikes = _spikes(runs["lr"])
    assert len(spikes) == 1 and K <= spikes[0].step <= K + 2
    causes = spikes[0].causes
    assert (causes[0].tensor, causes[0].first_step, causes[0].lead) == ("lr", K, spikes[0].step - K)
    at_k = [c.role for c in causes[1:] if c.first_step == K]
    # then the updates (Adam's step is proportional to the learning rate: every layer's moved), then the
    # weights they moved
    updates = at_k.count("update")
    assert updates >= len(list(gpt2().parameters())) // 2
    assert at_k[:updates] == ["update"] * updates and set(at_k[updates:]) <= {"weight"}
    assert not [c.tensor for c in causes if c.outside_optimizer]     # the lr explains every update


def test_a_scaled_layer_is_ranked_first_with_its_code_line_and_deep_capture(runs: dict[str, str]) -> None:
    spike, = _spikes(runs["scaled"])
    assert K <= spike.step <= K + 2 and spike.deep_step == DEEP_STEP
    first, second = spike.causes[:2]
    assert {first.tensor, second.tensor} == {SCALED + ".weight", SCALED + ".weight.update"}
    assert first.layer == SCALED and first.first_step == K and first.param == SCALED + ".weight"
    assert first.outside_optimizer and second.outside_optimizer
    assert [c.tensor for c in spike.causes if c.outside_optimizer] == [first.tensor, second.tensor]
    layers = sorted({n.rsplit(".", 1)[0] for n, _ in gpt2().named_parameters()})
    assert first.source == f"{LAYER_FILE}:{100 + layers.index(SCALED)}"
    assert all(c.first_step > K or c.layer == SCALED or c.role == "scalar" for c in spike.causes)


def test_a_layer_scaled_before_the_forward_ranks_ahead_of_the_gradients_it_moved(runs: dict[str, str]) -> None:
    """The weight, its gradients and everything downstream move at the same step K: the update no
    optimizer could have made from its gradient and learning rate puts the scaled layer first."""
    spike, = _spikes(runs["scaled_early"])
    first, second = spike.causes[:2]
    assert {first.tensor, second.tensor} == {SCALED + ".weight", SCALED + ".weight.update"}
    assert first.outside_optimizer and second.outside_optimizer and first.first_step == K
    moved_at_k = [c for c in spike.causes if c.first_step == K and c.role == "gradient"]
    assert moved_at_k and not [c for c in spike.causes[2:] if c.outside_optimizer]


def test_a_batch_of_huge_values_ranks_the_first_layer_first(runs: dict[str, str]) -> None:
    spike, = _spikes(runs["huge"])
    assert spike.step == K and spike.loss > 100 * spike.baseline
    assert spike.causes[0].layer == "fc1" and spike.causes[0].role == "activation"
    gradients = [c for c in spike.causes if c.role == "gradient"]
    assert gradients[0].tensor == "fc1.weight.grad"
    assert not [c.tensor for c in spike.causes if c.outside_optimizer]   # the gradients explain the updates


def test_the_cli_reports_spikes_as_text_and_json(runs: dict[str, str]) -> None:
    r = run_cli("spikes", runs["scaled"])
    assert r.code == 1 and f"nearest deep capture: step {DEEP_STEP}" in r.out and SCALED in r.out
    r = run_cli("spikes", runs["lr"], "--json", "--top", "1")
    assert r.code == 1
    spike = r.json["spikes"][0]
    assert set(spike) == {"step", "loss", "baseline", "z", "deep_step", "causes"}
    assert set(spike["causes"][0]) == {"tensor", "role", "param", "stat", "first_step", "lead", "score",
                                       "layer", "source", "outside_optimizer"}
    assert spike["causes"][0]["tensor"] == "lr"


def test_a_dump_without_a_series_is_exit_2_and_says_how_to_get_one(runs: dict[str, str], tmp_path: Any) -> None:
    import shutil
    root = str(tmp_path / "deep_only")
    shutil.copytree(runs["healthy"], root)
    shutil.rmtree(os.path.join(root, "rank_0", "series"))
    r = run_cli("spikes", root)
    assert r.code == 2 and "no per-step series" in r.err and "Recorder(series=True)" in r.err


def test_a_non_finite_loss_is_a_spike(tmp_path: Any) -> None:
    rng = np.random.default_rng(0)
    root = str(tmp_path / "nan")
    loss = 2.0 + 0.01 * rng.standard_normal(100)
    loss[80] = math.nan
    with SeriesWriter(os.path.join(root, "rank_0"), ["w.grad"], roles=["gradient"], params=["w"]) as w:
        for step in range(100):
            w.add(step, np.full((1, 13), 1.0 + 0.01 * rng.standard_normal()), {"loss": loss[step]})
    _write_empty_dump(root)
    spike, = find_spikes(open_dump(root).rank(0))
    assert spike.step == 80 and math.isnan(spike.loss)
    r = run_cli("spikes", root, "--json")
    assert r.code == 1 and r.json["spikes"][0]["loss"] == "nan"


def _write_empty_dump(root: str) -> None:
    from spikes_runs import _write_deep_capture
    _write_deep_capture(root, ["w"])


def test_trailing_z_matches_a_plain_loop() -> None:
    """The vectorised score against a loop over steps with numpy medians (the definition)."""
    rng = np.random.default_rng(1)
    v = np.cumsum(rng.standard_normal((3, 90)), axis=1) + 0.5 * np.arange(90)
    v[1, 60] += 40
    window = 20
    z, base = trailing_z(v, window)
    for row in range(3):
        for t in range(window, 90):
            d = np.diff(v[row, t - window:t])
            m = np.median(d)
            scale = max(1.4826 * np.median(np.abs(d - m)), 1e-3 * abs(v[row, t - 1]))
            assert z[row, t] == pytest.approx((v[row, t] - v[row, t - 1] - m) / scale)
            assert base[row, t] == pytest.approx(v[row, t - 1] + m)
    assert np.isnan(z[:, :window]).all() and np.nanargmax(z[1]) == 60


def test_the_recorders_series_ranks_a_scaled_layer_first_with_its_forward_line(tmp_path: Any) -> None:
    """Recorder(series=True) on a real loop (an MLP defined in tests/watch/spikes_runs.py), one deep
    capture at level "ops": fc2's weight scaled x-50 after step K's optimizer step."""
    import inspect

    from debugger.torch.recorder import Recorder
    model, pool, loss_of = mlp_task()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    root = str(tmp_path / "rec")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)              # tiny tensors: threads only contend
    with Recorder(root, model, opt, series=True, save="statistics", level={"ops": [K - 10]}) as rec:
        for step in range(STEPS):
            at = (step * BATCH) % len(pool)
            loss = loss_of(model, pool[at:at + BATCH])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == K:
                with torch.no_grad():
                    model.fc2.weight.mul_(-50)      # a sign flip too: the answers go wrong
            rec.step()
    torch.set_num_threads(threads)
    spike, = find_spikes(open_dump(root).rank(0))
    assert K <= spike.step <= K + 2 and spike.deep_step == K - 10
    first = spike.causes[0]
    assert first.layer == "fc2" and first.first_step == K and first.param == "fc2.weight"
    lines, start = inspect.getsourcelines(MLP.forward)
    line = start + next(i for i, text in enumerate(lines) if "self.fc2(" in text)
    assert first.source == f"{inspect.getsourcefile(MLP)}:{line}"


def test_a_short_series_gets_a_window_of_its_size_and_a_window_too_long_says_so(tmp_path: Any) -> None:
    """20 steps: the default window is min(50, max(10, 20 // 2)) = 10, said in the output, and the spike at
    step 15 is found; a window the user sets longer than the series is said to find nothing."""
    root = str(tmp_path / "short")
    with SeriesWriter(os.path.join(root, "rank_0"), ["w.grad"], roles=["gradient"], params=["w"]) as w:
        for step in range(20):
            w.add(step, np.ones((1, 13)), {"loss": 100.0 if step == 15 else 1.0})
    _write_empty_dump(root)
    r = run_cli("spikes", root)
    assert r.code == 1 and "over a 10-step window" in r.out and "step 15: loss 100" in r.out and r.err == ""
    r = run_cli("spikes", root, "--json")
    assert r.code == 1 and r.json["window"] == 10 and [s["step"] for s in r.json["spikes"]] == [15]
    assert r.json["series"] == "recorded" and r.json["warnings"] == []
    r = run_cli("spikes", root, "--window", "50")
    assert r.code == 0 and "holds 20 steps" in r.err and "no loss spike" in r.out


def test_bad_usage_is_exit_2_naming_the_problem(runs: dict[str, str]) -> None:
    r = run_cli("spikes", runs["healthy"], "--rank", "3")
    assert r.code == 2 and "no rank 3" in r.err
    r = run_cli("spikes", runs["healthy"], "--window", "2")
    assert r.code == 2 and "--window" in r.err


def test_a_longer_healthy_run_stays_quiet(tmp_path: Any) -> None:
    """600 steps of the MLP (its loss falls to ~0 and its gradients shrink): no spike, no series hit."""
    from debugger.watch.registry import Watchpoint
    from debugger.watch.series_conditions import run_series
    root = train_series(str(tmp_path / "long"), 600, task=mlp_task, activations=True)
    rank = open_dump(root).rank(0)
    assert find_spikes(rank) == []
    specs = ("loss_spike", "norm_growth", "lr_change", "loss_scale_change")
    assert run_series(0, rank.series, [Watchpoint.parse(s) for s in specs]) == []
