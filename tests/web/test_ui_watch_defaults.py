"""The triage's findings are the default watchpoints (in a real headless Chromium against the real server,
from a fresh cache and with no click): the tab's badge says "…" while the triage runs, then shows the
triage's hits of the iteration; the graph marks the right scopes and nodes; "Run to next hit" moves on to the
next iteration with a hit. An edit in the Watchpoints view makes the list the user's, kept across a server
restart; "Back to the triage's" restores the defaults. A dump where the triage could not check everything
is never badged as clean."""
from __future__ import annotations

import functools
import json
import os
import urllib.request
from typing import Any, Iterator

import pytest

from debugger import open_dump
from debugger.views import triage as _triage
from debugger.watch import scan
from liveserver import LiveServer
from tdbg_web import create_app

pytestmark = pytest.mark.browser
SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
BACKBONE = "Default/network-WithLossCell/_backbone-Net"
# every text the tab's badge shows, in order, from the page's first script on
BADGE_LOG = """
window.__badges = [];
new MutationObserver(() => {
  const b = document.getElementById('hit-badge');
  const seen = b && !b.hidden ? `${b.dataset.state}:${b.textContent}` : 'hidden';
  if (window.__badges[window.__badges.length - 1] !== seen) window.__badges.push(seen);
}).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
"""


@functools.lru_cache(maxsize=None)
def truth(dump: str) -> dict[int, int]:
    """Hits of the recommended watchpoints per iteration of rank 0, by a scan of its own."""
    res = scan(open_dump(os.path.join(SAMPLE, dump)), _triage.watchpoints(), jobs=1, series_sweep=False)
    out: dict[int, int] = {}
    for h in res.hits:
        if h.rank == 0:
            out[h.iteration] = out.get(h.iteration, 0) + 1
    return out


@pytest.fixture
def cache(tmp_path: Any) -> str:
    if not os.path.isdir(SAMPLE):
        pytest.skip("dumps_sample/ is not present")
    return str(tmp_path / "cache")


@pytest.fixture
def served(cache: str) -> Iterator[LiveServer]:
    srv = LiveServer(create_app(SAMPLE, {"CACHE_DIR": cache}))
    yield srv
    srv.stop()


def open_page(page: Any, srv: LiveServer, hash_: str) -> None:
    page.goto(srv.url + hash_)
    page.wait_for_selector("body[data-ready='1']")


def badge_shows(page: Any, state: str, text: str) -> None:
    page.wait_for_function(f"(b => !b.hidden && b.dataset.state === '{state}' && b.textContent === '{text}')"
                           "(document.getElementById('hit-badge'))", timeout=20_000)


def iteration_is(page: Any, it: int) -> None:
    page.wait_for_function(f"document.getElementById('it-value').textContent === '{it}'", timeout=20_000)


def source_is(page: Any, source: str, count: int) -> None:
    page.wait_for_selector(f".wp-source[data-source='{source}']")
    page.wait_for_function(f"document.querySelectorAll('.wp-list li').length === {count}")


def test_single_with_no_click_then_an_edit_kept_across_a_restart_and_back_to_defaults(page: Any, served: LiveServer,
                                                                                     cache: str) -> None:
    hits = truth("single")
    recommended = len(_triage.watchpoints())
    page.add_init_script(BADGE_LOG)
    try:
        open_page(page, served, f"#/graph?dump=single&it=2&scope={BACKBONE}")
        badge_shows(page, "complete", str(hits[2]))
        assert page.evaluate("window.__badges").index("pending:…") < page.evaluate("window.__badges").index(f"complete:{hits[2]}")
        # the frozen fc2 layer and the saturated sigmoid carry the marks; fc1 has no hit in iteration 2
        page.wait_for_selector(f".gnode.has-hit[data-id='{BACKBONE}/fc2-Dense']")
        page.wait_for_selector(f".gnode.has-hit[data-id='{BACKBONE}/sigmoid-Sigmoid']")
        assert page.locator(f".gnode.has-hit[data-id='{BACKBONE}/fc1-Dense']").count() == 0
        assert page.locator(".graph-info .btn", has_text="Watch these").count() == 0    # nothing to offer
        assert not page.locator("#run-next-hit").is_disabled()
        page.click("#run-next-hit")
        iteration_is(page, 3)
        badge_shows(page, "complete", str(hits[3]))
        # the Watchpoints view: the triage's list, edited by removing one
        page.locator("#tabs a[data-view=watch]").click()
        source_is(page, "triage", recommended)
        assert page.locator(".wp-source").inner_text().startswith("from the triage: recommended")
        row = page.locator(".wp-list li", has=page.locator(".wp-text", has_text="activation_saturated_layer"))
        row.get_by_role("button", name="remove activation_saturated_layer").click()
        source_is(page, "user", recommended - 1)
        badge_shows(page, "complete", str(hits[3] - 1))     # one saturated sigmoid a step
    finally:
        page.goto("about:blank")   # the page polls: it must not talk to a server being stopped
        served.stop()
    again = LiveServer(create_app(SAMPLE, {"CACHE_DIR": cache}))
    try:
        open_page(page, again, "#/watch?dump=single&it=3")
        source_is(page, "user", recommended - 1)
        badge_shows(page, "complete", str(hits[3] - 1))
        page.click(".wp-defaults")
        source_is(page, "triage", recommended)
        badge_shows(page, "complete", str(hits[3]))
    finally:
        page.goto("about:blank")
        again.stop()


def test_torch_single_marks_its_hits_and_runs_to_the_next(page: Any, served: LiveServer) -> None:
    hits = truth("torch_single")
    try:
        open_page(page, served, "#/graph?dump=torch_single&it=2&scope=model")
        badge_shows(page, "complete", str(hits[2]))
        page.wait_for_selector(".gnode.has-hit[data-id='model/fc2-Linear']")
        page.wait_for_selector(".gnode.has-hit[data-id='model/sigmoid-0']")
        assert page.locator(".gnode.has-hit[data-id='model/fc1-Linear']").count() == 0
        page.click("#run-next-hit")
        iteration_is(page, 3)
        badge_shows(page, "complete", str(hits[3]))
    finally:
        page.goto("about:blank")


def test_a_triage_that_could_not_check_everything_is_never_badged_clean(page: Any, served: LiveServer) -> None:
    """torch_2d was recorded without activations: the activation watchpoints checked nothing, no hit."""
    try:
        open_page(page, served, "#/graph?dump=torch_2d&it=1")
        badge_shows(page, "incomplete", "?")
        with urllib.request.urlopen(f"{served.url}api/hits?dump=torch_2d&rank=0&iteration=1") as r:
            answer = json.load(r)
        n = sum(1 for c in answer["coverage"] if c["status"] == "unanswered")
        assert answer["total"] == 0 and n >= 1
        title = page.locator("#hit-badge").get_attribute("title")
        assert title.startswith(f"No hit, but {n} watchpoints checked nothing in iteration 1 of rank 0"), title
    finally:
        page.goto("about:blank")
