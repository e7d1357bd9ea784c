"""A rank's view is that rank's data (issue 37 item 6), through the API on dumps_sample/torch_2d (FSDP2 x TP,
4 ranks; rank 1's tensor-parallel replica of layers.0.down.bias diverges from iteration 1): the tensor the
inspector and the Tensor view read on rank 1 is rank 1's, the rank-difference overlay gives it a difference,
and the triage's heatmap cell and the Ranks tab's row name it as what they open."""
from __future__ import annotations

import os
import time
from typing import Any

import pytest

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
PLANTED = "layers.0.down.bias"     # rank 1's replica diverges from iteration 1 (make_torch_sample.py)
BIAS = {"graph": 0, "node": PLANTED, "io": "output", "slot": 0}

pytestmark = pytest.mark.skipif(not os.path.isdir(os.path.join(SAMPLE, "torch_2d")), reason="dumps_sample/ is not present")


@pytest.fixture
def torch_2d(make_app: Any) -> Any:
    return make_app(os.path.join(SAMPLE, "torch_2d")).test_client()


def _triage(c: Any) -> dict[str, Any]:
    deadline = time.time() + 120
    while (r := c.get("/api/triage").get_json())["state"] != "done":
        assert r["state"] == "running" and time.time() < deadline, r
        time.sleep(0.1)
    return r["result"]


def _stats(c: Any, rank: int, path: str = "tensor") -> Any:
    r = c.get(f"/api/ranks/{rank}/graphs/0/{path}?iteration=1&node={PLANTED}")
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def test_a_ranks_tensor_is_its_own_replica(torch_2d: Any) -> None:
    mine, base = _stats(torch_2d, 1)["stats"], _stats(torch_2d, 0)["stats"]
    assert mine["max"] > 1.0 > base["max"] and mine["mean"] != base["mean"]     # the planted +1 on rank 1's replica
    assert _stats(torch_2d, 2)["stats"] == base              # rank 2 holds the other dp shard: its view agrees
    history = {x["iteration"]: x["stats"] for x in _stats(torch_2d, 1, "tensor/history")["items"]}
    assert history[1] == mine and history[0] == _stats(torch_2d, 0, "tensor/history")["items"][0]["stats"]


def _difference(c: Any, rank: int, vs: int) -> dict[str, Any]:
    """The rank-difference overlay of the graph's root at iteration 1: the child holding the bias."""
    place = next(x["place"] for x in c.get(f"/api/ranks/{rank}/graphs/0/search?q={PLANTED}").get_json()["items"]
                 if x["node"] == PLANTED)
    o = c.get(f"/api/ranks/{rank}/graphs/0/scope?iteration=1&overlay=rank_diff&vs_rank={vs}").get_json()["overlay"]
    return o["children"][place]


def test_the_rank_difference_overlay_sees_the_diverged_replica(torch_2d: Any) -> None:
    got = _difference(torch_2d, 1, 0)
    assert got["node"] == PLANTED and got["value"] > 0.5
    assert _difference(torch_2d, 0, 1)["value"] == got["value"]     # the same difference seen from the base
    assert _difference(torch_2d, 2, 0)["value"] == 0.0               # no divergence where none was planted


def test_a_divergent_heatmap_cell_names_its_tensor(torch_2d: Any) -> None:
    heat = _triage(torch_2d)["heatmap"]
    cell = [heat["rows"].index(1), heat["iterations"].index(1)]
    assert [*cell, 0, 1] in heat["cells"]
    opens = {(i, j): heat["tensors"][k] for i, j, k in heat["opens"]}
    assert opens[tuple(cell)] == BIAS                                 # not the graph's root
    assert set(opens) == {(i, j) for i, j, _, _ in heat["cells"]}    # every marked cell opens a tensor
    row = torch_2d.get("/api/ranks?q=rank%201").get_json()["items"][0]
    assert row["rank"] == 1 and row["divergent"] >= 1 and row["first"] == {"iteration": 1, **BIAS}
    assert torch_2d.get("/api/ranks?q=rank%200").get_json()["items"][0]["first"] is None
