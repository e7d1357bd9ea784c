"""One verdict from all evidence (issue 37 item 7): the triage's health and its findings card combine the
watchpoints' hits, what they could not check, the ranks' agreement and the per-step series' loss spikes and
non-finite losses; a problem is never under a green box."""
from __future__ import annotations

import os
from typing import Any

import pytest

from debugger import open_dump
from debugger.views.triage import triage
from triage_runs import SPIKE_AT, record_healthy_every_step, record_spiked_series

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def spiked(tmp_path_factory: Any) -> str:
    """The series of a run whose loss jumps at SPIKE_AT (plain torch says by how much)."""
    dump = str(tmp_path_factory.mktemp("spike") / "d")
    losses = record_spiked_series(dump)
    assert losses[SPIKE_AT] > 1000 * max(losses[SPIKE_AT - 10:SPIKE_AT])
    return dump


def test_a_series_spike_is_a_problem_of_the_triage(spiked: str) -> None:
    t = triage(open_dump(spiked))
    assert t["findings"] == [] and t["series_hits"] >= 1
    first = t["series_findings"][0]
    assert (first["condition"], first["rank"], first["step"], first["tensor"]) == ("loss_spike", 0, SPIKE_AT, "loss")
    assert t["health"]["status"] == "problems" and t["health"]["series_hits"] == t["series_hits"]
    # no loss node in any iteration: the loss curve is the series', every step
    [curve] = t["loss"]
    assert curve["source"] == "series" and [p[0] for p in curve["points"]] == list(range(70))


def test_a_healthy_series_is_no_problem(tmp_path: Any) -> None:
    dump = str(tmp_path / "d")
    record_healthy_every_step(dump)
    t = triage(open_dump(dump))
    assert t["series_hits"] == 0 and t["findings"] == []
    # every step recorded at level "parameters": no activation to judge, said, never "ok"
    assert t["health"]["status"] == "incomplete"
    assert {u.split(":")[0] for u in t["health"]["unanswered"]} == {"activation_saturated_layer", "activation_dead_layer"}


def test_the_sweeps_hits_have_a_group_of_their_own_in_the_watchpoints_view(make_app: Any) -> None:
    """A NaN no set watchpoint looks for (MindSpore PyNative, the optimizer graph only) is listed under the
    always-on sweep's own group, never left out of the Watchpoints view."""
    corpus = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "corpus_ms",
                          "pynative_nan")
    c = make_app(corpus).test_client()
    assert c.post("/api/watchpoints", json={"spec": "weight_too_large:max_gt=1e9"}).status_code == 201
    r = c.get("/api/hits?all=1").get_json()
    groups = {g["id"]: g for g in r["groups"]}
    assert groups[0]["name"] == "nonfinite_sweep" and groups[0]["hits"] >= 1
    assert {h["watchpoint_id"] for h in r["items"]} == {0} and min(h["iteration"] for h in r["items"]) == 2
