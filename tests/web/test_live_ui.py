"""The graph view follows a running job (Chromium, real HTTP, a real PyTorch training process recording
tdbg-h5): new iterations appear in the top bar without a reload and can be opened, and a NaN planted
after the page opened shows as a hit in the Watchpoints tab while the job runs."""
from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from typing import Any

import pytest

import followrun
from liveserver import LiveServer
from tdbg_web import create_app

pytestmark = pytest.mark.browser


def _last(page: Any) -> int:
    m = re.search(r"of (\d+)\D(\d+)", page.locator("#it-range").inner_text())
    return int(m.group(2)) if m else -1


def _until_newer(rank_dir: str, than: int) -> int:
    """The newest iteration file of the rank once one is newer than ``than`` (within 60 s)."""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        have = [int(m.group(1)) for n in os.listdir(rank_dir) if (m := re.match(r"iteration_(\d+)\.h5$", n))]
        if have and max(have) > than:
            return max(have)
        time.sleep(0.01)
    raise AssertionError(f"no iteration after {than} in 60 s: the job stopped")


def test_new_iterations_and_a_new_hit_appear_without_a_reload(page: Any, tmp_path: Any) -> None:
    out = str(tmp_path / "dump")
    trainer = followrun.start(tmp_path, out, steps=400, nan_at=20, pause=0.2)
    srv = None
    try:
        followrun.wait_for(os.path.join(out, "rank_0", "iteration_00000000.h5"))
        srv = LiveServer(create_app(out, {"CACHE_DIR": str(tmp_path / "cache")}))
        req = urllib.request.Request(srv.url + "api/watchpoints", data=json.dumps({"spec": "weight_overflow"}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(req, timeout=60).close()
        page.goto(srv.url + "#/graph?it=0")
        page.wait_for_selector("body[data-ready='1']")
        first = _last(page)
        assert 0 <= first < 20, "the page opened after the planted step: the job ran too fast"
        navigations = page.evaluate("performance.getEntriesByType('navigation').length")
        delays = []       # from a new iteration's file on disk to the top bar showing it
        for _ in range(3):
            newest = _until_newer(os.path.join(out, "rank_0"), _last(page))
            t0 = time.monotonic()
            page.wait_for_function(f"""() => {{ const m = /of (\\d+)\\D(\\d+)/.exec(document.getElementById('it-range').textContent);
                return m && Number(m[2]) >= {newest}; }}""", timeout=30_000)
            delays.append(time.monotonic() - t0)
        print(f"a new iteration in the top bar {', '.join(f'{d:.2f}' for d in delays)} s after its file")
        assert trainer.poll() is None and max(delays) < 10    # the goal is 2 s: generous on a loaded CI machine
        page.click("#it-last")                       # the new iteration can be opened
        page.wait_for_function(f"Number(document.getElementById('it-value').textContent) > {first}")
        # the planted NaN: the Watchpoints tab's "All iterations" redraws as the new iterations are checked
        page.click("#tabs a[data-view='watch']")
        page.click(".hits-card button:has-text('All iterations')")
        page.wait_for_selector(".hits-card .hits-body :text('weight_overflow')", timeout=60_000)
        assert trainer.poll() is None
        assert page.evaluate("performance.getEntriesByType('navigation').length") == navigations   # no reload
    finally:
        page.close()          # before the server goes: the page asks it every second
        trainer.kill()
        trainer.wait()
        if srv is not None:
            srv.stop()


def test_a_finished_dump_s_newest_iteration_shows_its_hits(page: Any, live_sample: Any) -> None:
    """Following costs a finished dump nothing it shows: its files' age tells the server at its first look
    that no job is writing it, so the newest iteration has its hit as soon as the page opens it."""
    req = urllib.request.Request(live_sample.url + "api/watchpoints?dump=single", method="POST",
                                 data=json.dumps({"spec": "activation_saturated_layer"}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=60).close()
    page.goto(live_sample.url + "#/graph?dump=single&it=0")
    page.wait_for_selector("body[data-ready='1']")
    page.click("#it-last")
    page.wait_for_function("document.getElementById('it-value').textContent === '7'")
    page.wait_for_function("!document.getElementById('hit-badge').hidden", timeout=20_000)
    assert page.locator("#hit-badge").inner_text() == "1"      # the offline scan's one hit in iteration 7
    with urllib.request.urlopen(live_sample.url + "api/live?dump=single&rank=0", timeout=60) as resp:
        live = json.loads(resp.read())
    assert live["quiet"] and live["generation"] == 0 and live["error"] is None


def test_the_triage_leaves_out_what_the_job_writes_and_is_redone_whole_when_it_is_quiet(page: Any, tmp_path: Any) -> None:
    """The landing page on a MindSpore run whose files arrive half-written: its findings say which
    iterations were left out while the job writes; once the job is quiet the page redoes the triage on
    its own, with every iteration and no note."""
    root = str(tmp_path / "ms")
    writer = followrun.arriving("mindspore", root, 0.5)
    srv = None
    try:
        followrun.wait_for(os.path.join(root, "rank_0", "Net", "0", "0"))
        srv = LiveServer(create_app(root, {"CACHE_DIR": str(tmp_path / "cache")}))
        page.goto(srv.url + "#/triage")
        note = page.wait_for_selector(".findings .left-out", timeout=60_000)
        assert "left out: the job is still writing" in note.inner_text() and writer.poll() is None
        assert writer.wait() == 0
        page.wait_for_function("""() => !document.querySelector('.findings .left-out')
            && document.querySelector('.page.triage').dataset.ready === '1'""", timeout=60_000)
        assert "8 iterations" in page.locator(".findings .card-head").inner_text()
    finally:
        page.close()
        writer.kill()
        writer.wait()
        if srv is not None:
            srv.stop()
