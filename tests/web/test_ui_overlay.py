"""The graph's overlay in Chromium on a real GPT-2 run with a planted fault: from the root down, the worst
child of every level is on the way to the faulty layer, the layer carries the value plain torch saw,
and the overlay follows the replay slider; the legend, the picker and the minimap with it."""
from __future__ import annotations

import json
import urllib.request
from typing import Any, Iterator

import pytest

from liveserver import LiveServer
from overlayrun import PLANTED, record

PLANT_AT, STEPS = 3, 5      # iteration 3 is a graph of its own (the edit is one operator more); 1, 2 and 4 share one


@pytest.fixture(scope="module")
def planted(tmp_path_factory: Any) -> Iterator[tuple[LiveServer, dict[int, float]]]:
    from tdbg_web import create_app
    out = str(tmp_path_factory.mktemp("gpt2") / "run")
    truth = record(out, STEPS, PLANT_AT)
    srv = LiveServer(create_app(out, {"CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}))
    yield srv, truth
    srv.stop()


def _graph_of(srv: LiveServer, it: int) -> int:
    with urllib.request.urlopen(f"{srv.url}api/ranks/0/graphs") as r:
        items = json.load(r)["items"]
    return next(g["graph"] for g in items if it in g["iterations"])


def _ready(page: Any) -> None:
    """The level drawn with its overlay."""
    page.wait_for_selector(".graph-view .gnode.ov-on")
    page.wait_for_function("() => document.querySelector('.graph-overlay').hidden")


def _hottest(page: Any) -> dict[str, Any]:
    """The drawn child with the largest heat, its id, type and value tag."""
    return page.evaluate("""() => {
      const gs = [...document.querySelectorAll('.gnode[data-heat]')];
      gs.sort((a, b) => parseFloat(b.dataset.heat) - parseFloat(a.dataset.heat));
      const g = gs[0];
      return { id: g.dataset.id, type: g.dataset.type, heat: parseFloat(g.dataset.heat),
               tag: g.querySelector('.ov-tag-text').textContent };
    }""")


def _tag(page: Any, child_id: str) -> float:
    return float(page.locator(f'.gnode[data-id="{child_id}"] .ov-tag-text').text_content())


def test_the_faulty_layer_is_coloured_worst_from_the_root_down(page: Any, planted: Any) -> None:
    srv, truth = planted
    graph = _graph_of(srv, 4)
    page.goto(f"{srv.url}#/graph?graph={graph}&it=4&ov=max_abs")
    _ready(page)
    assert "max |x|" in page.locator(".legend-overlay").text_content()
    opened = []
    while True:
        top = _hottest(page)
        assert top["heat"] == 1.0          # the worst child of a level holds the graph's largest value
        if top["type"] == "node":
            break
        opened.append(top["id"])
        page.locator(f'.gnode[data-id="{top["id"]}"]').click()
        page.wait_for_function("(id) => !document.querySelector(`.gnode[data-id=\"${id}\"]`)", arg=top["id"])
        _ready(page)
        if top["id"].endswith("/mlp-GPT2MLP") and "/h.1-" in top["id"]:
            # the level of the faulty layer: it carries what torch's forward hook saw (3 digits drawn)
            layer = page.locator(f'.gnode[data-id*="/{PLANTED}-"]').get_attribute("data-id")
            assert _tag(page, layer) == pytest.approx(truth[4], rel=5e-3)
    # the way down went through the planted block's MLP, the scope whose weight was scaled
    assert any(p.endswith("mlp-GPT2MLP") and "/h.1-" in p for p in opened), opened
    assert opened[0] == "model" or opened[0].startswith("model")
    # the legend names the worst child of this level
    assert "Worst here" in page.locator(".legend-overlay").text_content()
    # the inspector of a statistics-only node says why it draws no histogram (not "no finite values")
    page.locator(f'.gnode[data-id="{top["id"]}"]').click()
    assert "statistics only" in page.locator(".inspector .hist-none").text_content()
    assert "no finite values" not in page.locator(".inspector").text_content()
    # and offers no download of values it does not hold (a link that answered 404, saved as npy.json)
    assert page.locator(".inspector .no-npy").is_visible() and page.locator(".inspector a[download]").count() == 0


def test_the_overlay_follows_the_replay_slider(page: Any, planted: Any) -> None:
    srv, truth = planted
    graph = _graph_of(srv, 4)
    assert _graph_of(srv, 2) == graph            # a healthy and a faulty iteration of one graph
    mlp = "model/transformer-GPT2Model/h.1-GPT2Block/mlp-GPT2MLP"
    page.goto(f"{srv.url}#/graph?graph={graph}&it=4&ov=max_abs&scope={mlp}")
    _ready(page)
    layer = page.locator(f'.gnode[data-id*="/{PLANTED}-"]').get_attribute("data-id")
    assert _tag(page, layer) == pytest.approx(truth[4], rel=5e-3)
    page.click("#it-prev")                          # iteration 3 ran a graph of its own (the planting)
    page.wait_for_function("() => document.getElementById('it-value').textContent === '3'")
    page.wait_for_function(f"() => document.getElementById('graph-select').value === '{_graph_of(srv, 3)}'")
    _ready(page)
    assert "ov=max_abs" in page.url and f"scope={mlp}" in page.url     # the overlay and the scope stay
    page.click("#it-prev")                          # iteration 2: before the fault, in the first graph again
    page.wait_for_function("() => document.getElementById('it-value').textContent === '2'")
    page.wait_for_function(f"() => document.getElementById('graph-select').value === '{graph}'")
    page.wait_for_function(f"(want) => {{ const t = document.querySelector('.gnode[data-id=\"{layer}\"] .ov-tag-text');"
                           f" return t && Math.abs(parseFloat(t.textContent) - want) < want * 5e-3; }}", arg=truth[2])
    assert page.locator(".gnode.ov-on").count() >= 3


def test_the_picker_sets_the_overlay_and_the_minimap_shows_a_level_larger_than_the_view(page: Any, planted: Any) -> None:
    srv, _ = planted
    graph = _graph_of(srv, 4)
    page.goto(f"{srv.url}#/graph?graph={graph}&it=4&scope=Gradient[28]")
    page.wait_for_selector(".graph-view .gnode")
    assert page.locator(".gnode.ov-on").count() == 0
    page.select_option(".overlay-select", "max_abs")
    page.wait_for_selector(".gnode.ov-on")
    assert "ov=max_abs" in page.url
    assert page.locator(".overlay-select option[value=rank_diff]").is_disabled()      # one rank only
    page.click("button[title='Zoom in']")
    page.click("button[title='Zoom in']")
    page.wait_for_function("() => getComputedStyle(document.querySelector('.minimap')).display !== 'none'")
    assert page.locator(".minimap rect").count() > 10
