"""A rank's view is that rank's data (issue 37 item 6), in Chromium on dumps_sample/torch_2d (FSDP2 x TP,
4 ranks; rank 1's replica of layers.0.down.bias diverges from iteration 1): the triage's heatmap cell and the
Ranks tab's row open that tensor on rank 1 at iteration 1 (not the graph's root), whose inspector and Tensor
view show rank 1's values, and the rank-difference overlay colours it."""
from __future__ import annotations

import os
from typing import Any

import pytest

from test_ui import open_view, wait_graph

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
PLANTED = "layers.0.down.bias"
PLACE = "Gradient[12]"           # the root's folded group holding the node that reads it (drawn beside it)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.isdir(os.path.join(SAMPLE, "torch_2d")), reason="dumps_sample/ is not present")]


def _landed_on_the_bias(page: Any) -> None:
    """The graph view on rank 1 at iteration 1, its inspector on the bias with rank 1's statistics."""
    page.wait_for_function("""() => { const h = location.hash; return h.startsWith('#/graph') && h.includes('rank=1')
        && /[?&]it=1(&|$)/.test(h) && h.includes('node=layers.0.down.bias'); }""")
    page.wait_for_function(f"document.querySelector('.insp-name') && document.querySelector('.insp-name').textContent === '{PLANTED}'")
    tile = ".stat-tile[data-stat='max'] .st-value"
    page.wait_for_function(f"document.querySelector(\"{tile}\") && document.querySelector(\"{tile}\").textContent.startsWith('1.2')")
    page.wait_for_selector(f'.gattach.selected[data-id="{PLANTED}"]')   # the graph opens its reader's level, the weight's row selected


def test_a_divergent_heatmap_cell_opens_the_divergent_tensor(page: Any, live_sample: Any) -> None:
    page.goto(live_sample.url + "#/triage?dump=torch_2d")
    page.wait_for_function("() => document.querySelector(\".triage[data-ready='1']\")", timeout=60_000)
    canvas = page.wait_for_selector(".heatmap-card canvas.rank-heat")
    heat = page.evaluate("fetch('api/triage?dump=torch_2d').then(r => r.json()).then(j => j.result.heatmap)")
    row, col = heat["rows"].index(1), heat["iterations"].index(1)
    box = canvas.bounding_box()
    at = {"x": (col + 0.5) * box["width"] / len(heat["iterations"]), "y": (row + 0.5) * box["height"] / len(heat["rows"])}
    canvas.hover(position=at)
    assert page.locator(".heatmap-card .heat-tip").inner_text().endswith(f"click: {PLANTED}")
    canvas.click(position=at)
    _landed_on_the_bias(page)


def test_the_ranks_tab_opens_a_ranks_divergent_tensor(page: Any, live_sample: Any) -> None:
    page.goto(live_sample.url + "#/triage?dump=torch_2d")     # the Ranks tab's problems come from the triage
    page.wait_for_function("() => document.querySelector(\".triage[data-ready='1']\")", timeout=60_000)
    open_view(page, live_sample, "#/ranks?dump=torch_2d")
    chip = page.wait_for_selector(".ranks-card .rank-row[data-rank='1'] .chip.divergent.clickable")
    assert PLANTED in chip.get_attribute("title")
    chip.click()
    _landed_on_the_bias(page)


def test_the_tensor_view_shows_the_ranks_own_replica(page: Any, live_sample: Any) -> None:
    values = {}
    for rank in (0, 1):
        page.goto("about:blank")      # a hash change alone keeps the last rank's table until the answer comes
        open_view(page, live_sample, f"#/tensor?dump=torch_2d&rank={rank}&it=1&graph=0&node={PLANTED}")
        page.wait_for_selector(".stats-table td[data-stat='max']")
        values[rank] = page.locator(".stats-table td[data-stat='max']").first.inner_text()
    assert values[1].startswith("1.2") and not values[0].startswith("1.2"), values


def test_the_rank_difference_overlay_colours_the_diverged_replica(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/graph?dump=torch_2d&rank=1&graph=0&it=1&ov=rank_diff&vs=0")
    wait_graph(page)
    tag = page.wait_for_selector(f'.gnode[data-id="{PLACE}"] .ov-tag-text')
    assert float(tag.text_content()) > 0.5
