"""The web API on tdbg-h5 dumps converted from the sample: values, and statistics only."""
from __future__ import annotations

import json
import os
from typing import Any

import pytest
from clirun import run_cli

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "dumps_sample", "single")
FC1 = "Default/network-WithLossCell/_backbone-Net/fc1-Dense/MatMul-op0"


def ok(resp: Any) -> Any:
    assert resp.status_code == 200, resp.get_data(as_text=True)
    return json.loads(resp.get_data(as_text=True))


@pytest.fixture(scope="module")
def converted(tmp_path_factory: Any) -> dict[str, str]:
    """The sample converted twice: values and statistics, and statistics only."""
    base = tmp_path_factory.mktemp("web-converted")
    out = {"values": str(base / "values"), "statistics": str(base / "statistics")}
    assert run_cli("convert", SAMPLE, out["values"]).code == 0
    assert run_cli("convert", SAMPLE, out["statistics"], "--statistics").code == 0
    return out


@pytest.mark.parametrize("kind", ["values", "statistics"])
def test_every_read_view_answers_on_a_converted_dump(make_app: Any, converted: dict, kind: str) -> None:
    c = make_app(converted[kind]).test_client()
    info = ok(c.get("/api/info"))
    assert info["format"] == "tdbg-h5" and info["ranks"][0]["framework"] == "MindSpore"
    scope = ok(c.get("/api/ranks/0/graphs/0/scope?path=Default/network-WithLossCell/_backbone-Net/fc1-Dense"))
    assert FC1 in {ch["id"] for ch in scope["children"]["items"]}
    node = ok(c.get(f"/api/ranks/0/graphs/0/node?node={FC1}&iteration=3"))
    assert node["iterations"] == list(range(8)) and any(t["dumped"] for t in node["tensors"])
    t = ok(c.get(f"/api/ranks/0/graphs/0/tensor?node={FC1}&iteration=3"))
    ref = ok(make_app(SAMPLE).test_client().get(f"/api/ranks/0/graphs/0/tensor?node={FC1}&iteration=3"))
    assert t["stats"] == ref["stats"]
    hist = ok(c.get(f"/api/ranks/0/graphs/0/tensor/history?node={FC1}&iteration=3"))
    assert len(hist["items"]) == 8 and all(i["stats"] for i in hist["items"])
    values = c.get(f"/api/ranks/0/graphs/0/tensor/values?node={FC1}&iteration=3")
    if kind == "values":
        assert t["histogram"] == ref["histogram"]
        assert ok(values)["values"] == ok(make_app(SAMPLE).test_client().get(
            f"/api/ranks/0/graphs/0/tensor/values?node={FC1}&iteration=3"))["values"]
    else:
        assert t["histogram"] is None
        assert values.status_code == 404 and "needs tensor values" in values.get_json()["error"]
        diff = c.get(f"/api/ranks/0/graphs/0/tensor/diff?node={FC1}&iteration=3")
        assert diff.status_code == 404 and "needs tensor values" in diff.get_json()["error"]


def test_watchpoints_on_a_statistics_only_dump_say_what_they_miss(make_app: Any, converted: dict) -> None:
    c = make_app(converted["statistics"]).test_client()
    r = c.post("/api/watchpoints", json={"preset": "recommended"})
    assert r.status_code in (200, 201), r.get_data(as_text=True)
    hits = ok(c.get("/api/hits?all=1"))
    names = {h["watchpoint"] for h in hits["items"]}
    assert "weight_not_changed" in names     # the frozen fc2: equal digests, exactly unchanged
