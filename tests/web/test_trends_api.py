"""The trends view's API over real HTTP, on the series that Recorder(series=True) wrote of a real training
loop (tests/web/trendsrun.py: an MLP whose fc1 weight is scaled 25x at step 120): curves decimated to
min/max buckets keep the planted spike's max at any zoom, the heatmap's cells are numpy's max/mean of the
steps they cover (truth computed with plain torch in the loop), and bad arguments are 400s that say why."""
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
    roles = {t["name"]: t["role"] for t in c["tensors"]}
    assert set(run.truth) <= set(roles) and roles["fc1.weight.update"] == "update"
    assert roles["exp_avg_sq.fc1.weight"] == "optimizer_state"       # Adam's state, named as the recorder names it
    assert next(t for t in c["tensors"] if t["name"] == "exp_avg_sq.fc1.weight")["layer"] == "fc1"
    grad = next(t for t in c["tensors"] if t["name"] == "fc1.weight.grad")
    assert grad == {"name": "fc1.weight.grad", "role": "gradient", "param": "fc1.weight", "layer": "fc1"}


def test_a_decimated_curve_keeps_the_planted_spike_at_every_zoom(live: LiveServer, run: trendsrun.Run) -> None:
    """fc2.weight's gradient norm peaks at the step fc1's weight was scaled (fc1's saturated tanh outputs
    feed it): with 7 buckets over the run the bucket holding that step shows the step's own value as its
    max, and a zoom is exact."""
    truth = run.truth["fc2.weight.grad"][:, STAT["l2norm"]]
    c = _ok(live, "api/ranks/0/series/curve?tensor=fc2.weight.grad&stat=l2norm&points=7")
    assert not c["exact"] and len(c["x"]) == 7 and c["count"] == trendsrun.STEPS
    edges = c["x"] + [trendsrun.STEPS]
    for b in range(7):
        part = truth[edges[b]:edges[b + 1]]
        assert c["max"][b] == pytest.approx(part.max(), rel=1e-6) and c["min"][b] == pytest.approx(part.min(), rel=1e-6)
        assert c["mean"][b] == pytest.approx(part.mean(), rel=1e-5)
    assert max(c["max"]) == pytest.approx(truth.max(), rel=1e-6)
    assert int(np.argmax(truth)) == trendsrun.PLANT                 # the spike is the planted step's
    a, b = trendsrun.PLANT - 10, trendsrun.PLANT + 10
    zoom = _ok(live, f"api/ranks/0/series/curve?tensor=fc2.weight.grad&stat=l2norm&start={a}&stop={b}&points=800")
    assert zoom["exact"] and zoom["x"] == list(range(a, b + 1)) and zoom["max"] == pytest.approx(truth[a:b + 1].tolist(), rel=1e-6)


def test_the_heatmap_is_numpys_max_or_mean_per_bucket(live: LiveServer, run: trendsrun.Run) -> None:
    cols = trendsrun.STEPS // 20
    hm = _ok(live, f"api/ranks/0/series/heatmap?stat=l2norm&role=gradient&columns={cols}&agg=max")
    rows = [r["name"] for r in hm["rows"]]
    assert set(rows[:2]) == {"fc1.weight.grad", "fc1.bias.grad"} and set(rows[2:]) == {"fc2.weight.grad", "fc2.bias.grad"}
    assert hm["groups"] == [{"name": "fc1", "start": 0, "count": 2}, {"name": "fc2", "start": 2, "count": 2}]
    assert hm["x"] == list(range(0, trendsrun.STEPS, 20)) and np.asarray(hm["values"]).shape == (4, cols)
    truth = np.stack([run.truth[n][:, STAT["l2norm"]] for n in rows]).reshape(4, cols, 20)
    assert np.allclose(hm["values"], truth.max(axis=2), rtol=1e-6)
    assert hm["lo"] == pytest.approx(truth.max(axis=2).min(), rel=1e-6)
    mean = _ok(live, f"api/ranks/0/series/heatmap?stat=l2norm&role=gradient&columns={cols}&agg=mean&log=1")
    assert np.allclose(mean["values"], np.log10(truth.mean(axis=2)), rtol=1e-5)
    a, b = trendsrun.PLANT - 5, trendsrun.PLANT + 4
    zoom = _ok(live, f"api/ranks/0/series/heatmap?stat=max&role=weight&start={a}&stop={b}&columns=100")
    assert zoom["x"] == list(range(a, b + 1)) and zoom["start"] == a and zoom["stop"] == b
    fc1 = [r["name"] for r in zoom["rows"]].index("fc1.weight")
    assert zoom["values"][fc1] == pytest.approx(run.truth["fc1.weight"][a:b + 1, STAT["max"]].tolist(), rel=1e-6)


