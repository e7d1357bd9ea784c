"""The 1,000-rank views on a generated 1,000-rank dump (tests/web/bigranks.py: NaN loss in ranks 7, 333
and 901, a high loss in 512, a departing weight in 640): the server sends small summaries with no
per-rank work on each request (the under-a-second figures are benchmarks/bench_web.py's), and Chromium
drives the loss band, the rank x iteration heatmap and the virtualised Ranks tab. The dump and its
triage are made once and kept in /tmp."""
from __future__ import annotations

import json
import time
import urllib.request
from typing import Any, Iterator

import pytest

import bigranks
from liveserver import LiveServer
from tdbg_web import create_app
from tdbg_web.server import warm

RANKS = 1000
# one problem each (a NaN hit, a divergent pair): ties in rank order, before the 996 healthy ranks
PROBLEM_RANKS = sorted([*bigranks.NAN_RANKS, bigranks.DIVERGENT_RANK])
TRIAGE_TIMEOUT_S = 240     # cold: the recommended scan and the ranks' comparison of 1,000 ranks
# A bound that only a view doing per-rank work on each request would break (a band's first call re-reads
# 1,000 ranks' statistics in about 0.4 s; a busy CI machine took 1.1 s once). The under-1-s goal of every
# view is measured where speed is: benchmarks/bench_web.py --ranks 1000.
ANSWERED_S = 5.0


@pytest.fixture(scope="module")
def live_ranks() -> Iterator[LiveServer]:
    root, cache = bigranks.ensure_ranks_dump(RANKS)
    app = create_app(root, {"CACHE_DIR": cache})
    warm(app)                  # as `tdbg serve` does before it listens
    srv = LiveServer(app)
    deadline = time.monotonic() + TRIAGE_TIMEOUT_S
    while _get(srv, "api/triage")["state"] != "done":
        assert time.monotonic() < deadline, "the triage of the 1,000-rank dump did not finish"
        time.sleep(0.5)
    yield srv
    srv.stop()


