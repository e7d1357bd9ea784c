"""The graph's overlay over HTTP: each child's worst value of a metric, against numpy over the tensors'
values, the roll-up of a scope, differences between ranks and runs, and the arguments it refuses."""
from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
import pytest

from debugger import open_dump

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
SCOPE = "/api/ranks/{rank}/graphs/{graph}/scope"


@pytest.fixture(scope="module")
def app_client(tmp_path_factory: Any) -> Any:
    from tdbg_web import create_app
    cache = tmp_path_factory.mktemp("cache")
    return create_app(SAMPLE, {"TESTING": True, "CACHE_DIR": str(cache)}).test_client()


def _scope(client: Any, dump: str, graph: int, it: int, path: str = "", rank: int = 0, **args: Any) -> dict[str, Any]:
    r = client.get(SCOPE.format(rank=rank, graph=graph), query_string={"dump": dump, "iteration": it, "path": path, **args})
    assert r.status_code == 200, r.json
    return r.json


def _truth(dump: str, graph: int, it: int, fn: Callable[[np.ndarray], float]) -> dict[str, float]:
    """Per node, ``fn`` of each dumped output computed by numpy, the worst kept."""
    rank = open_dump(os.path.join(SAMPLE, dump)).rank(0)
    out: dict[str, float] = {}
    for ref in rank.tensors(graph, it):
        if ref.io == "output":
            v = fn(np.asarray(ref.value(), np.float64))
            if not np.isnan(v):
                out[ref.node] = max(out.get(ref.node, -np.inf), v)
    return out


def _max_abs(a: np.ndarray) -> float:
    f = a[np.isfinite(a)]
    return float(np.abs(f).max()) if f.size else float("nan")


def _descend(client: Any, dump: str, graph: int, it: int, metric: str) -> list[tuple[str, dict[str, Any]]]:
    """From the root, open the worst child of each level until a node: the path taken."""
    path, taken = "", []
    while True:
        d = _scope(client, dump, graph, it, path, overlay=metric)
        kids = d["overlay"]["children"]
        worst = max(kids, key=lambda c: kids[c]["value"])
        child = next(c for c in d["children"]["items"] if c["id"] == worst)
        taken.append((worst, kids[worst]))
        if child["type"] == "node":
            return taken
        path = child.get("open") or child["path"]


def test_each_node_shows_numpys_max_abs_and_each_scope_its_worst_node(app_client: Any) -> None:
    truth = _truth("torch_single", 1, 3, _max_abs)
    top = max(truth, key=truth.get)
    d = _scope(app_client, "torch_single", 1, 3, overlay="max_abs")
    ov = d["overlay"]
    assert ov["scale"]["hi"] == pytest.approx(truth[top], rel=1e-6)
    assert ov["scale"]["lo"] == pytest.approx(min(v for v in truth.values() if v > 0), rel=1e-6)
    assert ov["nodes"] == len(truth)
    for cid, got in ov["children"].items():
        assert got["value"] == pytest.approx(truth[got["node"]], rel=1e-6), cid
    # every child holding a value: the largest among the nodes under it
    for c in d["children"]["items"]:
        under = {n: v for n, v in truth.items() if n == c["id"] or n.startswith(c["id"] + "/")}
        if c["type"] == "scope" and under:
            assert ov["children"][c["id"]]["value"] == pytest.approx(max(under.values()), rel=1e-6)
    # opening the worst child at every level ends on the node with the largest value of the graph
    taken = _descend(app_client, "torch_single", 1, 3, "max_abs")
    assert taken[-1][1]["node"] == top
    assert all(step[1]["node"] == top for step in taken)


def test_zero_share_and_gradient_norm_match_numpy(app_client: Any) -> None:
    zeros = _truth("torch_single", 1, 3, lambda a: float((a == 0).mean()))
    d = _scope(app_client, "torch_single", 1, 3, "model", overlay="zero_share")
    assert d["overlay"]["scale"] == {"lo": 0.0, "hi": 1.0, "log": False}
    for got in d["overlay"]["children"].values():
        assert got["value"] == pytest.approx(zeros[got["node"]])
    grads = _truth("torch_single", 1, 3, lambda a: float(np.sqrt((a * a).sum())))
    d = _scope(app_client, "torch_single", 1, 3, overlay="grad_norm")
    worst = d["overlay"]["children"]["Gradient[7]"]
    assert worst["node"].endswith(".grad")
    assert worst["value"] == pytest.approx(grads[worst["node"]], rel=1e-5)
    assert set(d["overlay"]["children"]) == {"Gradient[7]"}       # only gradients have a gradient norm


