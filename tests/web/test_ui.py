"""The single page in a real headless Chromium against dumps_sample/, served live on 127.0.0.1.

Each scenario saves screenshots of the views it passes through under tests/web/screenshots/."""
from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest

pytestmark = pytest.mark.browser
SCREENSHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "screenshots")

FC1 = "Default/network-WithLossCell/_backbone-Net/fc1-Dense"
MATMUL = f"{FC1}/MatMul-op0"

# (not conftest's: another tests/ folder's conftest may shadow the module name)
SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")


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
    # the folder holds two MindSpore dumps (and the msprobe samples under msprobe/, the PyTorch ones torch_*): the user chooses
    assert page.evaluate("[...document.querySelectorAll('.dump-item b')]"
                         ".filter(b => !b.textContent.startsWith('msprobe/') && !b.textContent.startsWith('torch_')).length") == 2
    assert "2.10.0" in page.locator(".metrics").inner_text()
    assert page.locator(".kind-row").count() >= 6
    shot(page, "overview")
    page.locator(".dump-item", has_text=re.compile(r"^dp2")).click()
    page.wait_for_function("location.hash.includes('dump=dp2')")
    page.wait_for_function("document.querySelector('.ov-head h1') && document.querySelector('.ov-head h1').textContent === 'dp2'")


