"""Watchpoints over time (registry needs="series") on real training runs, through `tdbg scan`.

A 3-layer MLP trained with AdamW (tests/watch/spikes_runs.py: statistics computed with plain torch), one
healthy run and one whose learning rate jumps x1000 at step K; the loss-scale condition on a scaler's
sequence written with SeriesWriter, its truth listed by hand.
"""
from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest
import torch

from debugger import open_dump
from debugger.formats.tdbg_h5.series import SeriesWriter
from debugger.watch.registry import Watchpoint
from debugger.watch.series_conditions import run_series

sys.path.insert(0, os.path.dirname(__file__))
from clirun import run_cli  # noqa: E402
from spikes_runs import mlp_task, train_series  # noqa: E402

K = 90
STEPS = 110


def _lr_jump(step: int, model: Any, opt: Any, batch: torch.Tensor) -> torch.Tensor:
    if step == K:
        for group in opt.param_groups:
            group["lr"] *= 1000
    return batch


@pytest.fixture(scope="module")
def runs(tmp_path_factory: Any) -> dict[str, str]:
    base = tmp_path_factory.mktemp("series_watch")
    return {"healthy": train_series(str(base / "healthy"), STEPS, task=mlp_task, lr=3e-3),
            "lr": train_series(str(base / "lr"), STEPS, _lr_jump, task=mlp_task, lr=3e-3)}


def _hits(root: str, *specs: str) -> list[Any]:
    rank = open_dump(root).rank(0)
    return run_series(0, rank.series, [Watchpoint.parse(s) for s in specs])


def test_a_healthy_run_is_quiet(runs: dict[str, str]) -> None:
    assert _hits(runs["healthy"], "loss_spike", "lr_change", "norm_growth", "loss_scale_change") == []
    r = run_cli("scan", runs["healthy"], "--watch", "loss_spike", "--watch", "lr_change")
    assert r.code == 0 and "series: no hit" in r.out


def test_a_learning_rate_jump_is_found_at_its_step(runs: dict[str, str]) -> None:
    lr, = _hits(runs["lr"], "lr_change")
    assert (lr.step, lr.tensor) == (K, "lr") and lr.value == pytest.approx(3e-3 * 1000)
    spikes = _hits(runs["lr"], "loss_spike")
    assert spikes and K <= spikes[0].step <= K + 2


