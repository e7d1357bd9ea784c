"""`tdbg convert --series`: a MindSpore run (values or statistic.csv) and an msprobe statistics dump become
per-step series, one step per iteration, with values checked against the dumps' own files read with numpy,
csv and json, apart from tdbg."""
from __future__ import annotations

import csv
import glob
import json
import math
import os
from typing import Any

import numpy as np
import pytest
from clirun import run_cli
from statistic_csv_kit import SINGLE, make_statistic_dump

from debugger import open_dump

MSPROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "msprobe_real", "gpt2_adamw_statistics")
LOSS_FILE = "SparseSoftmaxCrossEntropyWithLogits.Default_*-op0.*.output.0.*.npy"


def _npy(iteration: int, pattern: str) -> np.ndarray:
    """One tensor file of the real MindSpore sample, read with numpy."""
    (path,) = glob.glob(os.path.join(SINGLE, "rank_0", "Net", "0", str(iteration), pattern))
    return np.load(path).astype(np.float64)


def test_a_mindspore_run_becomes_a_series_of_its_iterations(tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    res = run_cli("convert", SINGLE, out, "--series", "--json")
    assert res.code == 0 and res.json["series"] == "with" and res.json["series_steps"] == 8
    series = open_dump(out).rank(0).series
    assert series is not None and series.steps().tolist() == list(range(8))
    roles = {t.name: (t.role, t.param) for t in series.catalog()}
    assert roles["fc1.weight"] == ("weight", "fc1.weight") and roles["fc1.weight.update"] == ("update", "fc1.weight")
    weights = [_npy(i, "Parameter.fc1_weight.*.output.0.*.npy") for i in range(8)]
    assert series.curve("fc1.weight", "max")[1].tolist() == pytest.approx([w.max() for w in weights], rel=1e-6)
    update = series.curve("fc1.weight.update", "l2norm")[1]
    assert math.isnan(update[0])      # nothing before the first iteration
    want = [np.linalg.norm(weights[i] - weights[i - 1]) for i in range(1, 8)]
    assert update[1:].tolist() == pytest.approx(want, rel=1e-5) and min(want) > 0
    # fc2 is the sample's frozen layer (lr 0): its update is exactly zero every step
    assert series.curve("fc2.weight.update", "max")[1][1:].tolist() == [0.0] * 7
    loss = series.scalar("loss")[1]
    assert loss.tolist() == pytest.approx([_npy(i, LOSS_FILE).mean() for i in range(8)], rel=1e-6)
    assert open_dump(out).rank(0).iterations() == list(range(8))     # --series keeps the iterations


def test_mindspore_statistic_csv_rows_become_the_series(tmp_path: Any) -> None:
    root = make_statistic_dump(str(tmp_path / "d"), "2.3-all", keep_npy=False, iterations=(0, 1, 2))
    out = str(tmp_path / "out")
    assert run_cli("convert", root, out, "--series-only").code == 0
    series = open_dump(out).rank(0).series
    assert series is not None and series.steps().tolist() == [0, 1, 2]
    for it in range(3):
        with open(os.path.join(root, "rank_0", "Net", "0", str(it), "statistic.csv"), newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["Op Name"] == "fc1.weight" or
                    (r["Op Type"] == "Parameter" and r["Op Name"].endswith("fc1_weight"))]
        assert rows, "the sample's statistic.csv lists fc1's weight"
        got = series.curve("fc1.weight", "max")[1][it]
        assert got == pytest.approx(float(rows[0]["Max Value"]), rel=1e-6)
        assert series.curve("fc1.weight", "l2norm")[1][it] == pytest.approx(float(rows[0]["L2Norm Value"]), rel=1e-6)
    assert not any(t.role == "update" for t in series.catalog())    # statistics only: no update to compute
    assert open_dump(out).rank(0).iterations() == []     # --series-only


def test_an_msprobe_statistics_dump_becomes_a_series(tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    res = run_cli("convert", MSPROBE, out, "--series-only", "--json")
    assert res.code == 0 and res.json["series_steps"] == 3
    series = open_dump(out).rank(0).series
    assert series is not None
    grads = {t.param: t.name for t in series.catalog() if t.role == "gradient"}
    for step in range(3):
        with open(os.path.join(MSPROBE, f"step{step}", "proc0", "dump.json")) as fh:
            data = json.load(fh)["data"]
        entry = data["Module.transformer.h.1.mlp.c_fc.Conv1D.parameters_grad.0"]["weight"][0]
        name = grads["transformer.h.1.mlp.c_fc.weight"]
        assert series.curve(name, "l2norm")[1][step] == pytest.approx(entry["Norm"], rel=1e-6)
        assert series.curve(name, "max")[1][step] == pytest.approx(entry["Max"], rel=1e-6)
        norms = [p[0]["Norm"] for k, v in data.items() if k.endswith(".parameters_grad.0") for p in v.values()]
        assert series.scalar("grad_norm")[1][step] == pytest.approx(math.sqrt(sum(n * n for n in norms)), rel=1e-5)
        loss = data["Functional.cross_entropy.0.forward"]["output"][0]["Mean"]
        assert series.scalar("loss")[1][step] == pytest.approx(loss, rel=1e-6)


def test_the_text_line_says_what_the_series_holds(tmp_path: Any, capsys: Any) -> None:
    res = run_cli("convert", MSPROBE, str(tmp_path / "out"), "--series-only")
    assert res.code == 0 and "per-step series: 3 step(s); no iteration files" in res.out
    res = run_cli("convert", MSPROBE, str(tmp_path / "o2"), "--series", "--series-only")
    assert res.code == 2 and "not allowed with" in capsys.readouterr().err


def test_info_tells_what_the_series_holds(tmp_path: Any) -> None:
    out = str(tmp_path / "out")
    assert run_cli("convert", SINGLE, out, "--series", "--iterations", "2-5").code == 0
    info = run_cli("info", out, "--json").json["ranks"][0]["series"]
    assert info["steps"] == 4 and (info["first_step"], info["last_step"]) == (2, 5)
    assert info["deep_steps"] == [2, 3, 4, 5] and info["tensors_by_role"]["update"] == 7
    assert "per-step series on 1 rank(s); rank 0: steps 2-5 (4 steps), 4 deep" in run_cli("info", out).out
    assert run_cli("info", SINGLE, "--json").json["ranks"][0]["series"] is None
