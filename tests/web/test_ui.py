"""The single page in a real headless Chromium against dumps_sample/, served live on 127.0.0.1.

Each scenario saves screenshots of the views it passes through under tests/web/screenshots/."""
from __future__ import annotations

import os
import re
from typing import Any

import pytest

pytestmark = pytest.mark.browser
SCREENSHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "screenshots")

FC1 = "Default/network-WithLossCell/_backbone-Net/fc1-Dense"
MATMUL = f"{FC1}/MatMul-op0"


def shot(page: Any, name: str) -> None:
    """Save a screenshot under tests/web/screenshots/ (ignored by git)."""
    os.makedirs(SCREENSHOTS, exist_ok=True)
    page.screenshot(path=os.path.join(SCREENSHOTS, f"{name}.png"))


def open_view(page: Any, live: Any, hash_: str) -> None:
    page.goto(live.url + hash_)
    page.wait_for_selector("body[data-ready='1']")


def wait_graph(page: Any) -> None:
    page.wait_for_selector(".gnode")
    page.wait_for_function("document.querySelector('.graph-overlay').hidden")


def test_overview_of_the_sample(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/overview?dump=single")
    page.wait_for_selector(".metrics")
    assert page.locator(".ov-head h1").inner_text() == "single"
    assert page.locator(".dump-item").count() == 2          # the folder holds two dumps: the user chooses
    assert "2.10.0" in page.locator(".metrics").inner_text()
    assert page.locator(".kind-row").count() >= 6
    shot(page, "overview")
    page.locator(".dump-item", has_text="dp2").click()
    page.wait_for_function("location.hash.includes('dump=dp2')")
    page.wait_for_function("document.querySelector('.ov-head h1') && document.querySelector('.ov-head h1').textContent === 'dp2'")


def test_graph_opens_scope_by_scope(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/graph?dump=single&it=2")
    wait_graph(page)
    ids = page.eval_on_selector_all(".gnode", "els => els.map(e => e.dataset.id)")
    assert {"Default", "Gradients"} <= set(ids) and any(re.fullmatch(r"Parameter\[\d+\]", i) for i in ids)
    assert page.locator(".graph-legend").inner_text().count("weight") >= 1
    shot(page, "graph-root")
    page.locator(".gnode[data-id='Default']").click()
    page.wait_for_function("location.hash.includes('scope=Default')")
    page.wait_for_selector(".gnode[data-id='Default/network-WithLossCell']")
    assert page.locator(".crumb.current").inner_text() == "Default"
    page.locator("a.crumb", has_text="graph 0").click()
    page.wait_for_selector(".gnode[data-id='Gradients']")


def test_search_file_line_highlights_its_nodes(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/graph?dump=single&it=2")
    wait_graph(page)
    page.fill(".search-input", "make_sample.py:200")
    page.wait_for_selector(".sr-line")
    assert "3 forward" in page.locator(".sr-line").inner_text()
    page.press(".search-input", "Enter")
    page.wait_for_function("location.hash.includes('line=make_sample.py:200')")
    page.wait_for_selector(f".gnode.hl-forward[data-id='{MATMUL}']")
    assert page.locator(".gnode.hl-forward").count() == 2          # MatMul-op0 and BiasAdd-op0 of fc1
    assert page.locator(".line-chip").is_visible()
    page.wait_for_selector(".insp-name")
    shot(page, "graph-code-line")
    # one level up, the scopes holding those nodes carry the mark
    page.locator("a.crumb", has_text="_backbone-Net").click()
    page.wait_for_selector(f".gnode.hl-forward[data-id='{FC1}']")
    assert page.locator(".gnode.hl-forward").count() == 2          # fc1-Dense and sigmoid-Sigmoid


def test_clicking_a_node_shows_its_stack_and_statistics(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, f"#/graph?dump=single&it=2&scope={FC1}")
    wait_graph(page)
    page.locator(f".gnode[data-id='{MATMUL}']").click()
    page.wait_for_function("document.querySelector('.insp-name') && document.querySelector('.insp-name').textContent === 'MatMul-op0'")
    page.wait_for_selector(".stat-tile[data-stat='max'] .st-value")
    frames = page.locator(".sec-stack .frame")
    assert "make_sample.py" in frames.first.inner_text() and "self.sigmoid(self.fc1(x))" in frames.first.inner_text()
    assert page.locator(".sec-stack .frame.fw").count() == 0       # framework frames hidden behind a toggle
    page.locator(".sec-stack button", has_text="framework frame").click()
    assert page.locator(".sec-stack .frame.fw").count() > 0
    assert page.locator(".gnode.selected").count() == 1
    assert page.locator(".stat-tile[data-stat='max'] .st-value").inner_text() not in ("", "—")
    shot(page, "graph-node")
    # graph -> code: a frame opens its line and the other nodes it made
    page.locator(".sec-stack .frame").first.click()
    page.wait_for_function("location.hash.startsWith('#/code')")
    page.wait_for_selector(".src-line.selected[data-line='200']")
    page.wait_for_selector(".line-nodes .node-list li")
    assert page.locator(".line-nodes .node-list li").count() == 7


def test_moving_the_iteration_slider_changes_the_values(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, f"#/graph?dump=single&it=2&scope={FC1}&node={MATMUL}")
    tile = ".stat-tile[data-stat='max'] .st-value"
    page.wait_for_selector(tile)
    before = page.locator(tile).inner_text()
    page.locator("#it-slider").fill("5")
    page.wait_for_function("document.getElementById('it-value').textContent === '5'")
    page.wait_for_function(f"(b) => {{ const e = document.querySelector(\"{tile}\"); return e && e.textContent !== b; }}", arg=before)
    assert "it=5" in page.evaluate("location.hash")
    page.click("#it-next")
    page.wait_for_function("document.getElementById('it-value').textContent === '6'")
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("document.getElementById('it-value').textContent === '5'")


def test_tensor_view_table_heatmap_history_and_compare(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/tensor?dump=single&it=3&node=conv1.weight")
    page.wait_for_selector(".stats-table")
    header = page.locator(".stats-table thead").inner_text()
    assert "CURRENT" in header.upper() and "PREVIOUS (IT 2)" in header.upper() and "DIFFERENCE" in header.upper()
    page.wait_for_selector(".values-table")
    assert page.locator(".values-table tbody tr").count() == 3     # conv1.weight [2, 1, 3, 3] -> [0, 0, :, :]
    page.wait_for_selector(".tensor-grid svg.chart path")
    shot(page, "tensor")
    page.fill(".slice-input", "[1, 0, :, 0:2]")
    page.press(".slice-input", "Enter")
    page.wait_for_function("document.querySelectorAll('.values-table thead th').length === 3")
    page.locator(".seg button", has_text="Difference").click()
    page.wait_for_function("document.querySelector('.values-info') && document.querySelector('.values-info').textContent.includes('− 2')")
    page.locator(".seg button", has_text="Heat map").click()
    page.wait_for_selector("canvas.heatmap")
    page.fill(".slice-input", "")
    page.press(".slice-input", "Enter")
    page.locator(".seg button", has_text="Current").click()
    page.wait_for_selector("canvas.heatmap")
    shot(page, "tensor-heatmap")
    with page.expect_download() as dl:
        page.locator("a", has_text="Download .npy").click()
    assert dl.value.suggested_filename.endswith(".npy")


def test_code_view_lists_lines_and_their_nodes(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/code?dump=single&it=2")
    page.wait_for_selector(".file-item.active")
    assert page.locator(".file-item").count() == 1                # user code only; framework behind the toggle
    page.fill(".loc-form input", "make_sample.py:201")
    page.click(".loc-form button")
    page.wait_for_selector(".src-line.selected[data-line='201']")
    page.wait_for_selector(".line-nodes .chip.fwd")
    assert page.locator(".src-line.has-nodes").count() == 6
    page.locator(".line-nodes .node-list li").first.click()
    page.wait_for_selector(".code-inspector .insp-name")
    shot(page, "code")
    page.locator(".toggle", has_text="Framework files").click()
    page.wait_for_function("document.querySelectorAll('.file-item').length > 1")
    page.locator(".line-nodes button", has_text="Show in graph").click()
    page.wait_for_function("location.hash.startsWith('#/graph')")
    page.wait_for_selector(".gnode.hl-forward")


def test_watchpoint_from_the_registry_form_and_its_hits(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/watch?dump=single&it=2")
    try:
        page.wait_for_selector(".cond-select")
        page.select_option(".cond-select", "weight_not_changed")
        assert page.locator(".param [data-param='rtol']").count() == 1   # the form is generated from the registry
        page.click(".wp-form button[type=submit]")
        page.wait_for_selector(".wp-list li")
        page.wait_for_selector(".hit-group")
        assert "weight_not_changed" in page.locator(".hit-group summary").first.inner_text()
        page.wait_for_function("!document.getElementById('hit-badge').hidden")
        page.locator(".seg button", has_text="All iterations").click()
        page.wait_for_function("document.querySelector('.hits-summary').textContent.includes('8 iterations checked')")
        shot(page, "watchpoints")
        page.locator(".hit-table tr.clickable").first.click()
        page.wait_for_function("location.hash.startsWith('#/graph')")
        page.wait_for_selector(".gnode.has-hit")
        page.wait_for_selector(".sec-hits .hit-row")
        shot(page, "graph-hits")
        # run to next hit: stops at the next iteration with a hit
        it = int(page.locator("#it-value").inner_text())
        page.click("#run-next-hit")
        page.wait_for_function(f"document.getElementById('it-value').textContent === '{it + 1}'")
    finally:
        page.request.delete(live_sample.url + "api/watchpoints?dump=single")


def test_switching_rank(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/ranks?dump=dp2")
    page.wait_for_selector(".tbl tbody tr")
    assert page.locator(".tbl tbody tr").count() == 2
    page.select_option("#rank-select", "1")
    page.wait_for_function("location.hash.includes('rank=1')")
    page.wait_for_function("[...document.querySelectorAll('.tbl tbody tr.sel')].some(r => r.textContent.includes('rank 1'))")
    page.locator(".compare-card button", has_text="Compare").click()
    page.wait_for_function("!document.querySelector('.compare-card .card-body').textContent.includes('Comparing')")
    body = page.locator(".compare-card .card-body").inner_text()
    assert "No divergence" in body or "Not available" in body
    shot(page, "ranks")
    page.locator("#tabs a[data-view='graph']").click()
    page.wait_for_function("location.hash.startsWith('#/graph') && location.hash.includes('rank=1')")
    wait_graph(page)
    page.fill(".search-input", "AllReduce-op0")
    page.wait_for_selector(".sr-item")
    page.press(".search-input", "Enter")
    page.wait_for_selector(".stat-tile[data-stat='max'] .st-value")
    assert page.locator("#rank-select").input_value() == "1"
    shot(page, "graph-rank1")


def test_export_downloads_the_scope_level(page: Any, live_sample: Any) -> None:
    import shutil

    optimizer = "Default/optimizer-Momentum"
    open_view(page, live_sample, f"#/graph?dump=single&it=2&scope={optimizer}")
    wait_graph(page)
    shown = set(page.eval_on_selector_all(".gnode", "els => els.map(e => e.dataset.id)"))
    with page.expect_download() as dl:
        page.locator(".export-btn", has_text="Export").click()
    assert dl.value.suggested_filename == "rank0_graph0_optimizer-Momentum.dot"
    text = open(dl.value.path(), encoding="utf-8").read()
    assert text.startswith("digraph") and all(f'"{i}"' in text for i in shown)
    if shutil.which("dot"):     # the server has Graphviz: SVG is offered and drawn
        page.wait_for_selector(".export-format option[value='svg']", state="attached")
        page.select_option(".export-format", "svg")
        shot(page, "graph-export")
        with page.expect_download() as dl:
            page.locator(".export-btn").click()
        assert dl.value.suggested_filename == "rank0_graph0_optimizer-Momentum.svg"
        assert "<svg" in open(dl.value.path(), encoding="utf-8").read()
