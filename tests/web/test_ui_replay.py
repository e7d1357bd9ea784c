"""Replay over the whole run in Chromium: a PyTorch recording's first step is a graph of its own
(dumps_sample/torch_single: graph 0 ran iteration 0, graph 1 iterations 1-7). The slider covers all
eight; stepping onto iteration 0 opens graph 0 with the scope, the selection and the overlay kept,
and stepping back returns to graph 1."""
from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from typing import Any

import pytest

DUMP = "torch_single"


def _graphs(srv: Any) -> dict[int, list[int]]:
    with urllib.request.urlopen(f"{srv.url}api/ranks/0/graphs?dump={DUMP}") as r:
        return {g["graph"]: g["iterations"] for g in json.load(r)["items"]}


def _overlay_value(srv: Any, graph: int, it: int, child: str) -> float:
    q = urllib.parse.urlencode({"dump": DUMP, "path": "model", "iteration": it, "overlay": "max_abs"})
    with urllib.request.urlopen(f"{srv.url}api/ranks/0/graphs/{graph}/scope?{q}") as r:
        return json.load(r)["overlay"]["children"][child]["value"]


def _hash(page: Any) -> dict[str, str]:
    query = page.evaluate("location.hash").split("?", 1)[1]
    return dict(urllib.parse.parse_qsl(query))


def _level_drawn(page: Any) -> None:
    page.wait_for_selector(".graph-view .gnode.ov-on")
    page.wait_for_function("() => document.querySelector('.graph-overlay').hidden")


def _at(page: Any, it: int) -> None:
    page.wait_for_function(f"document.getElementById('it-value').textContent === '{it}'")


def test_the_slider_covers_every_graph_and_switches_graph(page: Any, live_sample: Any) -> None:
    graphs = _graphs(live_sample)
    assert graphs[0] == [0] and graphs[1] == list(range(1, 8))      # the sample's layout, as described
    page.goto(f"{live_sample.url}#/graph?dump={DUMP}&scope=model&node=model/relu-0&ov=max_abs")
    _level_drawn(page)
    # a link with no graph opens the graph that ran most, the slider spans the whole run
    _at(page, 1)
    assert page.locator("#graph-select").input_value() == "1"
    assert page.locator("#it-range").text_content().strip() == "of 0–7"
    assert page.locator("#it-slider").get_attribute("max") == "7"
    assert page.locator("#it-slider").input_value() == "1"
    assert not page.locator("#it-first").is_disabled()
    page.locator("#it-first").click()
    _at(page, 0)
    page.wait_for_function("document.getElementById('graph-select').value === '0'")
    _level_drawn(page)
    h = _hash(page)
    assert (h["graph"], h["it"], h["scope"], h["node"], h["ov"]) == ("0", "0", "model", "model/relu-0", "max_abs")
    assert page.locator(".crumb.current").text_content() == "model"
    page.wait_for_selector('.gnode.selected[data-id="model/relu-0"]')
    # the overlay is graph 0's at iteration 0, as the API gives it
    tag = float(page.locator('.gnode[data-id="model/relu-0"] .ov-tag-text').text_content())
    assert tag == pytest.approx(_overlay_value(live_sample, 0, 0, "model/relu-0"), rel=5e-3)
    assert tag != pytest.approx(_overlay_value(live_sample, 1, 1, "model/relu-0"), rel=5e-3)
    assert page.locator("#it-first").is_disabled() and not page.locator("#it-next").is_disabled()
    # and forward again into graph 1, by the keyboard
    page.keyboard.press("ArrowRight")
    _at(page, 1)
    page.wait_for_function("document.getElementById('graph-select').value === '1'")
    _level_drawn(page)
    assert _hash(page)["graph"] == "1" and _hash(page)["scope"] == "model"


def test_a_graph_chosen_by_hand_moves_to_an_iteration_it_ran(page: Any, live_sample: Any) -> None:
    page.goto(f"{live_sample.url}#/graph?dump={DUMP}&it=5")
    page.wait_for_selector(".graph-view .gnode")
    _at(page, 5)
    page.locator("#graph-select").select_option("0")
    _at(page, 0)
    assert _hash(page)["graph"] == "0"


