"""The rank views' API on small real dumps: a 20-rank dumpmaker dump with a NaN loss planted in one rank
(band, heatmap, paged ranks before and after the triage), a 2-rank dump (lines, no band) and the
recorded FSDP2 x TP dump (heatmap rows grouped by its mesh)."""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import pytest

import dumpmaker

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
NAN_RANK = 13


def _nan_loss(rank: int, it: int, node: str, io: str, slot: int, default: Any) -> Any:
    if rank == NAN_RANK and it == 2 and io == "output" and node.endswith("SparseSoftmaxCrossEntropyWithLogits-op0") \
            and not node.startswith("Gradients"):
        return np.full_like(default, np.nan)
    return None


def _triage(c: Any, dump: str = "") -> dict[str, Any]:
    q = f"?dump={dump}" if dump else ""
    deadline = time.time() + 120
    while (r := c.get(f"/api/triage{q}").get_json())["state"] != "done":
        assert r["state"] == "running" and time.time() < deadline, r
        time.sleep(0.1)
    return r["result"]


@pytest.fixture
def ranks20(make_app: Any, tmp_path: Any) -> Any:
    root = dumpmaker.make_dump(str(tmp_path / "r20"), ranks=20, iterations=3, layers=(("fc1", 4, 2, None),),
                               values=_nan_loss)
    return make_app(root).test_client()


def test_twenty_ranks_get_a_band_a_heatmap_and_problem_rows(ranks20: Any) -> None:
    before = ranks20.get("/api/ranks?sort=problems&end=3").get_json()
    assert before["triaged"] is False and before["total"] == 20 and [x["hits"] for x in before["items"]] == [0, 0, 0]
    assert before["items"][0]["group"] == "ranks 0-19"
    t = _triage(ranks20)
    assert t["loss"] == [] and t["loss_band"]["ranks"] == 20
    assert t["loss_band"]["outliers"][0]["rank"] == NAN_RANK and t["loss_band"]["outliers"][0]["iterations"] == [2]
    heat = t["heatmap"]
    assert heat["rows"] == list(range(20)) and heat["iterations"] == [0, 1, 2]
    hit_cells = {(heat["rows"][i], heat["iterations"][j]) for i, j, h, _ in heat["cells"] if h}
    assert (NAN_RANK, 2) in hit_cells
    after = ranks20.get("/api/ranks?sort=problems&end=3").get_json()
    assert after["triaged"] and after["items"][0]["rank"] == NAN_RANK and after["items"][0]["hits"] >= 1
    assert after["items"][0]["tensor_files"] > 0       # the `tdbg info` object of each rank on the page
    page = ranks20.get("/api/ranks?sort=rank&begin=18").get_json()      # paged as every list: begin, end
    assert [x["rank"] for x in page["items"]] == [18, 19] and (page["begin"], page["end"], page["total"]) == (18, 20, 20)
    assert ranks20.get("/api/ranks?sort=rank&begin=5&end=25").status_code == 400      # past the end
    old = ranks20.get("/api/ranks?begin=2&end=4").get_json()     # the old paging still answers
    assert [x["rank"] for x in old["items"]] == [2, 3] and old["total"] == 20


def test_a_band_of_any_tensor_statistic(ranks20: Any) -> None:
    b = ranks20.get("/api/band?node=fc1.weight&stat=l2norm").get_json()
    assert b["ranks"] == 20 and b["iterations"] == [0, 1, 2] and b["stat"] == "l2norm"
    assert all(lo <= m <= hi for lo, m, hi in zip(b["min"], b["median"], b["max"]))
    r = ranks20.get("/api/band?node=fc1.weight&stat=median")
    assert r.status_code == 400 and "bad stat" in r.get_json()["error"]
    r = ranks20.get("/api/band?node=no.such.node")
    assert r.status_code == 404 and "no.such.node" in r.get_json()["error"]


def test_two_ranks_keep_their_lines(make_app: Any, sample_root: str) -> None:
    c = make_app(sample_root).test_client()
    t = _triage(c, "dp2")
    assert [c["rank"] for c in t["loss"]] == [0, 1] and t["loss_band"] is None
    b = c.get("/api/band?dump=dp2&node=conv1.weight&stat=mean").get_json()
    assert [x["rank"] for x in b["series"]] == [0, 1] and b["series"][0]["points"][0][1] == b["min"][0] == b["max"][0]
    assert t["heatmap"]["groups"] == [{"name": "ranks 0-1", "start": 0, "count": 2}]


@pytest.mark.skipif(not os.path.isdir(os.path.join(SAMPLE, "torch_2d")), reason="dumps_sample/ is not present")
def test_heatmap_rows_follow_the_recorded_mesh(make_app: Any, sample_root: str) -> None:
    c = make_app(sample_root).test_client()
    t = _triage(c, "torch_2d")
    assert t["heatmap"]["groups"] == [{"name": "dp 0", "start": 0, "count": 2}, {"name": "dp 1", "start": 2, "count": 2}]
    rows = c.get("/api/ranks?dump=torch_2d&q=dp%201").get_json()
    assert [x["rank"] for x in rows["items"]] == [2, 3]


def test_gradient_norm_per_rank_matches_numpy(sample_root: str) -> None:
    from debugger.stats.cache import StatsCache
    from debugger.formats.records import Kind
    from debugger.model import open_dump
    from debugger.views.triage import grad_norm_curves

    d = open_dump(os.path.join(sample_root, "dp2"))
    curves = grad_norm_curves(d, StatsCache(enabled=False))
    assert [c["rank"] for c in curves] == [0, 1]
    for c in curves:
        r = d.rank(c["rank"])
        names = [n.name for n in r.graph(c["graph"]).nodes(Kind.GRADIENT)]
        for it, value in c["points"]:     # truth apart: the files themselves, read by numpy
            files = [r.tensor(c["graph"], it, n, "output", 0).source.path for n in names if it in r.node_iterations(c["graph"], n)]
            truth = np.sqrt(sum(float(np.sum(np.load(f).astype(np.float64) ** 2)) for f in files))
            assert value == pytest.approx(truth, rel=1e-6)


def test_twenty_ranks_get_a_gradient_norm_band(ranks20: Any) -> None:
    t = _triage(ranks20)
    b = t["grad_norm_band"]
    assert t["grad_norm"] == [] and b["ranks"] == 20 and b["iterations"] == [0, 1, 2]
    assert all(lo <= m <= hi for lo, m, hi in zip(b["min"], b["median"], b["max"]))