def test_norm_growth_flags_the_updates_from_the_jump_on(runs: dict[str, str]) -> None:
    window = 10
    hits = _hits(runs["lr"], f"norm_growth:window={window},ratio_gt=5")
    series = open_dump(runs["lr"]).rank(0).series
    # truth apart from the rule: block medians of each update's l2 norm with plain numpy
    expected = set()
    for t in series.catalog():
        if t.role not in ("gradient", "update"):
            continue
        steps, v = series.curve(t.name, "l2norm")
        med = [np.median(v[b * window:(b + 1) * window]) for b in range(len(v) // window)]
        grown = [b for b in range(1, len(med)) if med[b] > 5 * med[b - 1]]
        if grown:
            expected.add((t.name, int(steps[(grown[0] + 1) * window - 1])))
    assert {(h.tensor, h.step) for h in hits} == expected
    updates = {n for n, _ in expected if n.endswith(".update")}
    assert len(updates) >= 4 and all(step >= K for _, step in expected)


def test_loss_scale_changes_are_each_a_hit(tmp_path: Any) -> None:
    scale = [65536.0] * 10 + [32768.0] * 5 + [65536.0] * 5 + [16384.0] * 3   # halvings, a growth, two halvings
    scale[20:] = [32768.0, 16384.0, 16384.0]
    truth = [i for i in range(1, len(scale)) if scale[i] != scale[i - 1]]
    with SeriesWriter(str(tmp_path / "rank_0"), ["w"], roles=["weight"], params=["w"]) as w:
        for step, s in enumerate(scale):
            w.add(step, np.ones((1, 13)), {"loss": 1.0, "loss_scale": s})
    from debugger.formats.tdbg_h5.series import SeriesReader
    hits = run_series(0, SeriesReader(str(tmp_path / "rank_0")), [Watchpoint.parse("loss_scale_change")])
    assert [h.step for h in hits] == truth == [10, 15, 20, 21]


def test_scan_reports_series_hits_in_json_with_the_dumps_own_watchpoints(runs: dict[str, str]) -> None:
    r = run_cli("scan", runs["lr"], "--watch", "lr_change", "--watch", "tensor_overflow", "--json")
    assert r.code == 1, r.err
    hit, = r.json["series_hits"]
    assert hit == {"condition": "lr_change", "rank": 0, "step": K, "tensor": "lr", "stat": "value",
                   "value": pytest.approx(3.0), "detail": hit["detail"]}
    assert r.json["hits"] == [] and r.json["iterations"]     # the deep capture was scanned too
    r = run_cli("scan", runs["lr"], "--watch", "lr_change")
    assert r.code == 1 and f"step {K}: lr_change lr" in r.out
    r = run_cli("scan", runs["lr"], "--watch", "lr_change", "--iterations", f"0-{K - 1}")   # steps of hits
    assert r.code == 0 and "series: no hit" in r.out


def test_series_watchpoints_on_a_dump_without_a_series_are_exit_2(runs: dict[str, str], tmp_path: Any) -> None:
    import shutil
    root = str(tmp_path / "deep_only")
    shutil.copytree(runs["healthy"], root)
    shutil.rmtree(os.path.join(root, "rank_0", "series"))
    r = run_cli("scan", root, "--watch", "loss_spike")
    assert r.code == 2 and "no per-step series" in r.err


def test_conditions_comparing_iterations_run_over_the_series_exactly(tmp_path: Any) -> None:
    """--series: weight_change_too_large and loss_not_decreasing over every step, against the update
    ratios and losses of a plain torch loop (an MLP whose learning rate steps up x10 every 10 steps)."""
    from spikes_runs import MLP, torch_stats
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    named = list(model.named_parameters())
    names = [n + s for n, _ in named for s in ("", ".update")]
    truth_ratio, losses = set(), []
    with SeriesWriter(str(tmp_path / "rank_0"), names, roles=["weight", "update"] * len(named),
                      params=[n for n, _ in named for _ in (0, 1)]) as w:
        for step in range(30):
            for g in opt.param_groups:
                g["lr"] = 1e-3 * 10 ** (step // 10)
            before = [p.detach().clone() for _, p in named]
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            rows = []
            for (n, p), old in zip(named, before):
                ratio = float((p.detach() - old).abs().mean() / (old.abs().mean() + 1e-9))
                if step > 0 and ratio > 1e-3:
                    truth_ratio.add((step, n))
                rows += [torch_stats(p), torch_stats(p.detach() - old)]
            w.add(step, np.array(rows), {"loss": losses[-1]})
    _write_dump(str(tmp_path))
    r = run_cli("scan", str(tmp_path), "--series", "--json", "--watch",
                "weight_change_too_large:abs_mean_update_ratio_gt=1e-3",
                "--watch", "loss_not_decreasing:num_steps=3,diff_percent=1")
    assert r.code == 1, r.err
    hits = r.json["series_hits"]
    got = {(h["step"], h["tensor"]) for h in hits if h["condition"] == "weight_change_too_large"}
    assert got == truth_ratio and {s for s, _ in got} >= set(range(20, 30))
    flat = {h["step"] for h in hits if h["condition"] == "loss_not_decreasing"}
    assert flat == {s for s in range(3, 30) if losses[s] > losses[s - 3] * 0.99}
    assert 0 < len(flat) < 27         # the slow start falls by less than 1% in 3 steps, the faster part not


def _write_dump(root: str) -> None:
    from spikes_runs import _write_deep_capture
    _write_deep_capture(root, ["fc1"])


def test_a_session_given_a_series_watchpoint_scans_the_iterations_without_it(runs: dict[str, str]) -> None:
    """The web's sessions take any registry condition: one over time is not planned over iterations."""
    from debugger.stats.cache import StatsCache
    from debugger.watch.session import ScanSession
    dump = open_dump(runs["lr"])
    session = ScanSession(dump, StatsCache(None), watchpoints=[Watchpoint.parse("loss_spike"),
                                                                Watchpoint.parse("tensor_overflow")])
    result = session.scan()
    assert result.iterations and result.hits == [] and result.errors == []
