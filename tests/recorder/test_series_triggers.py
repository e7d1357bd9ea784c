"""Triggered deep capture beside Recorder(series=True): a NaN loss, a loss jump and a touched file
record the next steps at level "ops"; a healthy run records none; the dump says why each deep step is."""
from __future__ import annotations

import os

import numpy as np
import torch

import debugger
from debugger.torch import Recorder, TouchFile, Trigger

K = 3


def _train(path, steps, *, plant=None, touch_at=None, touch_path=None, **kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    ask = kw.pop("ask_at", None)
    if "level" not in kw:
        kw["iterations"] = ()       # no deep step but the triggered ones
    with Recorder(path, model, opt, series=True, save="statistics", **kw) as rec:
        for step in range(steps):
            x, y = torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            if plant is not None:
                loss = plant(step, loss)
            loss.backward()
            opt.step()
            if step == ask:
                rec.capture_next(2, "modules")
            if step == touch_at:
                with open(touch_path, "w"):
                    pass
            rec.step()
    rank = debugger.open_dump(str(path)).rank(0)
    return rank, rank.series


def test_nan_loss_captures_the_next_steps(tmp_path):
    nan_at = 14
    plant = lambda s, loss: loss + torch.tensor(float("nan")) if s == nan_at else loss   # noqa: E731
    rank, series = _train(tmp_path / "n", 24, plant=plant, trigger=Trigger(steps=K, window=10))
    assert rank.iterations() == list(range(nan_at + 1, nan_at + 1 + K))
    assert len(series.steps()) == 24            # the series never stops
    cap = series.captures()
    assert cap["deep"] == [[nan_at + 1, nan_at + K, "ops", "nonfinite_loss"]]
    (t,) = cap["triggered"]
    assert t["check"] == "nonfinite_loss" and t["step"] == nan_at and t["value"] == "nan"


def test_loss_jump_captures_the_next_steps(tmp_path):
    jump_at = 16
    plant = lambda s, loss: loss * 20 if s == jump_at else loss     # noqa: E731
    rank, series = _train(tmp_path / "j", 24, plant=plant, trigger=Trigger(loss_factor=3.0, window=10, steps=K))
    assert rank.iterations() == list(range(jump_at + 1, jump_at + 1 + K))
    (t,) = series.captures()["triggered"]
    assert t["check"] == "loss_spike" and t["step"] == jump_at and t["value"] > 3 * t["median"]


def test_touch_file_captures_the_next_steps(tmp_path):
    flag = tmp_path / "capture.now"
    rank, series = _train(tmp_path / "t", 12, touch_at=5, touch_path=flag,
                          touch_file=TouchFile(flag, steps=2, interval=0.0))
    assert rank.iterations() == [6, 7]
    assert series.captures()["deep"] == [[6, 7, "ops", "touch_file"]]


def test_healthy_run_captures_nothing_and_schedule_is_said(tmp_path):
    flag = tmp_path / "never"
    rank, series = _train(tmp_path / "h", 30, trigger=Trigger(loss_factor=3.0, window=10), touch_file=str(flag))
    assert rank.iterations() == [] and len(series.steps()) == 30
    assert series.captures() is None or series.captures()["triggered"] == []
    rank2, series2 = _train(tmp_path / "s", 10, level={"parameters": range(0, 100, 5)})   # 10: open at close, dropped
    assert rank2.iterations() == [0, 5]
    assert series2.captures()["deep"] == [[0, 0, "parameters", "schedule"], [5, 5, "parameters", "schedule"]]


def test_touch_file_present_before_the_run_is_no_request(tmp_path):
    flag = tmp_path / "old"
    flag.write_text("")
    rank, _ = _train(tmp_path / "o", 6, touch_file=TouchFile(flag, interval=0.0))
    assert rank.iterations() == []
    assert os.path.exists(flag)     # tdbg never removes the user's file


def test_capture_next_is_said(tmp_path):
    rank, series = _train(tmp_path / "c", 8, ask_at=3)
    assert rank.iterations() == [4, 5]
    assert series.captures()["deep"] == [[4, 5, "modules", "capture_next"]]


def test_nonfinite_gradient_with_a_finite_loss(tmp_path):
    bad_at = 9

    def plant(step, loss):
        if step == bad_at:      # the loss stays finite, its gradient does not
            loss.register_hook(lambda g: g * float("nan"))
        return loss

    rank, series = _train(tmp_path / "g", 14, plant=plant, trigger=Trigger(steps=K, window=10))
    first = series.captures()["triggered"][0]
    assert first["check"] == "nonfinite_grad_norm" and first["step"] == bad_at and first["value"] == "nan"
    assert rank.iterations()[:K] == list(range(bad_at + 1, bad_at + 1 + K))
    assert np.isfinite(series.scalar("loss")[1][bad_at]) and np.isnan(series.scalar("grad_norm")[1][bad_at])
