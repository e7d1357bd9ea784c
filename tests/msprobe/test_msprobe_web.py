"""The web API on msprobe dumps (Flask's test client; the browser UI reads only this API)."""
from __future__ import annotations

import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "dumps_sample", "msprobe")


@pytest.fixture
def app_on(tmp_path):  # type: ignore[no-untyped-def]
    pytest.importorskip("flask")
    from tdbg_web import create_app

    return lambda name: create_app(os.path.join(ROOT, name), {"TESTING": True,
                                                              "CACHE_DIR": str(tmp_path / "cache")}).test_client()


def _ok(resp):  # type: ignore[no-untyped-def]
    assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
    return resp.get_json()


def test_graph_node_and_tensor_views(app_on) -> None:  # type: ignore[no-untyped-def]
    c = app_on("tensor_mix")
    info = _ok(c.get("/api/info"))
    assert info["format"] == "msprobe"
    scope = _ok(c.get("/api/ranks/0/graphs/0/scope?path=block-Sequential"))
    assert scope
    node = _ok(c.get("/api/ranks/0/graphs/0/node?node=Functional.linear.1.forward&iteration=0"))
    assert [i["node"] for i in node["inputs"]][1] == "block.0.weight"
    t = _ok(c.get("/api/ranks/0/graphs/0/tensor?node=block.0.weight&iteration=1"))
    assert t["tensor"]["kind"] == "weight" and t["tensor"]["shape"] == [32, 32] and t["stats"]["count"] == 1024
    assert t["stats"]["std"] is not None and t["previous_iteration"] == 0     # from the values
    vals = _ok(c.get("/api/ranks/0/graphs/0/tensor/values?node=block.0.weight&iteration=1&slice=[0,:4]"))
    assert vals["tensor"]["node"] == "block.0.weight" and "pt" in vals["tensor"]["location"]
    assert _ok(c.get("/api/ranks/0/graphs/0/tensor/diff?node=block.0.weight&iteration=1&slice=[0,:4]"))


def test_statistics_only_tensor_view(app_on) -> None:  # type: ignore[no-untyped-def]
    c = app_on("statistics_mix")
    t = _ok(c.get("/api/ranks/0/graphs/0/tensor?node=Torch.tanh.0.forward&iteration=2"))
    assert t["stats"]["count"] == 256 and t["stats"]["nan"] == 0 and t["stats"]["std"] is None
    assert -1 < t["stats"]["min"] < t["stats"]["max"] < 1 and t["histogram"] is None
    v = c.get("/api/ranks/0/graphs/0/tensor/values?node=Torch.tanh.0.forward&iteration=2")
    assert v.status_code == 404 and "this dump holds statistics only" in v.get_data(as_text=True)