def test_the_loss_and_the_other_scalars(live: LiveServer, run: trendsrun.Run) -> None:
    s = _ok(live, "api/ranks/0/series/scalars?points=1000")["scalars"]
    assert s["loss"]["max"] == pytest.approx(run.loss.tolist(), rel=1e-6) and s["loss"]["known"]
    assert s["lr"]["max"][0] == pytest.approx(1e-2) and s["grad_norm"]["known"]
    assert not s["loss_scale"]["known"] and s["loss_scale"]["max"] == [None] * trendsrun.STEPS


def test_spikes_come_with_the_nearest_deep_capture(live: LiveServer) -> None:
    sp = _ok(live, "api/ranks/0/series/spikes")
    assert sp["available"], sp
    assert [s["step"] for s in sp["spikes"]] == [trendsrun.PLANT]
    first = sp["spikes"][0]
    assert first["deep"] == {"iteration": trendsrun.DEEP, "graph": 0, "distance": trendsrun.PLANT - trendsrun.DEEP}
    # the ranking is debugger.watch.spikes' (tested there): fc1 was scaled before the forward, so its weight
    # and gradients all moved at the planted step; the update no optimizer could have made ranks it first
    assert {c["tensor"] for c in first["causes"][:2]} == {"fc1.weight", "fc1.weight.update"}
    assert [c["outside_optimizer"] for c in first["causes"][:3]] == [True, True, False]
    nodes = {c["tensor"]: c["node"] for c in first["causes"]}
    assert nodes["fc1.weight"] == "fc1.weight"            # each cause names the deep capture's node it opens
    assert all(n in (t, t.removesuffix(".update"), None) for t, n in nodes.items())
    assert all(n is None for t, n in nodes.items() if t in ("lr", "grad_norm", "loss_scale"))     # scalars: no node


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
    from debugger.views.series import nearest_deep

    rank = open_dump(run.root).rank(0)
    assert nearest_deep(rank, trendsrun.PLANT) == {"iteration": trendsrun.DEEP, "graph": 0, "distance": trendsrun.PLANT - trendsrun.DEEP}
    assert nearest_deep(rank, 0) == {"iteration": trendsrun.DEEP, "graph": 0, "distance": trendsrun.DEEP}
    assert nearest_deep(rank, trendsrun.DEEP)["distance"] == 0
    DumpWriter(str(tmp_path / "empty"), 0, "statistics", framework="PyTorch").close()
    assert nearest_deep(open_dump(str(tmp_path / "empty")).rank(0), 5) is None


def test_a_series_without_a_loss_has_no_spikes_and_says_why(make_app: Any, tmp_path: Any) -> None:
    from debugger.formats.tdbg_h5.series import SeriesWriter
    from debugger.formats.tdbg_h5.writer import DumpWriter

    root = str(tmp_path / "noloss")
    DumpWriter(root, 0, "statistics", framework="PyTorch").close()
    with SeriesWriter(f"{root}/rank_0", ["w"], roles=["weight"], params=["w"]) as sw:
        for step in range(5):
            sw.add(step, np.full((1, len(trendsrun.STAT_NAMES)), float(step)))
    body = make_app(root).test_client().get("/api/ranks/0/series/spikes").get_json()
    assert body == {"available": False, "spikes": [], "message": "the series records no loss"}


def test_the_host_guard_covers_the_trends_routes(live: LiveServer) -> None:
    """A page on another site that resolves its name to 127.0.0.1 (DNS rebinding) gets no series."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    try:
        conn.request("GET", "/api/ranks/0/series/curve?tensor=fc1.weight", headers={"Host": f"evil.example:{live.port}"})
        r = conn.getresponse()
        assert r.status == 400 and "curve" not in r.read().decode()
    finally:
        conn.close()
