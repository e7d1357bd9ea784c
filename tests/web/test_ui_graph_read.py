"""The graph read at a glance, in Chromium on dumps_sample/: weights and constants drawn inside the box of
the op that reads them (as Netron draws a layer's initializers), edge labels clear of every box, a node
opened from a triage finding drawn with its inputs and readers, and the crumbs keeping the scope's name
whole with the run-difference colouring on."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from test_ui import FC1, MATMUL, open_view, wait_graph

pytestmark = pytest.mark.browser

BOXES = """() => {
  const r = (el) => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  return { nodes: [...document.querySelectorAll('.gnode')].map((g) => ({ id: g.dataset.id, box: r(g.querySelector('.body')) })),
    rows: [...document.querySelectorAll('.gattach')].map((g) => ({ id: g.dataset.id, box: r(g.querySelector('.a-body')),
      reader: g.closest('.gnode').dataset.id })),
    labels: [...document.querySelectorAll('.edge-labels text')].map((t) => ({ text: t.textContent, box: r(t) })),
    edges: document.querySelectorAll('.edges path').length, scene: r(document.querySelector('.viewport')) };
}"""


def _gap(a: list[float], b: list[float]) -> float:
    """Distance between two boxes (0 when they touch or overlap)."""
    dx = max(0.0, max(a[0], b[0]) - min(a[2], b[2]))
    dy = max(0.0, max(a[1], b[1]) - min(a[3], b[3]))
    return (dx * dx + dy * dy) ** 0.5


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def _open(page: Any, live: Any, query: str) -> dict[str, Any]:
    page.goto("about:blank")         # a goto that only changes the hash would not reload
    open_view(page, live, f"#/graph?{query}")
    wait_graph(page)
    result: dict[str, Any] = page.evaluate(BOXES)
    return result


def test_a_weight_is_drawn_inside_the_box_of_the_op_reading_it_and_opens_its_inspector(page: Any, live_sample: Any) -> None:
    root = _open(page, live_sample, "dump=single&it=2")
    assert not [n for n in root["nodes"] if n["id"].startswith("Parameter[")]      # no distant group of weights
    d = _open(page, live_sample, f"dump=single&it=2&scope={quote(FC1)}")
    weight = next(r for r in d["rows"] if r["id"] == "fc1.weight")
    reader = next(n for n in d["nodes"] if n["id"] == weight["reader"])
    scene = d["scene"]
    assert weight["reader"] == MATMUL
    assert _gap(weight["box"], reader["box"]) <= 0.02 * max(scene[2] - scene[0], scene[3] - scene[1])
    page.locator(".gattach[data-id='fc1.weight']").click()
    page.wait_for_function("document.querySelector('.insp-name') && document.querySelector('.insp-name').textContent === 'fc1.weight'")
    assert "node=fc1.weight" in page.url
    assert page.locator(".gattach.selected[data-id='fc1.weight']").count() == 1
    assert page.locator(".gnode.selected").count() == 0                              # the row is selected, not its reader


def test_an_attached_weight_takes_the_overlay_colour_of_its_own_value(page: Any, live_sample: Any) -> None:
    _open(page, live_sample, "dump=torch_single&graph=1&it=3&ov=max_abs&scope=model/fc1-Linear")
    row = page.wait_for_selector(".gattach[data-id='fc1.weight'][data-heat]")
    assert "max |x|" in row.query_selector("title").text_content()
    assert "fill:" in (row.query_selector(".a-body").get_attribute("style") or "")


LEVELS = ["dump=torch_single&graph=1&it=3", "dump=single&it=2", "dump=dp2&it=2",
          f"dump=single&it=2&scope={quote('Default/network-WithLossCell/_backbone-Net')}",
          "dump=torch_series&graph=1&it=3&scope=model", "dump=torch_dp2&graph=1&it=1"]


@pytest.mark.parametrize("query", LEVELS)
def test_edge_labels_sit_clear_of_every_node_box(page: Any, live_sample: Any, query: str) -> None:
    d = _open(page, live_sample, query)
    assert d["labels"]
    for label in d["labels"]:
        for n in d["nodes"]:
            assert not _overlap(label["box"], n["box"]), f"{label['text']!r} over {n['id']}"


@pytest.mark.parametrize(("query", "node"), [
    ("dump=torch_single&graph=0&it=0", "fc2.weight"),                               # weight_not_changed
    ("dump=single&it=1", "Gradients/Default/network-WithLossCell/_backbone-Net/fc3-Dense/Grad_MatMul/MatMul-op5"),
])
def test_a_findings_node_is_drawn_with_its_inputs_and_readers_centred_and_selected(page: Any, live_sample: Any,
                                                                                   query: str, node: str) -> None:
    # what a finding's link opens: the root, then the node's own level
    page.goto("about:blank")
    open_view(page, live_sample, f"#/graph?{query}&scope=&node={quote(node)}")
    selected = page.wait_for_selector(f'.selected[data-id="{node}"]')
    page.wait_for_function("document.querySelector('.graph-overlay').hidden")
    d = page.evaluate(BOXES)
    assert d["edges"] > 0 and page.locator(".gnode.t-ghost").count() > 0
    b = selected.bounding_box()
    c = page.locator(".graph-svg").bounding_box()
    assert abs(b["x"] + b["width"] / 2 - (c["x"] + c["width"] / 2)) < 0.1 * c["width"]
    assert abs(b["y"] + b["height"] / 2 - (c["y"] + c["height"] / 2)) < 0.2 * c["height"]
    assert "neighbour" in page.locator(".graph-info").inner_text()


def test_a_finding_clicked_on_the_triage_opens_its_node_with_its_neighbours(page: Any, live_sample: Any) -> None:
    open_view(page, live_sample, "#/triage?dump=torch_single")
    page.wait_for_function("() => document.querySelector(\".triage[data-ready='1']\")", timeout=60_000)
    page.locator(".finding[data-watchpoint='weight_not_changed'] .f-node").click()
    page.wait_for_selector(".gattach.selected[data-id='fc2.weight']")
    page.wait_for_function("document.querySelector('.graph-overlay').hidden")
    assert page.evaluate(BOXES)["edges"] > 0
    # a neighbour from outside opens its own level, selected there
    ghost = page.locator(".gnode.t-ghost").first
    want = ghost.get_attribute("data-id")
    ghost.locator(".n-title").click()
    page.wait_for_selector(f'.gnode.selected[data-id="{want}"]')


@pytest.mark.parametrize("width", [1500, 1366, 1100, 900])
def test_crumbs_keep_the_scopes_name_whole_with_the_run_difference_on(page: Any, live_sample: Any, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    _open(page, live_sample, "dump=single&it=3&ov=run_diff&vsdump=dp2&scope=Default/network-WithLossCell")
    page.wait_for_selector(".overlay-vs:not([hidden])")
    page.wait_for_timeout(100)          # the crumbs are fitted again once the second select is drawn
    last = page.evaluate("""() => { const c = [...document.querySelectorAll('.crumbs .crumb')].pop();
      const row = document.querySelector('.crumbs').getBoundingClientRect();
      return { text: c.textContent, sw: c.scrollWidth, cw: c.clientWidth, right: c.getBoundingClientRect().right, row: row.right }; }""")
    assert last["text"] == "network-WithLossCell" and last["sw"] <= last["cw"] and last["right"] <= last["row"] + 0.5
    # the colouring's choice is not cut: its text fits the select, less its arrow
    cut = page.evaluate("""() => { const s = document.querySelector('.overlay-select'); const st = getComputedStyle(s);
      const ctx = document.createElement('canvas').getContext('2d'); ctx.font = `${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
      const text = ctx.measureText(s.options[s.selectedIndex].text).width;
      return text - (s.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight)); }""")
    assert cut <= 0, f"the colouring's text is {cut:.0f} px wider than its box"
