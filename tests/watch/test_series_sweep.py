"""The non-finite sweep reads the per-step series' loss too (issue 37 item 2): a NaN at a step that no
recorded iteration holds is a finding of every scan, whatever its watchpoints."""
from __future__ import annotations

import math
from typing import Any

import pytest
from clirun import run_cli

torch = pytest.importorskip("torch")
NAN_AT = 5


@pytest.fixture(scope="module")
def nan_between(tmp_path_factory: Any) -> str:
    """A real Recorder, iteration 0 recorded and the series every step; the batch of step 5 holds a NaN (the
    loss is NaN from there, per plain torch)."""
    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dump = str(tmp_path_factory.mktemp("nan") / "d")
    losses = []
    with Recorder(dump, model, opt, save="statistics", level="parameters", iterations=[0], series=True) as rec:
        for step in range(8):
            x = torch.randn(16, 4)
            if step == NAN_AT:
                x[3, 1] = math.nan
            loss = model(x).pow(2).mean()
            losses.append(loss.item())
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    assert [i for i, v in enumerate(losses) if not math.isfinite(v)][0] == NAN_AT
    return dump


def test_a_nan_between_recorded_iterations_is_found_in_the_series(nan_between: str) -> None:
    r = run_cli("scan", nan_between, "--watch", "weight_too_large:max_gt=1e9", "--json", "--no-cache")
    assert r.code == 1 and r.json["verdict"] == "found" and r.json["hits"] == []
    [hit] = r.json["series_hits"]
    assert (hit["condition"], hit["rank"], hit["step"], hit["tensor"]) == ("nonfinite_sweep", 0, NAN_AT, "loss")
    text = run_cli("scan", nan_between, "--watch", "weight_too_large:max_gt=1e9", "--no-cache").out
    assert f"rank 0 step {NAN_AT}: nonfinite_sweep loss" in text
    # outside the iterations asked for: not this scan's
    only_0 = run_cli("scan", nan_between, "--iterations", "0", "--watch", "weight_too_large:max_gt=1e9", "--json",
                     "--no-cache")
    assert "series_hits" not in only_0.json
