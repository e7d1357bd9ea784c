"""The trends API on a run recorded every step at level "parameters" with no series files: the rank's
iterations are its series (origin "iterations"), and the spikes answer finds the planted spike over the
window adapted to 30 steps."""
from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")

import stepsrun  # noqa: E402


@pytest.fixture(scope="module")
def dump(tmp_path_factory: Any) -> str:
    root = str(tmp_path_factory.mktemp("trends-params") / "run")
    stepsrun.train(root, plant=stepsrun.PLANT)
    return root


def test_the_trends_api_reads_the_iterations_as_the_series(make_app: Any, dump: str) -> None:
    c = make_app(dump).test_client()
    body = c.get("/api/ranks/0/series").get_json()
    assert body["available"] is True and body["origin"] == "iterations"
    assert body["steps"] == {"first": 0, "last": stepsrun.STEPS - 1, "count": stepsrun.STEPS}
    assert {"0.weight", "0.weight.grad"} <= {t["name"] for t in body["tensors"]}
    loss = c.get("/api/ranks/0/series/scalars").get_json()["scalars"]["loss"]
    assert loss["known"] is True and loss["count"] == stepsrun.STEPS and None not in loss["mean"]
    heat = c.get("/api/ranks/0/series/heatmap?role=gradient").get_json()
    assert len(heat["rows"]) == 4 and len(heat["x"]) == stepsrun.STEPS
    spikes = c.get("/api/ranks/0/series/spikes").get_json()
    assert spikes["available"] is True and spikes["window"] == 15
    [spike] = spikes["spikes"]
    assert spike["step"] == stepsrun.PLANT + 1 and spike["deep"]["iteration"] == stepsrun.PLANT + 1
