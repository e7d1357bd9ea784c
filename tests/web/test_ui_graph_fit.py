"""The graph view at 1440x900 in Chromium on a copy of dumps_sample/single (a MindSpore run, 6 scope levels
deep, triage findings): the crumbs of a deep scope show the scope whole and still navigate, Fit keeps every
drawn node in view, and with every watchpoint removed the info line offers the triage's back, whose hits then
show on the graph and in the top bar."""
from __future__ import annotations

import json
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest

from liveserver import LiveServer

SAMPLE = Path(__file__).resolve().parents[2] / "dumps_sample"
DEEP = "Gradients/Default/network-WithLossCell/_backbone-Net/sigmoid-Sigmoid/Grad_Sigmoid"


@pytest.fixture(scope="module")
def single(tmp_path_factory: Any) -> Iterator[LiveServer]:
    """A copy of the sample (the triage test adds watchpoints) served with a cache of its own."""
    if not (SAMPLE / "single").is_dir():
        pytest.skip("dumps_sample/ is not present")
    from tdbg_web import create_app
    dump = tmp_path_factory.mktemp("dump") / "single"
    shutil.copytree(SAMPLE / "single", dump)
    srv = LiveServer(create_app(str(dump), {"CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}))
    yield srv
    srv.stop()


def _open_graph(page: Any, srv: LiveServer, query: str) -> None:
    """The graph with the triage's watchpoints known and the server's live counts of their hits up to date:
    either changing under the page would redraw it once (closing a crumb menu)."""
    _triage(srv)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto("about:blank")         # a goto that only changes the hash would not reload
    urllib.request.urlopen(f"{srv.url}api/live?dump=single", timeout=60).close()   # no page holds the dump's lock now
    page.goto(f"{srv.url}#/graph?{query}")
    page.wait_for_selector("body[data-ready='1']")
    page.wait_for_selector(".gnode")
    page.wait_for_function("document.querySelector('.graph-overlay').hidden")
    # the crumbs are fitted again when the toolbar's controls grow after the first drawing: read them settled
    page.wait_for_function("""() => { const h = (document.querySelector('.crumbs') || {}).innerHTML;
      const same = h !== undefined && h === window.__crumbsSeen; window.__crumbsSeen = h; return same; }""", polling=150)


def _crumbs(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("""() => [...document.querySelectorAll('.crumbs .crumb')].map((c) => ({
      text: c.textContent, title: c.title, tag: c.tagName, cls: c.className,
      cut: c.scrollWidth > c.clientWidth, right: c.getBoundingClientRect().right,
      box: document.querySelector('.crumbs').getBoundingClientRect().right }))""")


def _scope_in_hash(page: Any) -> str:
    return page.evaluate("new URLSearchParams(location.hash.split('?')[1] || '').get('scope') || ''")


def test_a_deep_scope_shows_its_crumb_and_its_parent_whole(page: Any, single: LiveServer) -> None:
    _open_graph(page, single, f"scope={quote(DEEP)}")
    crumbs = _crumbs(page)
    last, parent = crumbs[-1], crumbs[-2]
    assert last["text"] == DEEP.split("/")[-1] and not last["cut"]
    assert last["right"] <= last["box"] + 0.5                       # not clipped by the row either
    assert parent["text"] == DEEP.split("/")[-2] and not parent["cut"]
    assert last["title"] == DEEP
    levels = DEEP.split("/")
    prefixes = {"/".join(levels[:i]) for i in range(1, len(levels) + 1)}
    for c in crumbs[1:]:                                            # every crumb's title is a full path
        assert c["title"] in prefixes, c


def test_every_crumb_navigates_to_its_level(page: Any, single: LiveServer) -> None:
    _open_graph(page, single, f"scope={quote(DEEP)}")
    count = len(_crumbs(page))
    for i in range(count - 1):
        _open_graph(page, single, f"scope={quote(DEEP)}")
        c = _crumbs(page)[i]
        want = "" if i == 0 else c["title"]
        page.locator(".crumbs .crumb").nth(i).click()
        if "folded" in c["cls"]:                                    # '…': its menu's deepest level
            page.locator(".crumb-menu .crumb-menu-item").last.click()
        page.wait_for_function("(s) => (new URLSearchParams(location.hash.split('?')[1] || '').get('scope') || '') === s", arg=want)
        assert _scope_in_hash(page) == want


def test_a_narrow_row_folds_the_middle_never_the_scope(page: Any, single: LiveServer) -> None:
    _open_graph(page, single, f"scope={quote(DEEP)}")
    page.evaluate("document.querySelector('.crumbs').style.maxWidth = '250px'")
    page.set_viewport_size({"width": 1439, "height": 900})           # a resize redraws the crumbs
    page.wait_for_function("document.querySelector('.crumbs').classList.contains('tight')")
    crumbs = _crumbs(page)
    assert crumbs[-1]["text"] == "Grad_Sigmoid" and not crumbs[-1]["cut"]
    assert crumbs[-1]["right"] <= crumbs[-1]["box"] + 0.5
    folded = next(c for c in crumbs if "folded" in c["cls"])
    assert folded["text"] == "…" and DEEP.startswith(folded["title"] + "/")
    # '…' lists the levels it folds, outermost first, each opening its level
    page.locator(".crumbs .crumb.folded").click()
    items = page.locator(".crumb-menu .crumb-menu-item")
    items.first.wait_for()
    titles = [items.nth(i).get_attribute("title") for i in range(items.count())]
    levels = DEEP.split("/")
    assert titles == ["/".join(levels[:i]) for i in range(1, len(titles) + 1)]
    assert titles[-1] == folded["title"]
    page.keyboard.press("Escape")
    assert page.locator(".crumb-menu").count() == 0
    page.locator(".crumbs .crumb.folded").click()                    # a click elsewhere closes it too
    page.locator(".crumb-menu").wait_for()
    page.locator(".inspector").click()
    assert page.locator(".crumb-menu").count() == 0
    page.locator(".crumbs .crumb.folded").click()
    page.locator(".crumb-menu .crumb-menu-item").first.click()
    page.wait_for_function("(s) => new URLSearchParams(location.hash.split('?')[1]).get('scope') === s", arg=titles[0])
    assert page.locator(".crumb-menu").count() == 0


OUTSIDE = """() => {
  const v = document.querySelector('.graph-svg').getBoundingClientRect();
  return [...document.querySelectorAll('.gnode')].map((g) => [g.dataset.id, g.getBoundingClientRect()])
    .filter(([, b]) => b.left < v.left || b.top < v.top || b.right > v.right || b.bottom > v.bottom)
    .map(([id, b]) => `${id}: ${b.left.toFixed(1)}-${b.right.toFixed(1)} x ${b.top.toFixed(1)}-${b.bottom.toFixed(1)} in ${v.width}`);
}"""

# The layout's width in its own pixels: the bodies' span over the viewport's scale.
LAYOUT_WIDTH = """() => {
  const k = parseFloat(/scale\\(([^)]+)\\)/.exec(document.querySelector('.viewport').getAttribute('transform'))[1]);
  const bs = [...document.querySelectorAll('.gnode .body')].map((b) => b.getBoundingClientRect());
  return (Math.max(...bs.map((b) => b.right)) - Math.min(...bs.map((b) => b.left))) / k;
}"""


def _fit_at(page: Any, width: int) -> list[str]:
    page.set_viewport_size({"width": width, "height": 900})
    page.mouse.move(width // 3, 500)
    page.mouse.wheel(0, 400)                                         # move away, then Fit
    page.get_by_role("button", name="Fit").click()
    return page.evaluate(OUTSIDE)


def test_fit_keeps_every_drawn_node_inside_the_view(page: Any, live_sample: LiveServer) -> None:
    _open_graph(page, live_sample, "dump=torch_2d")
    groups = page.locator('.gnode[data-type="group"]')
    assert groups.count() >= 2 and page.locator(".gnode .stack2").count() == groups.count()   # stacks drawn
    assert _fit_at(page, 1440) == []
    # A window just wide enough for the drawing at the smallest fit scale (0.8), with 30 px to spare:
    # the fit centres it, stacks and badges included, rather than starting it 40 px in and cutting it.
    svg_at_1440 = page.evaluate("document.querySelector('.graph-svg').getBoundingClientRect().width")
    side = 1440 - svg_at_1440                                       # the inspector's width beside the graph
    width = int(side + page.evaluate(LAYOUT_WIDTH) * 0.8 + 30)
    assert _fit_at(page, width) == []
    svg = page.evaluate("document.querySelector('.graph-svg').getBoundingClientRect().width")
    assert svg == pytest.approx(width - side, abs=1)                 # the case meant: the svg is that narrow


def _triage(srv: LiveServer) -> dict[str, Any]:
    for _ in range(600):
        with urllib.request.urlopen(f"{srv.url}api/triage") as r:
            t = json.load(r)
        if t["state"] == "done":
            return t["result"]
        time.sleep(0.2)
    raise AssertionError("the triage did not finish")


def test_the_info_line_offers_the_triage_and_its_hits_show(page: Any, single: LiveServer) -> None:
    """The user removed every watchpoint (the triage's are the default): the graph offers them back."""
    req = urllib.request.Request(f"{single.url}api/watchpoints", method="DELETE")
    urllib.request.urlopen(req, timeout=60).close()
    with urllib.request.urlopen(f"{single.url}api/watchpoints") as r:
        listed = json.load(r)
        assert listed["total"] == 0 and listed["source"] == {"from": "user"}
    t = _triage(single)
    assert t["findings"]
    it = t["findings"][0]["first"]["iteration"]
    _open_graph(page, single, f"it={it}")
    assert page.locator(".gnode .hit-badge").count() == 0
    offer = page.locator(".triage-offer")
    offer.wait_for(state="visible")
    n = len(t["findings"])
    assert f"No watchpoint set · triage found {n} problem" in offer.text_content()
    offer.get_by_role("button", name="Watch these").click()
    page.wait_for_selector(".gnode .hit-badge")                      # no reload: the graph redrew with the hits
    page.wait_for_selector("#hit-badge:not([hidden])")
    assert page.locator(".triage-offer").is_hidden()
    with urllib.request.urlopen(f"{single.url}api/watchpoints") as r:
        listed = json.load(r)
        assert listed["total"] > 0 and listed["source"]["from"] == "triage"
