"""Issue 38 item 2: the Overview shows the runs of a dump apart when a run was resumed into it after a
checkpoint restart (Recorder(resume=True)), in a real headless Chromium against the real server."""
from __future__ import annotations

import shutil
from typing import Any, Iterator

import pytest

from liveserver import LiveServer
from resumerun import record_restarted
from tdbg_web import create_app

pytestmark = pytest.mark.browser


@pytest.fixture
def server(tmp_path: Any) -> Iterator[LiveServer]:
    """A folder holding the restarted run's dump."""
    pytest.importorskip("torch")
    root = tmp_path / "dumps"
    record_restarted(str(root / "restarted"), str(tmp_path), plain=False)     # the page needs the dump only
    srv = LiveServer(create_app(str(root), {"CACHE_DIR": str(tmp_path / "cache")}))
    yield srv
    srv.stop()
    shutil.rmtree(root, ignore_errors=True)


def test_the_overview_shows_a_resumed_runs_apart(page: Any, server: LiveServer) -> None:
    page.goto(server.url + "#/overview?dump=restarted")
    page.wait_for_selector("body[data-ready='1']")
    note = page.wait_for_selector(".runs-note")
    text = note.inner_text()
    assert text.startswith("2 training runs:") and "run 1 from iteration 0" in text
    assert "run 2 from iteration 6 (resumed" in text
    page.goto("about:blank")   # the page polls: it must not talk to the server being stopped
