"""The triage's findings are the default watchpoints (GET/POST/DELETE /api/watchpoints, POST
/api/watchpoints/defaults): pending while the triage runs, then its list with the hits its scan found, not
checked again; an edit makes the list the user's (kept across a restart); back to the triage's on request;
a triage from the cache gives its list, checked where a page asks."""
from __future__ import annotations

import os
import time
from typing import Any, Callable

import pytest

from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.views import triage as _triage
from debugger.watch import scan

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
RECOMMENDED = len(_triage.watchpoints())


@pytest.fixture(autouse=True)
def _sample() -> None:
    if not os.path.isdir(SAMPLE):
        pytest.skip("dumps_sample/ is not present")


def ok(resp: Any, status: int = 200) -> Any:
    assert resp.status_code == status, resp.get_data(as_text=True)
    return resp.get_json()


def triaged(c: Any, dump: str = "single") -> dict[str, Any]:
    for _ in range(600):
        r = ok(c.get(f"/api/triage?dump={dump}"))
        if r["state"] == "done":
            return r["result"]
        time.sleep(0.05)
    raise AssertionError("the triage did not finish")


def truth(dump: str, rank: int, iteration: int) -> int:
    """Hits of the recommended watchpoints in one rank's iteration, by a scan of its own."""
    res = scan(open_dump(os.path.join(SAMPLE, dump)), _triage.watchpoints(), jobs=1, series_sweep=False)
    return sum(1 for h in res.hits if (h.rank, h.iteration) == (rank, iteration))


def test_the_triage_findings_are_the_watchpoints_with_no_second_scan(make_app: Callable[..., Any]) -> None:
    app = make_app(SAMPLE)
    c = app.test_client()
    before = ok(c.get("/api/watchpoints?dump=single"))
    assert before["total"] == 0 and before["source"] == {"from": "triage", "preset": "recommended", "pending": True,
                                                                 "failed": False}
    t = triaged(c)
    after = ok(c.get("/api/watchpoints?dump=single"))
    assert after["total"] == RECOMMENDED and after["source"]["pending"] is False and after["verdict"] == "found"
    assert [w["text"].split(":")[0] for w in after["items"]] == [w.name for w in _triage.watchpoints()]
    assert ok(c.get("/api/hits?dump=single&all=1"))["total"] == t["hits"]
    assert ok(c.get("/api/hits?dump=single&rank=0&iteration=2"))["total"] == truth("single", 0, 2)
    assert ok(c.post("/api/replay/next_hit?dump=single", json={"rank": 0, "iteration": 0}))["iteration"] == 1
    # every answer came from the triage's scan: the session read no tensor file of its own
    assert app.extensions["tdbg"].watch("single").files_checked == 0
    assert ok(c.get("/api/watchpoints?dump=dp2"))["source"]["pending"] is True     # per dump


def test_an_edit_is_the_users_across_a_restart_and_back_to_defaults_restores_the_triages(make_app: Callable[..., Any]) -> None:
    c = make_app(SAMPLE).test_client()
    triaged(c)
    listed = ok(c.get("/api/watchpoints?dump=single"))["items"]
    saturated = next(w for w in listed if w["name"] == "activation_saturated_layer")
    ok(c.delete(f"/api/watchpoints/{saturated['id']}?dump=single"))
    mine = ok(c.get("/api/watchpoints?dump=single"))
    assert mine["source"] == {"from": "user"} and mine["total"] == RECOMMENDED - 1
    assert ok(c.get("/api/hits?dump=single&rank=0&iteration=2"))["total"] == truth("single", 0, 2) - 1
    restarted = make_app(SAMPLE).test_client()          # the same cache folder: the user's list is kept
    again = ok(restarted.get("/api/watchpoints?dump=single"))
    assert again["source"] == {"from": "user"} and [w["text"] for w in again["items"]] == [w["text"] for w in mine["items"]]
    back = ok(restarted.post("/api/watchpoints/defaults?dump=single"))
    assert back["source"]["from"] == "triage" and back["total"] == RECOMMENDED
    assert ok(restarted.get("/api/hits?dump=single&rank=0&iteration=2"))["total"] == truth("single", 0, 2)
    ok(restarted.delete("/api/watchpoints?dump=single"))     # "Remove all": an empty list of the user's
    emptied = ok(restarted.get("/api/watchpoints?dump=single"))
    assert emptied["total"] == 0 and emptied["source"] == {"from": "user"}


def test_a_triage_from_the_cache_gives_its_list_checked_where_asked(make_app: Callable[..., Any], tmp_path: Any) -> None:
    cache = StatsCache.for_dump(os.path.join(SAMPLE, "torch_single"), str(tmp_path / "cache"))
    _triage.triage(open_dump(os.path.join(SAMPLE, "torch_single")), cache)      # `tdbg triage` before the server
    c = make_app(SAMPLE).test_client()
    assert ok(c.get("/api/triage?dump=torch_single"))["state"] == "done"
    listed = ok(c.get("/api/watchpoints?dump=torch_single"))
    assert listed["total"] == RECOMMENDED and listed["source"]["pending"] is False
    assert ok(c.get("/api/hits?dump=torch_single&rank=0&iteration=3"))["total"] == truth("torch_single", 0, 3)