def test_update_ratio_is_the_weights_change_over_its_size(app_client: Any) -> None:
    rank = open_dump(os.path.join(SAMPLE, "torch_single")).rank(0)
    before = {t.node: np.asarray(t.value(), np.float64) for t in rank.tensors(1, 2) if t.io == "output"}
    # the weight is drawn as a row of the layer that reads it, coloured under its own name
    d = _scope(app_client, "torch_single", 1, 3, "model/fc1-Linear", overlay="update_ratio")
    got = d["overlay"]["children"]
    assert got["fc1.weight"]["node"] == "fc1.weight"
    now = np.asarray(rank.tensor(1, 3, "fc1.weight").value(), np.float64)
    want = np.abs(now - before["fc1.weight"]).mean() / np.abs(before["fc1.weight"]).mean()
    assert got["fc1.weight"]["value"] == pytest.approx(want, rel=1e-6)
    # one level up, the layer's scope takes the worst of its weights
    up = _scope(app_client, "torch_single", 1, 3, "model", overlay="update_ratio")["overlay"]["children"]
    assert up["model/fc1-Linear"]["value"] >= got["fc1.weight"]["value"]


def test_data_parallel_ranks_differ_in_activations_not_in_weights_or_reduced_gradients(app_client: Any) -> None:
    gid = 2
    d = _scope(app_client, "torch_dp2", gid, 3, overlay="rank_diff", vs_rank=1)
    kids = d["overlay"]["children"]
    assert kids["model"]["value"] > 1e-3                     # each rank saw its own batch
    grads = next(c for c in kids if c.startswith("Gradient["))
    assert kids[grads]["value"] == 0.0
    layer = _scope(app_client, "torch_dp2", gid, 3, "model/fc1-Linear", overlay="rank_diff", vs_rank=1)["overlay"]
    assert layer["children"]["fc1.weight"]["value"] == 0.0 and layer["children"]["fc1.bias"]["value"] == 0.0
    # against another run: the same names in the iteration, whatever graph ran it there
    d = _scope(app_client, "torch_dp2", gid, 3, overlay="run_diff", vs_dump="torch_single")
    assert d["overlay"]["nodes"] > 0 and d["overlay"]["children"]


def test_bad_overlay_arguments_are_400_and_a_graph_that_did_not_run_says_so(app_client: Any) -> None:
    url = SCOPE.format(rank=0, graph=1)
    r = app_client.get(url, query_string={"dump": "torch_single", "iteration": 3, "overlay": "bogus"})
    assert r.status_code == 400 and "max_abs" in r.json["error"]
    r = app_client.get(url, query_string={"dump": "torch_dp2", "iteration": 1, "overlay": "rank_diff"})
    assert r.status_code == 400 and "vs_rank" in r.json["error"]
    r = app_client.get(url, query_string={"dump": "torch_single", "iteration": 3, "overlay": "run_diff",
                                          "vs_dump": "torch_single"})
    assert r.status_code == 400 and "another dump" in r.json["error"]
    d = _scope(app_client, "torch_single", 0, 3, overlay="max_abs")     # graph 0 ran iteration 0 only
    assert d["overlay"]["missing"] == "graph 0 did not run iteration 3" and d["children"]["items"]
    d = _scope(app_client, "torch_single", 1, 3, overlay="hits")
    assert d["overlay"]["children"] == {} and "Watchpoints tab" in d["overlay"]["note"]
    m = app_client.get("/api/overlays").json["items"]
    assert [x["name"] for x in m][:3] == ["max_abs", "nonfinite", "zero_share"]
    assert {x["needs"] for x in m} == {"", "rank", "run"}


def test_edges_carry_the_dtype_and_shape_they_pass(app_client: Any) -> None:
    d = _scope(app_client, "torch_single", 1, 3, "model")
    rank = open_dump(os.path.join(SAMPLE, "torch_single")).rank(0)
    conv = rank.tensor(1, 3, "model/conv1-Conv2d/convolution-0")
    first = next(e for e in d["edges"] if e["source"] == "model/conv1-Conv2d")
    assert first["type"] == f"{conv.dtype} {'×'.join(map(str, conv.shape))}"


def test_the_hits_overlay_counts_each_nodes_hits_of_the_watchpoints_set(make_app: Any) -> None:
    client = make_app(SAMPLE).test_client()
    assert client.post("/api/watchpoints?dump=torch_single", json={"name": "activation_saturated_layer"}).status_code == 201
    hits = client.get("/api/hits", query_string={"dump": "torch_single", "rank": 0, "iteration": 3}).json["items"]
    want = {h["node"] for h in hits if h["graph"] == 1}
    assert want, "the sample's sigmoid saturates: the watchpoint fires"
    d = _scope(client, "torch_single", 1, 3, "model", overlay="hits")
    got = {v["node"]: v["value"] for v in d["overlay"]["children"].values()}
    assert set(got) == want and all(v >= 1 for v in got.values())
    assert "note" not in d["overlay"]


def test_an_iteration_a_job_may_still_be_writing_is_not_read(make_app: Any) -> None:
    app = make_app(SAMPLE)
    client = app.test_client()
    app.extensions["tdbg"].being_written("torch_single", {0: 3})       # as GET live marks a running job's newest
    d = _scope(client, "torch_single", 1, 3, overlay="max_abs")
    assert d["overlay"]["pending"] is True and d["overlay"]["children"] == {}
    assert _scope(client, "torch_single", 1, 2, overlay="max_abs")["overlay"]["children"]