def test_graph_opens_scope_by_scope(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/graph?dump=single&it=2")
    wait_graph(page)
    ids = page.eval_on_selector_all(".gnode", "els => els.map(e => e.dataset.id)")
    assert {"Default", "Gradients"} <= set(ids)
    assert not any(re.fullmatch(r"Parameter\[\d+\]", i) for i in ids)     # weights are drawn beside their readers
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
    page.locator(f".gnode[data-id='{MATMUL}'] .n-title").click()          # its rows below open its weights
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


def test_tensor_view_at_the_first_iteration_says_there_is_nothing_to_compare_with(page: Any, live_sample: Any) -> None:
    """An activation at iteration 0 has no earlier value: the view says so in words (no path, no status)."""
    from urllib.parse import quote
    open_view(page, live_sample, f"#/tensor?dump=single&it=0&node={quote(MATMUL, safe='')}")
    page.wait_for_selector(".stats-table")
    page.wait_for_function("document.querySelector('.stats-table').parentElement.textContent.includes('no earlier value')")
    text = page.locator(".stats-table").locator("xpath=..").inner_text()
    assert "has no earlier value to compare with" in text and "rank_0" not in text and "404" not in text
    assert SAMPLE not in page.locator("main").inner_text()


@pytest.mark.parametrize("dump,node,it", [("single", MATMUL, 0), ("msprobe/statistics_mix", "block.0.weight", 1)])
def test_a_tensor_view_asks_nothing_it_knows_is_not_there(page: Any, live_sample: Any, dump: str, node: str, it: int) -> None:
    """No earlier value (an activation at iteration 0), no values (a statistics dump): the view says so and asks
    the server nothing that answers 4xx (Chromium logs each such answer as a console error)."""
    from urllib.parse import quote
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    open_view(page, live_sample, f"#/tensor?dump={dump}&it={it}&node={quote(node, safe='')}")
    page.wait_for_selector(".stats-table")
    page.wait_for_selector(".values-body .no-earlier, .values-body .no-values, .values-body table, .values-body .scalar")
    page.wait_for_timeout(300)      # what the view asks after drawing (history, ranks) is in too
    if dump.startswith("msprobe"):
        assert "statistics only" in page.locator(".values-body").inner_text()
    else:       # the values of the previous iteration, asked for: said in words too
        page.locator(".seg button", has_text="Previous").click()
        page.wait_for_selector(".values-body .no-earlier")
        assert "has no earlier value to compare with" in page.locator(".values-body").inner_text()
    assert failed == []


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
    assert page.locator(".src-line.has-nodes:not(.defines)").count() == 6
    page.locator(".line-nodes .node-list li").first.click()
    page.wait_for_selector(".code-inspector .insp-name")
    shot(page, "code")
    page.locator(".toggle", has_text="Framework files").click()
    page.wait_for_function("document.querySelectorAll('.file-item').length > 1")
    page.locator(".line-nodes button", has_text="Show in graph").click()
    page.wait_for_function("location.hash.startsWith('#/graph')")
    page.wait_for_selector(".gnode.hl-forward")
    # a line of __init__ that defines a layer: marked, and its click lists the layer's nodes
    open_view(page, live_sample, "#/code?dump=single&it=2")
    page.locator(".src-line.defines[data-line='192']").click()
    page.wait_for_selector(".line-nodes .chip.def")
    assert "fc2.weight" in page.locator(".line-nodes").inner_text()
    shot(page, "code-layer-definition")
    # an address that names a line by its file's name and no file= (a finding's, the README's) opens it chosen
    open_view(page, live_sample, "#/code?dump=single&it=2&line=make_sample.py:200")
    page.wait_for_selector(".src-line.selected[data-line='200']")
    page.wait_for_selector(".line-nodes .chip.fwd")


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
    finally:     # the triage's watchpoints again, as the other tests of the shared server expect
        page.request.post(live_sample.url + "api/watchpoints/defaults?dump=single")


def test_switching_rank(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/ranks?dump=dp2")
    page.wait_for_selector(".ranks-card .rank-row[data-rank]")
    assert page.locator(".ranks-card .rank-row[data-rank]").count() == 2
    page.select_option("#rank-select", "1")
    page.wait_for_function("location.hash.includes('rank=1')")
    page.wait_for_function("[...document.querySelectorAll('.ranks-card .rank-row.sel')].some(r => r.textContent.includes('rank 1'))")
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


# -- triage, chooser, persistence, roll-up, replay (issue 10) ---------------------------------------------
BACKBONE = "Default/network-WithLossCell/_backbone-Net"
SIZES = ((1440, 900), (1024, 700))


def _serve(path: str, cache: str) -> Any:
    from liveserver import LiveServer
    from tdbg_web import create_app

    return LiveServer(create_app(path, {"CACHE_DIR": cache}))


def _timed_triage(page: Any, url: str) -> float:
    """Seconds from navigation to the triage page showing its findings (of the whole dump: a dump written
    in the last seconds may be a job's that goes on, and is triaged without its newest iteration first)."""
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function("""() => document.querySelector(".triage[data-ready='1']")
        && !document.querySelector('.triage .left-out')""", timeout=60_000)
    return time.perf_counter() - t0


def test_triage_says_once_what_did_not_apply(page: Any, tmp_path: Any) -> None:
    """A healthy mindcv ResNet-18: nothing fired, and the zero-initialised betas' update ratio is one line."""
    dump = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "mindcv", "resnet_healthy")
    srv = _serve(dump, str(tmp_path / "cache"))
    try:
        _timed_triage(page, srv.url + "#/triage")
        card = page.locator(".card.findings")
        assert "Nothing fired" in card.inner_text()
        lines = page.locator(".card.findings .skip")
        assert lines.count() == 1
        text = lines.first.inner_text()
        assert text.startswith("weight_change_too_large skipped") and "zero-initialised" in text
        shot(page, "triage-skipped")
    finally:
        page.goto("about:blank")
        srv.stop()


def test_triage_says_what_a_parameters_level_recording_cannot_answer(page: Any, tmp_path: Any) -> None:
    """A run recorded at level "parameters" (a real Recorder over an MLP): the triage card says which
    iterations hold only weights, gradients, state and the loss, and what their watchpoints cannot answer."""
    torch = pytest.importorskip("torch")
    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dump = str(tmp_path / "dump")
    with Recorder(dump, model, opt, save="statistics", level="parameters") as rec:
        for _ in range(3):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    srv = _serve(dump, str(tmp_path / "cache"))
    try:
        _timed_triage(page, srv.url + "#/triage")
        note = page.locator(".card.findings .level-note")
        assert note.count() == 1
        text = note.first.inner_text()
        assert text.startswith('Iterations 0-2 were recorded at level "parameters"')
        assert "activation watchpoints have nothing to check" in text
        # nothing fired, but the activation watchpoints checked nothing: never the green box
        assert page.locator(".card.findings .ok-box").count() == 0
        box = page.locator(".card.findings .incomplete-box")
        assert "not everything could be checked" in box.inner_text()
        assert {t.split(":")[0] for t in box.locator(".unanswered").all_inner_texts()} == {
            "activation_saturated_layer", "activation_dead_layer"}
        shot(page, "triage-incomplete")
    finally:
        page.goto("about:blank")
        srv.stop()


def test_triage_says_a_series_spike_above_any_green(page: Any, tmp_path: Any) -> None:
    """No iteration recorded, a loss spike in the per-step series: the findings card says the spike (never the
    green "Nothing fired"), and the dump's health is "problems"."""
    pytest.importorskip("torch")
    from triage_runs import SPIKE_AT, record_spiked_series

    dump = str(tmp_path / "dump")
    record_spiked_series(dump)
    srv = _serve(dump, str(tmp_path / "cache"))
    try:
        _timed_triage(page, srv.url + "#/triage")
        card = page.locator(".card.findings")
        assert card.locator(".ok-box").count() == 0
        spike = card.locator(".other-evidence .series-findings").inner_text()
        assert "loss spike" in spike and f"rank 0 step {SPIKE_AT}" in spike
        assert "No iteration was dumped" in card.inner_text()
        # no loss node in any iteration: the loss card draws the series' loss, never "no loss"
        loss = page.locator(".card.loss-card")
        assert "the per-step series" in loss.inner_text() and loss.locator("svg").count() == 1
        shot(page, "triage-series-spike")
    finally:
        page.goto("about:blank")
        srv.stop()


def test_triage_is_the_landing_page_cold_then_warm(page: Any, tmp_path: Any) -> None:
    cache = str(tmp_path / "cache")
    srv = _serve(SAMPLE, cache)
    try:
        cold = _timed_triage(page, srv.url + "#/triage?dump=single")
    finally:
        page.goto("about:blank")   # the page polls: it must not talk to a server being stopped
        srv.stop()
    srv = _serve(SAMPLE, cache)     # a new server on the same cache: the stored triage
    try:
        warm = _timed_triage(page, srv.url + "#/?dump=single")
        assert page.locator("#tabs a.active").inner_text() == "Triage"
        found = page.eval_on_selector_all(".finding", "els => els.map(e => e.dataset.watchpoint)")
        # both planted problems: the frozen fc2 layer and the saturated sigmoid
        assert {"weight_not_changed", "activation_saturated_layer"} <= set(found)
        frozen = page.locator(".finding[data-watchpoint='weight_not_changed']").inner_text()
        assert "fc2" in frozen and "make_sample.py:201" in frozen and "not updated" in frozen
        assert "make_sample.py:200" in page.locator(".finding[data-watchpoint='activation_saturated_layer']").inner_text()
        assert page.locator(".loss-card svg.chart path").count() >= 1
        assert "One rank" in page.locator(".agreement-card").inner_text()
        assert "None" in page.locator(".warnings-card").inner_text()
        for w, h in SIZES:
            page.set_viewport_size({"width": w, "height": h})
            shot(page, f"triage-{w}x{h}")
        # the first occurrence opens its node in the graph
        page.locator(".finding[data-watchpoint='weight_not_changed'] .f-node").click()
        page.wait_for_function("location.hash.startsWith('#/graph') && location.hash.includes('node=fc2.bias')")
        # a multi-rank dump: the ranks' agreement and one loss line per rank
        page.goto(srv.url + "#/triage?dump=dp2")
        page.wait_for_selector(".triage[data-ready='1']", timeout=60_000)
        assert "agree" in page.locator(".agreement-card").inner_text()
        assert page.locator(".loss-card .legend span").count() == 2
        shot(page, "triage-dp2")
    finally:
        page.goto("about:blank")   # the page polls: it must not talk to a server being stopped
        srv.stop()
    print(f"\ntriage of dumps_sample/single in Chromium: cold {cold * 1000:.0f} ms, warm {warm * 1000:.0f} ms")
    assert warm < 10


def test_several_dumps_open_on_a_chooser_with_their_health(page: Any, live_sample: Any) -> None:
    page.goto(live_sample.url)
    page.wait_for_selector("body[data-ready='1']")
    assert page.evaluate("location.hash").startswith("#/dumps")
    assert page.locator(".dump-item:not([data-dump^='msprobe/']):not([data-dump^='torch_'])").count() == 2
    page.wait_for_function("[...document.querySelectorAll('.dump-item .dump-health')].every(e => !e.textContent.includes('checking'))",
                           timeout=60_000)
    assert "problem" in page.locator(".dump-item[data-dump='single']").inner_text()
    for w, h in SIZES:
        page.set_viewport_size({"width": w, "height": h})
        shot(page, f"chooser-{w}x{h}")
    page.locator(".dump-item[data-dump='single']").click()
    page.wait_for_selector(".triage[data-ready='1']", timeout=60_000)


def test_watchpoints_survive_a_restart_and_a_preset_added_twice_is_not_doubled(page: Any, tmp_path: Any) -> None:
    cache = str(tmp_path / "cache")
    srv = _serve(SAMPLE, cache)
    try:
        open_view(page, srv, "#/watch?dump=single&it=2")
        for _ in range(2):
            page.locator("[data-preset='recommended']").click()
            page.wait_for_selector(".wp-list li")
            page.wait_for_timeout(300)
            page.wait_for_function("/^\\d+ hits? in iteration 2/.test((document.querySelector('.hits-summary') || {}).textContent || '')")
        # (waited for, not read at once: on a loaded machine the second answer may still be drawing)
        page.wait_for_function("document.querySelectorAll('.wp-list li').length === 7")
        # the tab's badge counts what the panel lists
        page.wait_for_function("(document.querySelector('.hits-summary') || {}).textContent"
                               "?.startsWith(document.getElementById('hit-badge').textContent + ' hit')")
        assert page.locator(".wp-list li").count() == 7
        before = page.locator(".hits-summary").inner_text()
        # every group open, read in one pass of the page (two counts read apart can straddle a redraw)
        page.wait_for_function("[...document.querySelectorAll('.hit-group')].every((g) => g.open)")
    finally:
        page.goto("about:blank")   # the page polls: it must not talk to a server being stopped
        srv.stop()
    srv = _serve(SAMPLE, cache)
    try:
        open_view(page, srv, "#/watch?dump=single&it=2")
        page.wait_for_selector(".wp-list li")
        assert page.locator(".wp-list li").count() == 7
        page.wait_for_function("/^\\d+ hits? in iteration 2/.test((document.querySelector('.hits-summary') || {}).textContent || '')")
        assert page.locator(".hits-summary").inner_text() == before
        for w, h in SIZES:
            page.set_viewport_size({"width": w, "height": h})
            shot(page, f"watch-{w}x{h}")
        # hits roll up: the frozen fc2 layer's scope carries the badge
        open_view(page, srv, f"#/graph?dump=single&it=2&scope={BACKBONE}")
        wait_graph(page)
        page.wait_for_selector(f".gnode.has-hit[data-id='{BACKBONE}/fc2-Dense']")
        for w, h in SIZES:
            page.set_viewport_size({"width": w, "height": h})
            shot(page, f"graph-rollup-{w}x{h}")
        # run to next hit: from iteration 0 (which has hits) to the next iteration with a hit
        open_view(page, srv, "#/graph?dump=single&it=0")
        wait_graph(page)
        page.click("#run-next-hit")
        page.wait_for_function("document.getElementById('it-value').textContent === '1'")
        page.wait_for_selector(".toast")
        assert page.locator("#run-next-hit svg").count() == 1          # the icon survives
        page.wait_for_function("!document.getElementById('run-next-hit').disabled")
        page.click("#run-next-hit")
        page.wait_for_function("document.getElementById('it-value').textContent === '2'")
        assert page.locator("#run-next-hit svg").count() == 1
        page.locator("#it-slider").fill("5")
        page.wait_for_function("document.getElementById('it-value').textContent === '5'")
        page.wait_for_function("!document.querySelector('.toast')")   # its message goes with the move
    finally:
        page.goto("about:blank")   # the page polls: it must not talk to a server being stopped
        srv.stop()


def test_single_child_scopes_open_in_one_click_and_default_comes_first(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/graph?dump=single&it=2")
    wait_graph(page)
    ys = page.eval_on_selector_all(".gnode[data-type='scope']", "els => Object.fromEntries(els.map(e => [e.dataset.id, e.getBoundingClientRect().top]))")
    assert ys["Default"] < ys["Gradients"]
    page.locator(".gnode[data-id='Gradients']").click()      # Gradients holds Default holds network: one click
    page.wait_for_function("location.hash.includes('scope=Gradients/Default/network-WithLossCell')")
    open_view(page, live_sample, f"#/graph?dump=single&it=2&scope={BACKBONE}")
    wait_graph(page)
    page.locator(f".gnode[data-id='{BACKBONE}/sigmoid-Sigmoid']").click()   # a scope of one node: the node
    page.wait_for_function("document.querySelector('.insp-name') && document.querySelector('.insp-name').textContent === 'Sigmoid-op0'")
    assert "scope=" + BACKBONE + "/sigmoid-Sigmoid" in page.evaluate("location.hash")
    k = page.evaluate("document.querySelector('.viewport').transform.baseVal[1].matrix.a")   # scale
    assert k >= 0.8
    for w, h in SIZES:
        page.set_viewport_size({"width": w, "height": h})
        page.wait_for_timeout(300)      # the level refits after a resize
        shot(page, f"graph-{w}x{h}")


def test_every_view_at_both_sizes(page: Any, live_sample: Any) -> None:
    views = ["overview?dump=single", "code?dump=single&it=2&line=make_sample.py:200",
             "tensor?dump=single&it=3&node=conv1.weight", "ranks?dump=dp2", "watch?dump=dp2&it=0"]
    for w, h in SIZES:
        page.set_viewport_size({"width": w, "height": h})
        for v in views:
            open_view(page, live_sample, "#/" + v)
            page.wait_for_timeout(600)
            shot(page, f"view-{v.split('?')[0]}-{w}x{h}")
            if v.startswith("code") and w == 1024:   # long source lines scroll sideways, not cut
                assert page.evaluate("(b => b.scrollWidth > b.clientWidth)(document.querySelector('.src-body'))")
            if v.startswith("code"):   # the file name is whole and nothing is drawn over it
                title = page.evaluate("""(() => { const b = document.querySelector('.src-title b');
                  const r = b.getBoundingClientRect(), m = document.querySelector('.src-meta').getBoundingClientRect();
                  const over = !(m.left >= r.right || m.right <= r.left || m.top >= r.bottom || m.bottom <= r.top);
                  return { whole: b.scrollWidth <= b.clientWidth + 1 && r.right <= b.parentElement.getBoundingClientRect().right + 1, over }; })()""")
                assert title == {"whole": True, "over": False}, (w, title)


def test_a_sharded_weight_is_shown_whole(page: Any, live_sample: Any) -> None:
    """dumps_sample/torch_2d (FSDP2 x TP, 4 ranks): rank 2's layers.0.up.weight is its 12x8 logical tensor,
    and the statistics card says which shards make it and what rank 2 holds."""
    open_view(page, live_sample, "#/tensor?dump=torch_2d&rank=2&it=2&node=layers.0.up.weight")
    page.wait_for_selector(".stats-table")
    note = page.locator(".shard-note").inner_text()
    assert note == ("logical tensor 12x8, assembled from 4 shard(s) on ranks 0-3 "
                    "(dp,tp: _StridedShard(dim=0, sf=2), Shard(0)); rank 2 holds 3x8")
    assert page.locator(".card-head .muted", has_text="[12, 8] float32").count() == 1
    assert page.locator("td[data-stat='count']").first.inner_text().replace(",", "") == "96"
    shot(page, "tensor-logical")


def test_a_source_file_outside_the_allowed_roots_says_how_to_allow_it(page: Any, tmp_path: Any) -> None:
    """A copy of the sample served from elsewhere: its training script (beside the original) lies outside
    the allowed roots, so the code view shows the stacks' lines and says to start with --source-root."""
    import shutil
    root = str(tmp_path / "single")
    shutil.copytree(os.path.join(SAMPLE, "single"), root)
    srv = _serve(root, str(tmp_path / "cache"))
    try:
        open_view(page, srv, "#/code")
        page.locator(".file-item", has_text="make_sample.py").first.click()
        page.wait_for_selector(".source-hint")
        assert page.locator(".source-missing").inner_text() == "code from the stacks"
        hint = page.locator(".source-hint").inner_text()
        assert "outside the allowed roots" in hint and "--source-root DIR" in hint
        assert "not on this machine" not in page.locator("main").inner_text()
    finally:
        page.goto("about:blank")
        srv.stop()


def test_the_triage_finishing_and_watch_these_again_update_every_pane_without_a_reload(page: Any, tmp_path: Any) -> None:
    """The triage's findings are the watchpoints: when it finishes, the hit badge shows the iteration's hits
    and 'Run to next hit' is enabled with no click and no reload; after the user removed them all, the
    findings card's 'Watch these again' brings them back at once (they stayed stale until a reload)."""
    import shutil
    root = str(tmp_path / "dumps")       # a folder of dumps, the dump named in the address
    for name in ("single", "dp2"):
        shutil.copytree(os.path.join(SAMPLE, name), os.path.join(root, name))
    srv = _serve(root, str(tmp_path / "cache"))
    try:
        page.goto(srv.url + "#/triage?dump=single&it=7")
        page.wait_for_selector("body[data-ready='1']")
        navigations = page.evaluate("performance.getEntriesByType('navigation').length")
        page.wait_for_function("!document.getElementById('run-next-hit').disabled", timeout=20_000)
        # the badge reads '…' while the triage still runs: wait for its count
        page.wait_for_function("/^\\d+$/.test(document.getElementById('hit-badge').textContent)", timeout=20_000)
        assert int(page.locator("#hit-badge").inner_text()) >= 1
        page.locator("#tabs a[data-view=watch]").click()
        page.locator("button", has_text="Remove all").click()            # the user's list: empty
        page.wait_for_selector(".wp-source[data-source='user']")
        page.locator("#tabs a[data-view=triage]").click()
        page.wait_for_selector("#run-next-hit:disabled")
        page.locator(".findings button", has_text="Watch these again").click()
        page.wait_for_function("!document.getElementById('run-next-hit').disabled", timeout=20_000)
        page.wait_for_function("!document.getElementById('hit-badge').hidden", timeout=20_000)
        assert page.evaluate("performance.getEntriesByType('navigation').length") == navigations
    finally:
        page.goto("about:blank")
        srv.stop()


def test_triage_findings_and_loss_are_above_the_fold_in_a_folder_of_dumps(page: Any, live_sample: Any) -> None:
    """dumps_sample/ holds 17 dumps: at 1440x900 the findings and the loss of the dump open show without
    scrolling, the other dumps' chooser below them."""
    page.set_viewport_size({"width": 1440, "height": 900})
    _timed_triage(page, live_sample.url + "#/triage?dump=single")
    assert page.locator(".dumps-card .dump-item").count() >= 16
    for card in (".card.findings", ".loss-card"):
        top = page.evaluate(f"document.querySelector('{card}').getBoundingClientRect().top")
        assert 0 <= top < 900 - 100, (card, top)
    assert page.evaluate("document.querySelector('.dumps-card').getBoundingClientRect().top") > \
        page.evaluate("document.querySelector('.card.findings').getBoundingClientRect().top")
    shot(page, "triage-folder-1440x900")


def test_switching_dump_and_removing_watchpoints_update_every_pane(page: Any, tmp_path: Any) -> None:
    """The top bar follows the watchpoints of the dump shown: another dump's (none: its user removed them)
    when switching, and none after 'Remove all' in the Watchpoints tab, with no reload; the graph drops its
    hit marks."""
    import shutil
    root = str(tmp_path / "dumps")
    for name in ("single", "dp2"):
        shutil.copytree(os.path.join(SAMPLE, name), os.path.join(root, name))
    srv = _serve(root, str(tmp_path / "cache"))
    enabled = "!document.getElementById('run-next-hit').disabled"
    try:
        page.request.delete(srv.url + "api/watchpoints?dump=dp2")      # dp2: the user's list, empty
        _timed_triage(page, srv.url + "#/triage?dump=single&it=7")
        navigations = page.evaluate("performance.getEntriesByType('navigation').length")
        page.wait_for_function(enabled, timeout=20_000)     # the triage's findings: watched with no click
        page.wait_for_function("!document.getElementById('hit-badge').hidden", timeout=20_000)
        page.select_option("#dump-select", "dp2")          # a dump with no watchpoint
        page.wait_for_function(f"!({enabled}) && document.getElementById('hit-badge').hidden", timeout=20_000)
        page.select_option("#dump-select", "single")
        page.wait_for_function(enabled, timeout=20_000)
        page.wait_for_function("!document.getElementById('hit-badge').hidden", timeout=20_000)
        page.locator("#tabs a[data-view=graph]").click()
        page.wait_for_selector(".gnode.has-hit")
        page.locator("#tabs a[data-view=watch]").click()
        page.locator("button", has_text="Remove all").click()
        page.wait_for_function(f"!({enabled}) && document.getElementById('hit-badge').hidden", timeout=20_000)
        page.locator("#tabs a[data-view=graph]").click()
        page.wait_for_selector(".graph-view .gnode")
        page.wait_for_load_state("networkidle")
        assert page.locator(".gnode.has-hit").count() == 0
        assert page.evaluate("performance.getEntriesByType('navigation').length") == navigations
    finally:
        page.goto("about:blank")
        srv.stop()
