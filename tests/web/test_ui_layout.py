"""Every view of the web UI usable at 1024x700 and readable up to 1920x1080, checked by one generic rule in
headless Chromium against dumps_sample/ (watchpoints set): no visible control (link, button, field, tab,
anything with a role of button or a tab stop, graph nodes included) is off-screen or covered by another
element, and no page scrolls sideways. A control inside a pane that scrolls is brought into view as a user
would scroll it first; parts of an svg drawing outside its frame (the graph) are reached by panning.

One server and one page for the module; each view is opened once and resized to each size."""
from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

from liveserver import LiveServer
from tdbg_web import create_app

pytestmark = pytest.mark.browser
SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
SCREENSHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "screenshots")
SIZES = ((1024, 700), (1440, 900), (1920, 1080))
BACKBONE = "Default/network-WithLossCell/_backbone-Net"

# (name, address, what shows the view is drawn): every view, on the samples of each format
VIEWS = [
    ("triage", "triage?dump=torch_dp2", ".triage[data-ready='1']"),
    ("chooser", "dumps", ".dump-item"),
    ("overview", "overview?dump=single", ".metrics"),
    ("overview-2d", "overview?dump=torch_2d", ".metrics"),        # long version, rank and watchpoint names
    ("graph", f"graph?dump=single&it=2&scope={BACKBONE}", ".gnode.has-hit"),
    ("graph-torch", "graph?dump=torch_single&it=1", ".gnode"),
    ("graph-msprobe", "graph?dump=msprobe/ddp_2rank_tensor", ".gnode"),
    ("code", "code?dump=single&it=2&line=make_sample.py:200", ".src-line.has-nodes"),
    ("tensor", "tensor?dump=single&it=3&node=conv1.weight", ".stats-table"),
    ("ranks", "ranks?dump=torch_dp2", ".ranks-card .rank-row"),
    ("watch", "watch?dump=single&it=2", ".hit-table"),
    ("trends", "trends?dump=torch_series", ".trends-loss svg path.curve-band"),
]

