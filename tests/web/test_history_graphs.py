"""A tensor's history covers every iteration of the rank: a PyTorch run's first step is a graph of its
own, and its weights keep their names there."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from debugger import open_dump

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")


def test_history_takes_each_iteration_from_the_graph_that_ran_it(make_app: Any) -> None:
    client = make_app(SAMPLE).test_client()
    r = client.get("/api/ranks/0/graphs/1/tensor/history",
                   query_string={"dump": "torch_single", "node": "fc1.weight", "iteration": 3})
    assert r.status_code == 200, r.json
    rank = open_dump(os.path.join(SAMPLE, "torch_single")).rank(0)
    assert rank.iterations(0) == [0] and 0 not in rank.iterations(1)
    items = r.json["items"]
    assert [x["iteration"] for x in items] == rank.iterations()
    assert items[0]["graph"] == 0 and {x["graph"] for x in items[1:]} == {1}
    for x in items:
        value = np.asarray(rank.tensor(x["graph"], x["iteration"], "fc1.weight").value(), np.float64)
        assert x["stats"]["mean"] == pytest.approx(value.mean(), rel=1e-6)
    # a node only one graph has keeps that graph's iterations
    at0 = {t.key for t in rank.tensors(0, 0)}
    only = next(t for t in rank.tensors(1, 3) if t.key not in at0)
    r = client.get("/api/ranks/0/graphs/1/tensor/history", query_string={
        "dump": "torch_single", "node": only.node, "io": only.io, "slot": only.slot, "iteration": 3})
    assert r.status_code == 200, r.json
    assert [x["iteration"] for x in r.json["items"]] == rank.iterations(1)


def test_the_band_across_ranks_covers_every_iteration_of_every_graph(make_app: Any) -> None:
    client = make_app(SAMPLE).test_client()
    r = client.get("/api/band", query_string={"dump": "torch_dp2", "graph": 2, "node": "fc1.weight",
                                              "io": "output", "slot": 0, "stat": "max"})
    assert r.status_code == 200, r.json
    dump = open_dump(os.path.join(SAMPLE, "torch_dp2"))
    assert len(dump.rank(0).graph_ids) > 1 and dump.rank(0).iterations(2) != dump.rank(0).iterations()
    assert r.json["iterations"] == dump.rank(0).iterations()
    for s in r.json["series"]:
        rank = dump.rank(s["rank"])
        for it, v in s["points"]:
            g = next(g for g in rank.graph_ids if it in rank.iterations(g))
            assert v == pytest.approx(float(np.max(rank.tensor(g, it, "fc1.weight").value())), rel=1e-6)
