"""Coverage is part of the web's watch verdict (issue 37), over real HTTP on loopback against the committed
dumps: GET watchpoints, GET hits and GET info say per watchpoint what it checked, and a verdict that is
never "clean" when a watchpoint checked nothing. The truth is `tdbg scan --json` of the same dump."""
from __future__ import annotations

import io
import json
import os
import urllib.request
from typing import Any

import pytest

from debugger.cli import main
from liveserver import LiveServer

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
# torch_2d was recorded at level "modules" without activation tensors: an activation watchpoint meets none
ACTIVATION, OVERFLOW = "activation_saturated_layer", "overflow"


@pytest.fixture
def server(fresh_sample: LiveServer) -> LiveServer:
    """dumps_sample/ served live, its watchpoints this test's only."""
    return fresh_sample


def get(srv: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(srv.url + path.lstrip("/"), timeout=60) as resp:
        assert resp.status == 200
        return json.loads(resp.read())


def watch(srv: LiveServer, dump: str, spec: str) -> int:
    req = urllib.request.Request(f"{srv.url}api/watchpoints?dump={dump}", data=json.dumps({"spec": spec}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 201
        return json.loads(resp.read())["created"][0]["id"]


def cli_coverage(dump: str, *specs: str) -> list[dict[str, Any]]:
    """Each watchpoint's COVERAGE entry of `tdbg scan --json` (without its name, index and kinds)."""
    out = io.StringIO()
    args = ["scan", os.path.join(SAMPLE, dump), "--json", "--no-cache", "--jobs", "1"]
    assert main([*args, *(a for s in specs for a in ("--watch", s))], out=out) == 4     # 4: incomplete
    return [{k: v for k, v in c.items() if k not in ("watchpoint", "watchpoint_index", "kinds")}
            for c in json.loads(out.getvalue())["coverage"]["watchpoints"]]


def test_an_activation_watchpoint_on_a_dump_without_activations_is_unanswered_and_the_verdict_incomplete(
        server: LiveServer) -> None:
    ids = [watch(server, "torch_2d", ACTIVATION), watch(server, "torch_2d", OVERFLOW)]
    before = get(server, "/api/watchpoints?dump=torch_2d")
    assert before["verdict"] == "unchecked" and {w["coverage"]["status"] for w in before["items"]} == {"unchecked"}
    hits = get(server, "/api/hits?dump=torch_2d&all=1")       # every rank, every iteration
    assert hits["total"] == 0 and [g["id"] for g in hits["groups"]] == ids   # the groups are as before
    assert hits["verdict"] == "incomplete" and hits["coverage_status"] == "incomplete"
    cov = {c["id"]: c for c in hits["coverage"]}
    assert cov[ids[0]]["status"] == "unanswered" and cov[ids[0]]["of_kind"] == 0 and cov[ids[0]]["checked"] == 0
    assert cov[ids[1]]["status"] == "complete" and cov[ids[1]]["checked"] > 0
    truth = cli_coverage("torch_2d", ACTIVATION, OVERFLOW)
    assert [{k: v for k, v in cov[i].items() if k != "id"} for i in ids] == truth
    # the list and the overview's summary say the same of what was checked so far
    after = get(server, "/api/watchpoints?dump=torch_2d")
    assert [w["coverage"] for w in after["items"]] == truth and after["verdict"] == "incomplete"
    summary = get(server, "/api/info?dump=torch_2d")["watch"]
    assert [w["coverage"] for w in summary["by_watchpoint"]] == truth
    assert summary["verdict"] == "incomplete" and summary["hits"] == 0
    # one rank's coverage is that rank's
    rank1 = get(server, "/api/watchpoints?dump=torch_2d&rank=1")
    assert [w["coverage"]["ranks"] for w in rank1["items"]] == [[], [1]]


def test_a_complete_watchpoint_without_a_hit_is_clean_and_a_hit_is_found(server: LiveServer) -> None:
    wid = watch(server, "single", OVERFLOW)
    hits = get(server, "/api/hits?dump=single&rank=0&iteration=2")
    cov = {c["id"]: c for c in hits["coverage"]}
    assert hits["total"] == 0 and hits["verdict"] == "clean" and hits["coverage_status"] == "complete"
    assert cov[wid]["status"] == "complete" and cov[wid]["iterations"] == [2] and cov[wid]["unchecked"] == 0
    assert get(server, "/api/info?dump=single")["watch"]["verdict"] == "clean"
    watch(server, "single", ACTIVATION)          # the sigmoid saturates in every iteration
    hits = get(server, "/api/hits?dump=single&rank=0&iteration=2")
    assert hits["total"] > 0 and hits["verdict"] == "found" and hits["coverage_status"] == "complete"
