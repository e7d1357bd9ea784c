"""The trends view's API over real HTTP, on a series written by a real training loop (tests/web/trendsrun.py:
an MLP whose fc1 weight is scaled 25x at step 80): curves decimated to min/max buckets keep the planted
spike's max at any zoom, the heatmap's cells are numpy's max/mean of the steps they cover, and bad
arguments are 400s that say what is wrong."""
from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from typing import Any, Iterator

import numpy as np
import pytest

import trendsrun
from liveserver import LiveServer
from tdbg_web import create_app

STAT = {n: i for i, n in enumerate(trendsrun.STAT_NAMES)}


@pytest.fixture(scope="module")
def run(tmp_path_factory: Any) -> trendsrun.Run:
    return trendsrun.train(str(tmp_path_factory.mktemp("trends") / "run"))


@pytest.fixture(scope="module")
def live(run: trendsrun.Run, tmp_path_factory: Any) -> Iterator[LiveServer]:
    srv = LiveServer(create_app(run.root, {"CACHE_DIR": str(tmp_path_factory.mktemp("trends-cache"))}))
    yield srv
    srv.stop()


def _get(srv: LiveServer, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(srv.url + path, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _ok(srv: LiveServer, path: str) -> Any:
    status, body = _get(srv, path)
    assert status == 200, body
    return body


def test_the_catalog_names_every_tensor_with_its_layer(live: LiveServer, run: trendsrun.Run) -> None:
    c = _ok(live, "api/ranks/0/series")
    assert c["available"] and c["steps"] == {"first": 0, "last": trendsrun.STEPS - 1, "count": trendsrun.STEPS}
    assert [t["name"] for t in c["tensors"]] == run.names
    grad = next(t for t in c["tensors"] if t["name"] == "fc1.weight.grad")
    assert grad == {"name": "fc1.weight.grad", "role": "gradient", "param": "fc1.weight", "layer": "fc1"}


def test_a_decimated_curve_keeps_the_planted_spike_at_every_zoom(live: LiveServer, run: trendsrun.Run) -> None:
    """fc2.weight's gradient norm peaks at the step fc1's weight was scaled (fc1's saturated tanh outputs
    feed it): with 7 buckets over 120 steps the bucket holding that step shows the step's own value as its
    max, and a zoom is exact."""
    k = run.names.index("fc2.weight.grad")
    truth = run.truth[k, :, STAT["l2norm"]]
    c = _ok(live, "api/ranks/0/series/curve?tensor=fc2.weight.grad&stat=l2norm&points=7")
    assert not c["exact"] and len(c["x"]) == 7 and c["count"] == trendsrun.STEPS
    edges = c["x"] + [trendsrun.STEPS]
    for b in range(7):
        part = truth[edges[b]:edges[b + 1]]
        assert c["max"][b] == pytest.approx(part.max(), rel=1e-6) and c["min"][b] == pytest.approx(part.min(), rel=1e-6)
        assert c["mean"][b] == pytest.approx(part.mean(), rel=1e-5)
    assert max(c["max"]) == pytest.approx(truth.max(), rel=1e-6)
    assert int(np.argmax(truth)) == trendsrun.PLANT                 # the spike is the planted step's
    zoom = _ok(live, "api/ranks/0/series/curve?tensor=fc2.weight.grad&stat=l2norm&start=70&stop=90&points=800")
    assert zoom["exact"] and zoom["x"] == list(range(70, 91)) and zoom["max"] == pytest.approx(truth[70:91].tolist(), rel=1e-6)


def test_the_heatmap_is_numpys_max_or_mean_per_bucket(live: LiveServer, run: trendsrun.Run) -> None:
    hm = _ok(live, "api/ranks/0/series/heatmap?stat=l2norm&role=gradient&columns=6&agg=max")
    rows = [r["name"] for r in hm["rows"]]
    assert rows == ["fc1.weight.grad", "fc1.bias.grad", "fc2.weight.grad", "fc2.bias.grad"]
    assert hm["groups"] == [{"name": "fc1", "start": 0, "count": 2}, {"name": "fc2", "start": 2, "count": 2}]
    assert hm["x"] == [0, 20, 40, 60, 80, 100] and np.asarray(hm["values"]).shape == (4, 6)
    truth = np.stack([run.truth[run.names.index(n), :, STAT["l2norm"]] for n in rows]).reshape(4, 6, 20)
    assert np.allclose(hm["values"], truth.max(axis=2), rtol=1e-6)
    assert hm["lo"] == pytest.approx(truth.max(axis=2).min(), rel=1e-6)
    mean = _ok(live, "api/ranks/0/series/heatmap?stat=l2norm&role=gradient&columns=6&agg=mean&log=1")
    assert np.allclose(mean["values"], np.log10(truth.mean(axis=2)), rtol=1e-5)
    zoom = _ok(live, "api/ranks/0/series/heatmap?stat=max&role=weight&start=75&stop=84&columns=100")
    assert zoom["x"] == list(range(75, 85)) and zoom["start"] == 75 and zoom["stop"] == 84
    k = run.names.index("fc1.weight")
    assert zoom["values"][0] == pytest.approx(run.truth[k, 75:85, STAT["max"]].tolist(), rel=1e-6)


def test_the_loss_and_the_other_scalars(live: LiveServer, run: trendsrun.Run) -> None:
    s = _ok(live, "api/ranks/0/series/scalars?points=1000")["scalars"]
    assert s["loss"]["max"] == pytest.approx(run.loss.tolist(), rel=1e-6) and s["loss"]["known"]
    assert s["lr"]["max"][0] == pytest.approx(1e-2) and s["grad_norm"]["known"]
    assert not s["loss_scale"]["known"] and s["loss_scale"]["max"] == [None] * trendsrun.STEPS


def test_spikes_come_with_the_nearest_deep_capture(live: LiveServer) -> None:
    sp = _ok(live, "api/ranks/0/series/spikes")
    if not sp["available"]:
        pytest.skip(sp["message"])
    first = sp["spikes"][0]
    assert first["step"] == trendsrun.PLANT
    assert first["deep"] == {"iteration": trendsrun.DEEP, "graph": 0, "distance": trendsrun.PLANT - trendsrun.DEEP}
    assert first["causes"] and first["causes"][0]["tensor"].startswith("fc1.weight")


@pytest.mark.parametrize("query, words", [
    ("series/curve?stat=l2norm", "missing parameter 'tensor'"),
    ("series/curve?tensor=fc1.weight&stat=median", "bad stat 'median'"),
    ("series/curve?tensor=fc1.weight&points=0", "bad points 0"),
    ("series/curve?tensor=fc1.weight&start=90&stop=10", "start after stop"),
    ("series/curve?tensor=fc1.weight&start=abc", "start"),
    ("series/heatmap?role=activations", "bad role 'activations'"),
    ("series/heatmap?agg=median", "bad agg 'median'"),
    ("series/heatmap?columns=999999", "bad columns 999999"),
    ("series/spikes?z=-1", "bad z"),
    ("series/spikes?z=nan", "bad z"),
])
def test_bad_parameters_are_400s_that_say_why(live: LiveServer, query: str, words: str) -> None:
    status, body = _get(live, f"api/ranks/0/{query}")
    assert status == 400 and words in body["error"], body


def test_misses_are_404s(live: LiveServer) -> None:
    status, body = _get(live, "api/ranks/0/series/curve?tensor=fc9.weight")
    assert status == 404 and "fc9.weight" in body["error"]
    assert _get(live, "api/ranks/7/series")[0] == 404


def test_a_rank_without_a_series_says_so(make_app: Any, mlp_dump: str) -> None:
    c = make_app(mlp_dump).test_client()
    body = c.get("/api/ranks/0/series").get_json()
    assert body["available"] is False and "records no per-step series" in body["message"]
    r = c.get("/api/ranks/0/series/heatmap")
    assert r.status_code == 404 and "records no per-step series" in r.get_json()["error"]


def test_nan_is_null_not_a_string(live: LiveServer) -> None:
    """A bucket with no known value is JSON null (loss_scale above); every number sent is finite."""
    c = _ok(live, "api/ranks/0/series/curve?tensor=fc2.bias.update&stat=std")
    assert all(v is None or (isinstance(v, float) and math.isfinite(v)) for v in c["max"] + c["min"])


def test_the_nearest_deep_capture(run: trendsrun.Run, tmp_path: Any) -> None:
    """The recorded iteration nearest a step, from either side, with the graph that holds it."""
    from debugger import open_dump
    from debugger.formats.tdbg_h5.writer import DumpWriter
    from debugger.seriesviews import nearest_deep

    rank = open_dump(run.root).rank(0)
    assert nearest_deep(rank, trendsrun.PLANT) == {"iteration": trendsrun.DEEP, "graph": 0, "distance": trendsrun.PLANT - trendsrun.DEEP}
    assert nearest_deep(rank, 0) == {"iteration": trendsrun.DEEP, "graph": 0, "distance": trendsrun.DEEP}
    assert nearest_deep(rank, trendsrun.DEEP)["distance"] == 0
    DumpWriter(str(tmp_path / "empty"), 0, "statistics", framework="PyTorch").close()
    assert nearest_deep(open_dump(str(tmp_path / "empty")).rank(0), 5) is None
