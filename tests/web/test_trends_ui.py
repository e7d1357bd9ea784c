"""Chromium drives the trends view on a real training run (tests/web/trendsrun.py: fc1's weight scaled 25x at
step 120, the one deep capture at iteration 118): the heatmap and a curve are drawn, a drag and the wheel
zoom one shared step range that every chart re-asks the server for, a heatmap row opens its curve, and a
click on the loss spike lists its ranked causes with a link that opens the deep capture in the graph view."""
from __future__ import annotations

import re
from typing import Any, Iterator

import pytest

import trendsrun
from liveserver import LiveServer
from tdbg_web import create_app

pytestmark = pytest.mark.browser
LAST = trendsrun.STEPS - 1


@pytest.fixture(scope="module")
def live(tmp_path_factory: Any) -> Iterator[LiveServer]:
    run = trendsrun.train(str(tmp_path_factory.mktemp("trends-ui") / "run"))
    srv = LiveServer(create_app(run.root, {"CACHE_DIR": str(tmp_path_factory.mktemp("trends-ui-cache"))}))
    yield srv
    srv.stop()


def _range(page: Any) -> tuple[int, int]:
    m = re.search(r"showing steps ([\d,]+)–([\d,]+)", page.locator(".trends-range").inner_text())
    assert m, page.locator(".trends-range").inner_text()
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


def _drag(page: Any, selector: str, a: float, b: float) -> None:
    box = page.locator(selector).bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * a, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * (a + b) / 2, y)
    page.mouse.move(box["x"] + box["width"] * b, y)
    page.mouse.up()


def _drawn(page: Any) -> int:
    """How many times the view has drawn its three charts (the page's data-drawn)."""
    return int(page.evaluate("document.querySelector('.page.trends').dataset.drawn || 0"))


def _wait_drawn(page: Any, n: int) -> None:
    page.wait_for_function(f"Number(document.querySelector('.page.trends').dataset.drawn || 0) >= {n}")


def _open(page: Any, live: LiveServer) -> list[str]:
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/series" in r.url else None)
    page.goto(live.url + "#/trends")
    page.wait_for_selector(".trends-heatmap canvas.trends-heat-canvas")
    page.wait_for_selector(".trends-curve svg path.curve-band")
    page.wait_for_selector(".trends-loss svg path.curve-band")
    _wait_drawn(page, 1)
    return asked


