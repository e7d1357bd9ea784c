"""Every view on the PyTorch recorder's and msprobe's sample dumps, in a real Chromium: the UI only
asks the library, so a new format must draw as the MindSpore dumps do (no JavaScript error, content
in each view). Screenshots under tests/web/screenshots/."""
from __future__ import annotations

from typing import Any

import pytest

from test_ui import open_view, shot, wait_graph

pytestmark = pytest.mark.browser

# (dump id in dumps_sample/, a weight its tensor view opens on)
DUMPS = [("torch_single", "fc1.weight"), ("torch_dp2", "fc1.weight"),
         ("msprobe/tensor_mix", "block.0.weight"), ("msprobe/statistics_mix", "block.0.weight"),
         ("msprobe/ddp_2rank_tensor", "module.block.0.weight")]


@pytest.mark.parametrize("dump,weight", DUMPS, ids=[d for d, _ in DUMPS])
def test_every_view_draws_on_the_new_formats(page: Any, live_sample: Any, dump: str, weight: str) -> None:
    tag = dump.replace("/", "-")
    open_view(page, live_sample, f"#/triage?dump={dump}")
    page.wait_for_selector(".triage[data-ready='1']", timeout=60_000)
    assert page.locator(".loss-card").count() == 1
    shot(page, f"fmt-{tag}-triage")
    open_view(page, live_sample, f"#/overview?dump={dump}")
    page.wait_for_selector(".metrics")
    assert weight in page.locator("main").inner_text() or page.locator(".kind-row").count() >= 3
    # an msprobe dump says what it records and what not (a PyTorch recording records every operator)
    assert page.locator(".records-note").count() == (1 if dump.startswith("msprobe/") else 0)
    if dump.startswith("msprobe/"):
        assert "no data-flow edges" in page.locator(".records-note").inner_text()
    # a statistics dump's tensors are no files of 0 B: the card says there are no values
    metrics = page.locator(".metrics").inner_text()
    assert ("statistics only: no values stored" in metrics and "0 B" not in metrics) is dump.startswith("msprobe/statistics")
    open_view(page, live_sample, f"#/graph?dump={dump}")
    wait_graph(page)
    assert page.locator(".gnode").count() >= 1
    # with no graph named, the one that ran most opens (a PyTorch run's iteration 0 is a graph of its own)
    graphs = page.evaluate(f"fetch('/api/ranks/0/graphs?dump={dump}').then(r => r.json())")["items"]
    most = max(graphs, key=lambda g: len(g["iterations"]))
    assert page.input_value("#graph-select") == str(most["graph"])
    # the slider walks every iteration of the run, whichever graph ran it
    run = sorted({it for g in graphs for it in g["iterations"]})
    assert int(page.get_attribute("#it-slider", "max")) == len(run) - 1
    shot(page, f"fmt-{tag}-graph")
    open_view(page, live_sample, f"#/code?dump={dump}")
    page.wait_for_selector(".file-item")
    page.locator(".src-line.has-nodes").first.click()
    page.wait_for_selector(".line-nodes .node-list li")
    if dump.startswith("torch_"):   # the line made nodes in several graphs: each says which
        assert "graph 1" in page.locator(".line-nodes").inner_text()
    shot(page, f"fmt-{tag}-code")
    open_view(page, live_sample, f"#/tensor?dump={dump}&it=1&node={weight}")
    page.wait_for_function("document.querySelector('main').innerText.includes('count')", timeout=20_000)
    shot(page, f"fmt-{tag}-tensor")
    stats_only = dump.startswith("msprobe/statistics")
    assert ("holds statistics only" in page.locator(".hist-body").inner_text()) is stats_only
    assert (page.locator("a", has_text="Download .npy").count() == 0) is stats_only
    open_view(page, live_sample, f"#/ranks?dump={dump}")
    page.wait_for_selector(".ranks-card .rank-row[data-rank]")
    size = page.locator(".rank-row[data-rank] .rank-size").first.inner_text()
    assert ("statistics only" in size and "0 B" not in size) is stats_only
    open_view(page, live_sample, f"#/watch?dump={dump}")
    page.wait_for_selector("[data-preset='recommended']")
    page.goto("about:blank")   # the page polls: leave before the next test


def test_overview_shows_the_parallel_layout_tdbg_info_prints(page: Any, live_sample: Any) -> None:
    """The 2-D (dp x tp) sample: each mesh line of `tdbg info` is on the Overview too (it was left out)."""
    import os

    from clirun import run_cli

    printed = run_cli("info", os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                                           "dumps_sample", "torch_2d")).out
    meshes = [ln.strip() for ln in printed.splitlines() if ln.strip().startswith("mesh ")]
    assert len(meshes) == 2
    open_view(page, live_sample, "#/overview?dump=torch_2d")
    page.wait_for_selector(".layout-note")
    shown = page.locator(".layout-note").inner_text()
    assert all(m in shown for m in meshes) and "12 sharded" in shown, shown
    open_view(page, live_sample, "#/overview?dump=single")      # a dump with no layout: no note
    page.wait_for_selector(".layout-note", state="detached")
    page.wait_for_selector(".metrics")
    assert page.locator(".layout-note").count() == 0


def test_ranks_with_equal_loss_share_a_line_named_after_all_of_them(page: Any, live_sample: Any) -> None:
    """torch_2d: the two tensor-parallel ranks of each data-parallel group compute the same loss; each pair is one
    line named "ranks 0, 1 (identical)", so no rank is drawn under another and missing from the legend."""
    open_view(page, live_sample, "#/triage?dump=torch_2d")
    page.wait_for_selector(".triage[data-ready='1']", timeout=60_000)
    legend = page.locator(".loss-card .legend span").all_inner_texts()
    assert [t.strip() for t in legend] == ["ranks 0, 1 (identical)", "ranks 2, 3 (identical)"], legend


def test_the_series_sample_draws_its_spike_in_trends(page: Any, live_sample: Any) -> None:
    """torch_series, recorded every step: Trends draws its loss with the spike marked, and the spike's causes
    name the learning rate of the step before first (as `tdbg spikes` does)."""
    open_view(page, live_sample, "#/trends?dump=torch_series")
    page.wait_for_selector(".trends-loss svg path.curve-band")
    page.wait_for_selector(".trends-loss .spike-hit")
    page.locator(".trends-loss .spike-hit").first.click()
    page.wait_for_selector(".spike-causes .spike-head")
    head = page.locator(".spike-causes").inner_text()
    assert "Loss spike at step 151" in head and "lr" in head, head
