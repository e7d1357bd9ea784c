"""The trends view follows a run while its training process writes it: new steps of the per-step series
are drawn without a reload (Chromium, real HTTP, a real PyTorch job recording with series=True)."""
from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest

import followrun
from liveserver import LiveServer
from tdbg_web import create_app

pytestmark = pytest.mark.browser


def _steps(page: Any) -> int:
    m = re.search(r"Rank 0: ([\d,]+) steps", page.locator(".trends-head").inner_text())
    return int(m.group(1).replace(",", "")) if m else -1


def test_new_steps_appear_without_a_reload(page: Any, tmp_path: Any) -> None:
    out = str(tmp_path / "dump")
    trainer = followrun.start(tmp_path, out, steps=100_000, nan_at=-1, pause=0.05)
    srv = None
    try:
        series = os.path.join(out, "rank_0", "series")
        followrun.wait_for(series)
        while not any(n.endswith(".h5") and n.startswith("steps_") for n in os.listdir(series)):
            time.sleep(0.05)
        srv = LiveServer(create_app(out, {"CACHE_DIR": str(tmp_path / "cache")}))
        page.goto(srv.url + "#/trends")
        page.wait_for_selector(".trends-loss svg path.curve-band")
        first = _steps(page)
        assert first > 0
        navigations = page.evaluate("performance.getEntriesByType('navigation').length")
        page.wait_for_function(f"""() => {{ const m = /Rank 0: ([\\d,]+) steps/.exec(
            document.querySelector('.trends-head').innerText); return m && Number(m[1].replace(/,/g, '')) > {first}; }}""",
                               timeout=20_000)
        assert _steps(page) > first and trainer.poll() is None
        assert page.evaluate("performance.getEntriesByType('navigation').length") == navigations   # no reload
    finally:
        page.close()          # before the server goes: the live view asks it for new steps
        trainer.kill()
        trainer.wait()
        if srv is not None:
            srv.stop()