def _get(srv: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(srv.url + path, timeout=30) as r:
        return json.loads(r.read())


def _timed(srv: LiveServer, path: str) -> tuple[Any, float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(srv.url + path, timeout=30) as r:
        body = r.read()
    return json.loads(body), time.perf_counter() - t0, len(body)


def test_the_server_sends_summaries_fast(live_ranks: LiveServer) -> None:
    t, secs, size = _timed(live_ranks, "api/triage")
    res = t["result"]
    assert secs < ANSWERED_S and size < 200_000, (secs, size)
    assert res["loss"] == [] and len(res["ranks"]) == RANKS      # no series per rank
    band = res["loss_band"]
    assert band["ranks"] == RANKS and band["iterations"] == list(range(bigranks.ITERATIONS))
    named = [o["rank"] for o in band["outliers"]]
    assert named[:3] == list(bigranks.NAN_RANKS) and named[3] == bigranks.HIGH_RANK   # non-finite first, then the worst
    heat = res["heatmap"]
    assert sorted(heat["rows"]) == list(range(RANKS)) and len(heat["groups"]) == 16
    cells = {(heat["rows"][i], heat["iterations"][j]): (hh, d) for i, j, hh, d in heat["cells"]}
    assert {r for (r, _), (hh, _) in cells.items() if hh} == set(bigranks.NAN_RANKS)
    assert cells[(bigranks.DIVERGENT_RANK, bigranks.DEPART)][1] >= 1
    page, secs, _ = _timed(live_ranks, "api/ranks?sort=problems&end=4")
    assert secs < ANSWERED_S and [x["rank"] for x in page["items"]] == PROBLEM_RANKS
    assert page["total"] == RANKS and page["triaged"]
    found, secs, _ = _timed(live_ranks, "api/ranks?q=rank%20640")
    assert secs < ANSWERED_S and [x["rank"] for x in found["items"]] == [640] and found["items"][0]["divergent"] >= 1
    norm, secs, _ = _timed(live_ranks, "api/band?node=fc1.weight&stat=l2norm")
    assert secs < ANSWERED_S and norm["outliers"][0]["rank"] == bigranks.DIVERGENT_RANK and norm["outliers"][0]["iterations"] == [bigranks.DEPART]


def test_bad_ranks_queries_say_what_is_wrong(live_ranks: LiveServer) -> None:
    for q, said in (("sort=size", "bad sort"), ("sort=rank&end=6000", "out of bounds"), ("sort=rank&begin=-1", "negative")):
        with pytest.raises(urllib.error.HTTPError) as e:
            _get(live_ranks, f"api/ranks?{q}")
        assert e.value.code == 400 and said in json.loads(e.value.read())["error"]


def _hash(page: Any) -> str:
    return page.evaluate("location.hash")


def test_the_band_names_outliers_and_opens_one(page: Any, live_ranks: LiveServer) -> None:
    page.goto(live_ranks.url + "#/triage")
    page.wait_for_selector(".loss-card .band-chart .band-iqr")
    assert page.locator(".loss-card .band-chart path.band-median").count() == 1
    assert page.locator(".loss-card .band-outlier").count() >= 4
    assert page.locator(".loss-card svg path").count() < 40            # not a line per rank
    page.wait_for_selector(".grad-card .band-chart path.band-median", state="attached")   # the gradient norm too
    page.locator(".loss-card .band-outlier[data-rank='333'] .band-label").click()
    page.wait_for_function("location.hash.startsWith('#/graph') && location.hash.includes('rank=333')")
    assert f"it={bigranks.DEPART}" in _hash(page)


def test_a_heatmap_cell_opens_its_rank_and_iteration(page: Any, live_ranks: LiveServer) -> None:
    page.goto(live_ranks.url + "#/triage")
    canvas = page.wait_for_selector(".heatmap-card canvas.rank-heat")
    heat = _get(live_ranks, "api/triage")["result"]["heatmap"]
    row, col = heat["rows"].index(bigranks.DIVERGENT_RANK), heat["iterations"].index(bigranks.DEPART)
    box = canvas.bounding_box()
    x = (col + 0.5) * box["width"] / len(heat["iterations"])
    y = (row + 0.5) * box["height"] / len(heat["rows"])
    canvas.click(position={"x": x, "y": y})
    page.wait_for_function("location.hash.startsWith('#/graph') && location.hash.includes('rank=640')")
    assert f"it={bigranks.DEPART}" in _hash(page)


def test_the_ranks_tab_is_virtual_searchable_and_sortable(page: Any, live_ranks: LiveServer) -> None:
    page.goto(live_ranks.url + "#/ranks")
    page.wait_for_selector(".ranks-card .rank-row[data-rank='0']")
    assert page.locator(".ranks-card .rank-row").count() < 60          # far fewer than 1,000 rows in the DOM
    page.locator(".rank-scroll").evaluate("e => { e.scrollTop = e.scrollHeight; }")
    page.wait_for_selector(".ranks-card .rank-row[data-rank='999']")
    assert page.locator(".ranks-card .rank-row").count() < 60
    page.select_option(".rank-sort", "problems")
    page.wait_for_function("(document.querySelector('.ranks-card .rank-row[data-rank]') || {}).dataset?.rank === '7'")
    first = page.evaluate("[...document.querySelectorAll('.ranks-card .rank-row[data-rank]')].slice(0, 4).map(e => +e.dataset.rank)")
    assert first == PROBLEM_RANKS
    page.fill(".rank-search", "rank 640")
    page.wait_for_function("document.querySelectorAll('.ranks-card .rank-row[data-rank]').length === 1")
    row = page.locator(".ranks-card .rank-row[data-rank='640']")
    assert "divergent" in row.inner_text()
    row.click()
    page.wait_for_function("location.hash.includes('rank=640')")


def test_a_tensor_across_ranks_is_a_band_whose_outlier_opens(page: Any, live_ranks: LiveServer) -> None:
    page.goto(live_ranks.url + f"#/tensor?node=fc1.weight&it={bigranks.DEPART}&graph=0")
    # every other rank holds the same weight: the band is a line (its quartile area has no height)
    page.wait_for_selector(".ranks-band-card .band-chart path.band-median", state="attached")
    assert page.locator(".ranks-band-card .band-outlier[data-rank='640']").count() == 1    # its weight departs
    page.locator(".ranks-band-card .band-outlier[data-rank='640'] .band-label").click()
    page.wait_for_function("location.hash.includes('rank=640')")
    assert f"it={bigranks.DEPART}" in _hash(page)
