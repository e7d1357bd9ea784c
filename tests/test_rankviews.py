"""debugger.views.ranks against numpy truth: bands (quartiles, outliers with NaN ranks), the heatmap's
sparse cells, rank groups from a recorded parallel layout, and the Ranks tab's search/sort/page."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from debugger.views import ranks as rankviews
from debugger.formats.parallel import MeshRecord, RankLayout
from debugger.model import open_dump

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dumps_sample")


def _series(values: np.ndarray) -> dict[int, list[list[float | None]]]:
    return {r: [[it, None if not math.isfinite(v) else float(v)] for it, v in enumerate(row)]
            for r, row in enumerate(values)}


def test_band_quartiles_match_numpy_and_name_the_outliers() -> None:
    rng = np.random.default_rng(0)
    vals = 1.0 + 0.01 * rng.standard_normal((200, 5))
    vals[17, 3] = 9.0            # far above the others at one iteration
    vals[42, 1] = math.nan       # a NaN rank is always an outlier
    vals[99, 4] = math.inf
    b = rankviews.band(_series(vals))
    finite = np.where(np.isfinite(vals), vals, np.nan)
    for name, truth in (("min", np.nanmin(finite, 0)), ("q1", np.nanpercentile(finite, 25, 0)),
                        ("median", np.nanmedian(finite, 0)), ("q3", np.nanpercentile(finite, 75, 0)),
                        ("max", np.nanmax(finite, 0))):
        np.testing.assert_allclose(b[name], truth, rtol=1e-12)
    assert b["ranks"] == 200 and b["iterations"] == [0, 1, 2, 3, 4]
    # truth apart: every rank whose value leaves median +- k IQR at some iteration, or is not finite
    q1, med, q3 = (np.nanpercentile(finite, q, 0) for q in (25, 50, 75))
    far = (np.abs(finite - med) > rankviews.OUTLIER_IQRS * (q3 - q1)) | ~np.isfinite(vals)
    want = set(np.nonzero(far.any(1))[0].tolist())
    got = {o["rank"] for o in b["outliers"]}
    assert {17, 42, 99} <= got and got == want and b["outlier_count"] == len(want)
    nan_rank = next(o for o in b["outliers"] if o["rank"] == 42)
    assert nan_rank["points"][1] == [1, None] and nan_rank["iterations"] == [1] and nan_rank["score"] is None
    assert b["outliers"][0]["score"] is None     # non-finite ranks come first


def test_identical_ranks_have_no_outlier_until_one_departs() -> None:
    vals = np.full((32, 3), 2.5)
    assert rankviews.band(_series(vals))["outliers"] == []
    vals[5, 2] = 2.5000001       # no spread at all: any departure is named
    assert [o["rank"] for o in rankviews.band(_series(vals))["outliers"]] == [5]


def test_outliers_are_capped_worst_first_and_counted() -> None:
    vals = 1.0 + np.arange(200).reshape(100, 2) * 1e-3
    for k, r in enumerate(range(60, 70)):
        vals[r, 0] = 100.0 + k
    b = rankviews.band(_series(vals), max_outliers=5)
    assert b["outlier_count"] == 10 and [o["rank"] for o in b["outliers"]] == [69, 68, 67, 66, 65]


def test_heatmap_cells_are_counts_in_group_order() -> None:
    groups = [{"name": "odd", "ranks": [1, 3]}, {"name": "even", "ranks": [0, 2]}]
    heat = rankviews.heatmap([0, 1, 2, 3], [10, 20], [(3, 20), (3, 20), (0, 10), (9, 10)], [(2, 20)], groups)
    assert heat["rows"] == [1, 3, 0, 2]
    assert heat["groups"] == [{"name": "odd", "start": 0, "count": 2}, {"name": "even", "start": 2, "count": 2}]
    assert heat["cells"] == [[1, 1, 2, 0], [2, 0, 1, 0], [3, 1, 0, 1]]     # rank 9 is not in the dump: left out
    assert rankviews.rank_problems(heat)[3] == {"hits": 2, "divergent": 0}


def test_groups_follow_the_layout_else_blocks() -> None:
    mesh = MeshRecord(("dp", "tp"), (2, 3), tuple(range(6)))
    layouts = {r: RankLayout(meshes={"dp,tp": mesh}) for r in range(6)}
    assert rankviews.rank_groups(list(range(6)), layouts) == [{"name": "dp 0", "ranks": [0, 1, 2]},
                                                              {"name": "dp 1", "ranks": [3, 4, 5]}]
    staged = {r: RankLayout(stage=r // 2, stages=2) for r in range(4)}
    assert [g["name"] for g in rankviews.rank_groups(range(4), staged)] == ["stage 0", "stage 1"]
    hosts = {r: f"node{r // 8}" for r in range(16)}
    assert rankviews.rank_groups(range(16), {}, hosts) == [{"name": "node0", "ranks": list(range(8))},
                                                           {"name": "node1", "ranks": list(range(8, 16))}]
    assert rankviews.rank_groups(range(6), layouts, hosts)[0]["name"] == "dp 0"      # the layout first
    blocks = rankviews.rank_groups(list(range(130)), {}, {0: "node0"})                # a host unknown for most
    assert len(blocks) == 3
    blocks = rankviews.rank_groups(list(range(130)), {})
    assert [(g["name"], len(g["ranks"])) for g in blocks] == [("ranks 0-63", 64), ("ranks 64-127", 64), ("ranks 128-129", 2)]


@pytest.mark.skipif(not os.path.isdir(os.path.join(SAMPLE, "torch_2d")), reason="dumps_sample/ is not present")
def test_groups_of_a_recorded_fsdp_tp_dump() -> None:
    d = open_dump(os.path.join(SAMPLE, "torch_2d"))
    groups = rankviews.rank_groups(d.rank_ids, {r.rank: r.info.layout for r in d.ranks})
    assert groups == [{"name": "dp 0", "ranks": [0, 1]}, {"name": "dp 1", "ranks": [2, 3]}]   # the TP pairs


def test_rows_search_and_sort() -> None:
    rows = [{"rank": r, "group": f"dp {r // 4}", "host": f"node{r // 8}", "hits": (r == 5) * 3,
             "divergent": (r == 9) * 7, "warnings": (r == 2)} for r in range(20)]
    assert [x["rank"] for x in rankviews.select_rows(rows, sort="problems")[:3]] == [9, 5, 2]
    assert [x["rank"] for x in rankviews.select_rows(rows, q="node2")] == [16, 17, 18, 19]
    assert [x["rank"] for x in rankviews.select_rows(rows, q="dp 1")] == [4, 5, 6, 7]
    assert rankviews.select_rows(rows, q="node1") == rows[8:16]
    assert rankviews.select_rows(rows, q="rank 13") == [rows[13]]
    assert rankviews.select_rows(rows, q="nothing") == []


def test_a_heatmap_cell_names_the_tensor_it_opens_once() -> None:
    groups = [{"name": "all", "ranks": [0, 1, 2]}]
    bias = {"graph": 0, "node": "b", "io": "output", "slot": 0}
    opens = {(1, 10): bias, (2, 10): dict(bias), (2, 20): {"graph": 1, "node": "w", "io": "input", "slot": 1},
             (9, 10): bias}       # rank 9 is not in the dump: left out
    heat = rankviews.heatmap([0, 1, 2], [10, 20], [], [(1, 10), (2, 10), (2, 20)], groups, opens)
    assert heat["tensors"] == [bias, {"graph": 1, "node": "w", "io": "input", "slot": 1}]
    assert heat["opens"] == [[1, 0, 0], [2, 0, 0], [2, 1, 1]]
    problems = rankviews.rank_problems(heat)
    assert problems[2]["first"] == [10, 0] and rankviews.first_tensor(heat, problems[2]) == {"iteration": 10, **bias}
    assert rankviews.first_tensor(heat, problems[0]) is None
    assert "first" not in rankviews.rank_problems(heat)[0]


def _pair(it: int, a: int, b: int, node: str, **kw: object) -> dict[str, object]:
    return {"iteration": it, "a": {"rank": a}, "b": {"rank": b}, "node": node, "io": "output", "slot": 0,
            "graph": 0, "grade": "error", "counted": True, "match": "exact", **kw}


def test_a_divergent_cell_opens_its_first_divergence_else_its_first_held_error() -> None:
    from debugger.views.triage import cell_targets, divergent_tensors

    cmp = {"base": 0, "first_divergence": _pair(1, 1, 0, "late"),
           "pairs": [_pair(1, 1, 0, "early"), _pair(1, 1, 0, "late"), _pair(2, 1, 0, "gone", match=None),
                     _pair(2, 1, 0, "held"), _pair(2, 0, 3, "x", node_b="x_on_3"),
                     _pair(2, 1, 0, "uncounted", counted=False), _pair(3, 1, 0, "warned", grade="warning")]}
    got = {k: v["node"] for k, v in divergent_tensors(cmp).items()}
    assert got == {(1, 1): "late", (1, 2): "held", (3, 2): "x_on_3"}     # (rank, iteration): the rank not the base
    hit = {"rank": 2, "graph": 0, "iteration": 5, "node": "h", "io": "output", "slot": 0, "watchpoint": "w",
           "kind": "activation", "param": None, "actual": 1.0, "threshold": 0.0, "source": None, "op_type": "",
           "position": 0}
    assert {k: v["node"] for k, v in cell_targets([hit], cmp).items()} == {**got, (2, 5): "h"}