def test_a_scope_the_graph_lacks_opens_its_nearest_parent(page: Any, live_sample: Any) -> None:
    page.goto(f"{live_sample.url}#/graph?dump={DUMP}&it=1&scope=model/fc1-Linear/nope")
    page.wait_for_function("new URLSearchParams(location.hash.split('?')[1]).get('scope') === 'model/fc1-Linear'")
    page.wait_for_selector(".graph-view .gnode")
    assert page.locator(".crumb.current").text_content() == "fc1-Linear"


def test_the_tensor_view_follows_the_replay_into_the_first_graph(page: Any, live_sample: Any) -> None:
    page.goto(f"{live_sample.url}#/tensor?dump={DUMP}&it=2&node=model/relu-0")
    page.wait_for_selector(".tensor-grid")
    page.keyboard.press("ArrowLeft")
    _at(page, 1)
    page.wait_for_function("(document.querySelector('.tensor-grid')?.textContent || '').includes('iteration 1')")
    page.keyboard.press("ArrowLeft")
    _at(page, 0)
    page.wait_for_function("document.getElementById('graph-select').value === '0'")
    page.wait_for_function("(document.querySelector('.tensor-grid')?.textContent || '').includes('iteration 0')")
    page.wait_for_load_state("networkidle")
    assert page.locator(".error-box").count() == 0
    assert _hash(page)["graph"] == "0"


def test_a_node_the_other_graph_lacks_is_said_so_not_an_error(page: Any, live_sample: Any) -> None:
    # graph 1's optimizer steps are in-place adds graph 0 (which creates the optimizer state) does not run
    page.goto(f"{live_sample.url}#/graph?dump={DUMP}&it=2&scope=optimizer-SGD&node=optimizer-SGD/add_-10")
    page.wait_for_selector(".graph-view .gnode")
    page.wait_for_selector(".insp-section")
    page.locator("#it-first").click()
    _at(page, 0)
    page.wait_for_selector(".insp-missing")
    # the scope opened for the node, its folded group of in-place adds, opens graph 0's group of them
    assert _hash(page)["scope"] == "optimizer-SGD/add_[14]"
    page.wait_for_selector('.gnode[data-id="optimizer-SGD/add_-0"]')
    text = page.locator(".insp-missing").inner_text()
    assert "Not in graph 0" in text and "ran iteration 0" in text
    assert page.locator(".error-box").count() == 0
    page.locator(".insp-missing button", has_text="Clear selection").click()
    page.wait_for_function("!location.hash.includes('node=')")


def test_the_triage_charts_cover_every_graph_with_round_distinct_ticks(page: Any, live_sample: Any) -> None:
    page.goto(f"{live_sample.url}#/triage?dump={DUMP}")
    page.wait_for_selector(".loss-card svg circle", timeout=30_000)
    for card in (".loss-card", ".grad-card"):
        # one point per iteration of the run: graph 0's iteration 0 and graph 1's 1-7
        assert page.locator(f"{card} svg circle").count() == 8
        xs = page.locator(f"{card} svg text.tick-x").all_text_contents()
        ys = page.locator(f"{card} svg text.tick-y").all_text_contents()
        assert xs == [str(i) for i in range(8)], xs          # whole iterations, each once
        assert len(ys) >= 3 and len(set(ys)) == len(ys), ys
        steps = {round(float(b) - float(a), 9) for a, b in zip(ys, ys[1:])}
        assert len(steps) == 1, ys                           # evenly spaced round values
        step = abs(steps.pop())
        assert round(step / 10 ** math.floor(math.log10(step)), 6) in (1, 2, 5), ys
    # a click on the curve's first point replays iteration 0, in graph 0
    box = page.locator(".loss-card svg").bounding_box()
    page.mouse.click(box["x"] + 60, box["y"] + box["height"] / 2)
    _at(page, 0)
    page.wait_for_function("document.getElementById('graph-select').value === '0'")
