"""The Watchpoints view states what each watchpoint checked (issue 37), in a real headless Chromium against
the real server: on dumps_sample/torch_2d, recorded without activation tensors, an activation watchpoint
is badged "checked nothing" and the hits card never reads as a clean run; the overflow search, which
checked every tensor, is badged complete; at a laptop's 1366x768 nothing scrolls sideways; the overview's
watchpoint card says it too."""
from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

import pytest

from liveserver import LiveServer

pytestmark = pytest.mark.browser
SCREENSHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "screenshots")


@pytest.fixture
def server(fresh_sample: LiveServer) -> LiveServer:
    """dumps_sample/ served live, its watchpoints this test's only."""
    return fresh_sample


def watch(srv: LiveServer, spec: str) -> None:
    req = urllib.request.Request(f"{srv.url}api/watchpoints?dump=torch_2d", data=json.dumps({"spec": spec}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 201


def row(page: Any, text: str) -> Any:
    return page.locator(".wp-list li", has=page.locator(".wp-text", has_text=text))


def test_a_watchpoint_that_checked_nothing_is_badged_and_the_hits_card_is_not_clean(page: Any, server: LiveServer) -> None:
    watch(server, "activation_saturated_layer")
    watch(server, "overflow")
    page.set_viewport_size({"width": 1366, "height": 768})
    try:
        page.goto(server.url + "#/watch?dump=torch_2d&it=1")
        page.wait_for_selector("body[data-ready='1']")
        page.wait_for_selector(".wp-list li[data-coverage='unanswered']")
        nothing, whole = row(page, "activation_saturated_layer"), row(page, "overflow")
        assert nothing.locator(".wp-badge").inner_text() == "checked nothing"
        assert "no tensor of its kinds" in nothing.locator(".wp-cov").inner_text()
        assert whole.get_attribute("data-coverage") == "complete"
        assert whole.locator(".wp-badge").inner_text() == "complete"
        assert whole.locator(".wp-cov").inner_text().startswith("Checked ") and "in iteration 1" in whole.locator(".wp-cov").inner_text()
        summary = page.locator(".hits-summary.warn")
        assert summary.inner_text() == "No hit, but 1 watchpoint checked nothing in iteration 1 · rank 0"
        note = page.locator(".hits-body .incomplete-box")
        assert note.locator("b").inner_text() == "No hit, but 1 watchpoint checked nothing"
        assert note.locator("li").count() == 1
        assert note.locator("li").inner_text().startswith("activation_saturated_layer:")
        assert "no tensor of its kinds" in note.locator("li").inner_text()
        assert page.locator(".hits-body .empty").count() == 0     # no "No hits" box that reads as clean
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        os.makedirs(SCREENSHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SCREENSHOTS, "watch-coverage-1366x768.png"))
        # every iteration: the same verdict over all that was checked
        page.locator(".seg button", has_text="All iterations").click()
        page.wait_for_function("(document.querySelector('.hits-summary.warn') || {}).textContent"
                               " === 'No hit, but 1 watchpoint checked nothing · rank 0 · 3 iterations checked'")
        page.wait_for_selector(".wp-list li[data-coverage='complete'] .wp-cov")
        assert "in iterations 0-2" in row(page, "overflow").locator(".wp-cov").inner_text()
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        # the overview's watchpoint card does not read "0 hits" as clean either
        page.locator("#tabs a[data-view=overview]").click()
        page.wait_for_selector(".checked-nothing")
        assert page.locator(".checked-nothing").inner_text().startswith(
            "No hit, but 1 watchpoint checked nothing: activation_saturated_layer")
    finally:
        page.goto("about:blank")   # the page polls: it must not talk to a server being stopped