# The generic rule, run in the page: a list of what breaks it (empty when nothing does).
CHECK = """() => {
  // every control a user may click: links, buttons, fields, and whatever says it is one
  const SEL = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [role=button], [role=tab], [tabindex]:not([tabindex="-1"])';
  const userScrolls = (v) => v === 'auto' || v === 'scroll';
  const clips = (st) => st.overflowX !== 'visible' || st.overflowY !== 'visible';
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.classList.length ? '.' + [...e.classList].join('.') : '');
  const describe = (e) => `${name(e)} "${(e.getAttribute('aria-label') || e.title || e.textContent || e.value || '').trim().slice(0, 40)}"`;
  function firstBox(el) { const rs = el.getClientRects(); return rs.length ? rs[0] : el.getBoundingClientRect(); }
  // Scroll every ancestor a user can scroll so that the control's centre is in the middle of it.
  function bringIntoView(el) {
    for (let a = el.parentElement; a; a = a.parentElement) {
      const st = getComputedStyle(a);
      const r = firstBox(el), b = a.getBoundingClientRect();
      if (userScrolls(st.overflowX) && a.scrollWidth > a.clientWidth) a.scrollLeft += (r.left + r.right - b.left - b.right) / 2;
      if (userScrolls(st.overflowY) && a.scrollHeight > a.clientHeight) a.scrollTop += (r.top + r.bottom - b.top - b.bottom) / 2;
    }
  }
  // The box the control is drawn in: the viewport cut by every ancestor that clips; null when an svg
  // drawing clips it (a pan and zoom surface: its parts outside the frame are reached by panning).
  function visibleBox(el) {
    let box = { left: 0, top: 0, right: innerWidth, bottom: innerHeight };
    for (let a = el.parentElement; a; a = a.parentElement) {
      if (a === document.body || a === document.documentElement) continue;
      const st = getComputedStyle(a);
      if (!clips(st)) continue;
      const b = a.getBoundingClientRect();
      const left = b.left + a.clientLeft, top = b.top + a.clientTop;
      const inner = { left, top, right: left + (a.clientWidth || b.width), bottom: top + (a.clientHeight || b.height) };
      if (a instanceof SVGElement) { const r = firstBox(el); const cx = (r.left + r.right) / 2, cy = (r.top + r.bottom) / 2;
        if (cx < b.left || cx > b.right || cy < b.top || cy > b.bottom) return null; continue; }
      box = { left: Math.max(box.left, inner.left), top: Math.max(box.top, inner.top),
        right: Math.min(box.right, inner.right), bottom: Math.min(box.bottom, inner.bottom) };
    }
    return box;
  }
  const problems = [];
  for (const el of document.querySelectorAll(SEL)) {
    if (!el.isConnected || el.closest('[inert]')) continue;
    if (!el.checkVisibility({ checkOpacity: false, checkVisibilityCSS: true })) continue;
    const r0 = el.getBoundingClientRect();
    if (r0.width < 1 || r0.height < 1) continue;
    bringIntoView(el);
    const box = visibleBox(el);
    if (box === null) continue;
    const r = firstBox(el);
    const cx = (Math.max(r.left, box.left) + Math.min(r.right, box.right)) / 2;
    const cy = (Math.max(r.top, box.top) + Math.min(r.bottom, box.bottom)) / 2;
    const cut = r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1;
    if (cx <= box.left || cx >= box.right || cy <= box.top || cy >= box.bottom || (cut && el.matches('button, input, select, [role=tab]'))) {
      problems.push(`${describe(el)} off-screen at ${Math.round(r.left)},${Math.round(r.top)} ${Math.round(r.width)}x${Math.round(r.height)}`);
      continue;
    }
    const hit = document.elementFromPoint(cx, cy);
    if (hit && hit !== el && !el.contains(hit) && !(hit.contains(el) && hit.tagName === 'LABEL')) {
      problems.push(`${describe(el)} covered by ${describe(hit)}`);
    }
  }
  for (const pane of [document.scrollingElement, document.getElementById('main')]) {
    const over = pane.scrollWidth - pane.clientWidth;
    if (over > 1) problems.push(`${name(pane)} scrolls sideways by ${over} px`);
  }
  return problems;
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: Any) -> Iterator[LiveServer]:
    """dumps_sample/ served live with a cache of its own, the recommended watchpoints set on three dumps
    (their hit badges, hits tables and the replay's messages are part of the layout)."""
    if not os.path.isdir(SAMPLE):
        pytest.skip("dumps_sample/ is not present")
    app = create_app(SAMPLE, {"CACHE_DIR": str(tmp_path_factory.mktemp("layout-cache"))})
    for dump in ("single", "torch_dp2", "torch_2d"):
        assert app.test_client().post(f"/api/watchpoints?dump={dump}", json={"preset": "recommended"}).status_code == 201
    srv = LiveServer(app)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def one_page(browser: Any) -> Iterator[Any]:
    """One page for the whole module; a JavaScript error fails the test that caused it."""
    ctx = browser.new_context(viewport={"width": 1024, "height": 700}, bypass_csp=True)
    pg = ctx.new_page()
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.set_default_timeout(20_000)
    yield pg
    ctx.close()


def _open(page: Any, server: LiveServer, address: str, ready: str) -> None:
    page.goto("about:blank")
    page.goto(server.url + "#/" + address)
    page.wait_for_selector("body[data-ready='1']")
    page.wait_for_selector(ready, timeout=60_000)


def _resize(page: Any, width: int, height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_timeout(400)          # the graph refits and the trends redraw after a resize
    page.evaluate("document.getElementById('main')?.scrollTo(0, 0)")


def _shot(page: Any, name: str) -> None:
    os.makedirs(SCREENSHOTS, exist_ok=True)
    page.screenshot(path=os.path.join(SCREENSHOTS, f"layout-{name}.png"))


@pytest.mark.parametrize("name,address,ready", VIEWS, ids=[v[0] for v in VIEWS])
def test_no_control_is_off_screen_or_covered(one_page: Any, server: LiveServer, name: str, address: str, ready: str) -> None:
    page = one_page
    page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
    _open(page, server, address, ready)
    found = {}
    for w, h in SIZES:
        _resize(page, w, h)
        _shot(page, f"{name}-{w}x{h}")
        problems = page.evaluate(CHECK)
        if problems:
            found[f"{w}x{h}"] = problems
    assert not page.errors, page.errors
    assert not found, found


def test_the_replays_message_covers_no_control(one_page: Any, server: LiveServer) -> None:
    """'Run to next hit' in the graph at 1024x700: its "Stopped at ..." message leaves the zoom buttons free."""
    page = one_page
    _resize(page, 1024, 700)
    _open(page, server, "graph?dump=single&it=0", ".gnode")
    page.click("#run-next-hit")
    page.wait_for_selector(".toast", timeout=20_000)
    page.wait_for_selector(".gnode")
    page.wait_for_timeout(300)
    _shot(page, "graph-stopped-1024x700")
    assert "Stopped at iteration" in page.locator(".toast").inner_text()
    problems = page.evaluate(CHECK)
    assert not problems, problems


def test_the_line_numbers_stay_in_sight_after_clicking_a_long_line(one_page: Any, server: LiveServer) -> None:
    """At 1024x700 a click on a line longer than the source pane scrolls up or down only, and the line
    numbers stay in sight while the pane is scrolled sideways to the lines' end."""
    page = one_page
    _resize(page, 1024, 700)
    _open(page, server, "code?dump=single&it=2", ".src-line.has-nodes")
    line = page.evaluate("""(() => { const body = document.querySelector('.src-body');
      const lines = [...document.querySelectorAll('.src-line.has-nodes')];
      const long = lines.filter((l) => l.querySelector('.src-code').getBoundingClientRect().right > body.getBoundingClientRect().right);
      return long.length ? long[long.length - 1].dataset.line : null; })()""")
    assert line is not None, "no node-making line of make_sample.py is longer than the source pane"
    page.evaluate("document.querySelector('.src-body').scrollLeft = 0")
    page.locator(f".src-line[data-line='{line}'] .ln").click()      # on its number: nothing moves sideways
    page.wait_for_selector(f".src-line.selected[data-line='{line}']")
    page.wait_for_timeout(200)
    in_sight = """(() => { const body = document.querySelector('.src-body'), b = body.getBoundingClientRect();
      const ln = document.querySelector('.src-line.selected .ln'), r = ln.getBoundingClientRect();
      const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
      return { scrollLeft: body.scrollLeft, inside: r.left >= b.left - 1 && r.right <= b.right && r.top >= b.top && r.bottom <= b.bottom,
               seen: hit === ln || ln.contains(hit) }; })()"""
    assert page.evaluate(in_sight) == {"scrollLeft": 0, "inside": True, "seen": True}
    # on the middle of the line (the pane scrolls sideways to reach it, as it did for the user)
    page.locator(f".src-line[data-line='{line}']").click()
    seen = page.evaluate(in_sight)
    assert seen["inside"] and seen["seen"], seen
    page.evaluate("(b => { b.scrollLeft = b.scrollWidth; })(document.querySelector('.src-body'))")
    seen = page.evaluate(in_sight)
    assert seen["scrollLeft"] > 0 and seen["inside"] and seen["seen"], seen
    _shot(page, "code-long-line-1024x700")