def test_heatmap_curve_and_zoom(page: Any, live: LiveServer) -> None:
    asked = _open(page, live)
    rows = page.locator(".trends-heat-row").all_inner_texts()
    assert rows == ["fc1.weight.grad", "fc1.bias.grad", "fc2.weight.grad", "fc2.bias.grad"]   # gradients, by layer
    painted = page.evaluate("""() => { const c = document.querySelector('canvas.trends-heat-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
        for (let i = 0; i < d.length; i += 4) if (!(d[i] === 241 && d[i + 1] === 243 && d[i + 2] === 245)) n++; return n / (d.length / 4); }""")
    assert painted > 0.9                      # every cell has a value: coloured, not the empty background
    assert _range(page) == (0, trendsrun.STEPS - 1)
    # the pointer reads the bucket under it
    box = page.locator(".trends-loss svg").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2)
    assert re.match(r"steps? [\d,]+", page.locator(".trends-loss .hover-text").text_content())
    # a click on a heatmap row shows that tensor's curve
    box = page.locator("canvas.trends-heat-canvas").bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * 2.5 / 4)
    page.wait_for_function("document.querySelector('.trends-curve-label').textContent.startsWith('fc2.weight.grad')")
    # drag across the curve: every chart shows the range, asked again of the server
    before, drawn = len(asked), _drawn(page)
    _drag(page, ".trends-curve svg", 0.55, 0.8)
    _wait_drawn(page, drawn + 1)
    page.wait_for_function(f"!document.querySelector('.trends-range').textContent.includes('steps 0–{LAST}')")
    lo, hi = _range(page)
    assert trendsrun.STEPS * 0.4 <= lo < hi <= trendsrun.STEPS * 0.9, (lo, hi)
    page.wait_for_function("document.querySelector('.trends-curve-label').textContent.includes('every step')")
    again = [u for u in asked[before:] if f"start={lo}" in u and f"stop={hi}" in u]
    assert {u.split("/series/")[1].split("?")[0] for u in again} == {"curve", "heatmap", "scalars"}
    # the wheel zooms out around the pointer; "Whole run" goes back
    box = page.locator(".trends-loss svg").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
    drawn = _drawn(page)
    page.mouse.wheel(0, 300)
    _wait_drawn(page, drawn + 1)
    page.wait_for_function(f"!document.querySelector('.trends-range').textContent.includes('steps {lo}–{hi}')")
    lo2, hi2 = _range(page)
    assert lo2 <= lo and hi2 >= hi and hi2 - lo2 > hi - lo
    drawn = _drawn(page)
    page.click(".trends-reset")
    page.wait_for_function(f"document.querySelector('.trends-range').textContent.includes('steps 0–{LAST}')")
    _wait_drawn(page, drawn + 1)      # the charts are drawn again (a busy machine: the range text comes first)
    # the wheel over the heatmap zooms in around the bucket under the pointer
    box = page.locator("canvas.trends-heat-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -300)
    page.wait_for_function(f"!document.querySelector('.trends-range').textContent.includes('steps 0–{LAST}')")
    lo3, hi3 = _range(page)
    assert 0 < lo3 < trendsrun.STEPS / 2 < hi3 < LAST and hi3 - lo3 < trendsrun.STEPS * 0.7


def test_refresh_asks_the_server_again(page: Any, live: LiveServer) -> None:
    """The hook a live update calls: refresh() re-reads the series and redraws the three charts."""
    asked = _open(page, live)
    page.wait_for_function("document.querySelector('.page.trends').dataset.drawn === '1'")
    before = len(asked)
    page.evaluate("import('/static/js/views/trends.js').then((m) => m.refresh())")
    page.wait_for_function("document.querySelector('.page.trends').dataset.drawn === '2'")
    assert any(u.split("?")[0].endswith("/series") for u in asked[before:])


def test_a_spike_lists_its_causes_and_opens_the_deep_capture(page: Any, live: LiveServer) -> None:
    _open(page, live)
    assert "1 loss spike found" in page.locator(".trends-loss").inner_text()
    marker = page.locator(f".trends-loss .spike-marker[data-step='{trendsrun.PLANT}']")
    marker.click()
    page.wait_for_selector(".spike-causes .cause-table .cause-row")
    shown = [r.get_attribute("data-tensor") for r in page.locator(".cause-table .cause-row").all()]
    causes = page.evaluate("fetch('/api/ranks/0/series/spikes').then((r) => r.json())")["spikes"][0]["causes"]
    assert shown == [c["tensor"] for c in causes] and "fc1.weight" in shown     # the server's ranking, in order
    row = page.locator(".cause-table .cause-row[data-tensor='fc1.weight']")
    assert f"{trendsrun.PLANT}" in row.inner_text() and "fc1" in row.inner_text() and "trendsrun.py:" in row.inner_text()
    # scaled before the forward: marked as changed outside the optimizer, the only causes so marked
    assert row.locator(".outside-optimizer").inner_text() == "outside the optimizer"
    assert page.locator(".cause-table .outside-optimizer").count() == 2
    row.click()                                  # its curve below
    page.wait_for_function("document.querySelector('.trends-curve-label').textContent.startsWith('fc1.weight (')")
    link = page.locator(".spike-causes .deep-link")
    assert f"iteration {trendsrun.DEEP}" in link.inner_text()
    link.click()
    page.wait_for_function(f"location.hash.startsWith('#/graph') && location.hash.includes('it={trendsrun.DEEP}') && location.hash.includes('node=')")
    page.wait_for_function(f"document.getElementById('it-value').textContent === '{trendsrun.DEEP}'")
    page.wait_for_selector(".stat-tile")        # the graph view's inspector shows the cause's node


def test_a_dump_without_a_series_says_so(page: Any, live_sample: LiveServer) -> None:
    page.goto(live_sample.url + "#/trends?dump=single")
    note = page.wait_for_selector(".trends-none")
    assert "rank 0 records no per-step series" in note.inner_text()
    assert page.locator("#tabs a.active").inner_text() == "Trends"
