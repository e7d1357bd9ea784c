"""The /api blueprint through Flask's test client, against real dumps: a dumpmaker dump root (``client``),
dumps_sample/ (a folder of two dumps) and dumpmaker dumps with planted values."""
from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
from typing import Any

import numpy as np
import pytest

import dumpmaker
from debugger import KINDS, open_dump, tensor_stats, watch
from debugger.views import export
from debugger.stats.core import STAT_NAMES

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FC1_MATMUL = "Default/network-WithLossCell/_backbone-Net/fc1-Dense/MatMul-op0"


def ok(resp: Any, status: int = 200) -> Any:
    assert resp.status_code == status, resp.get_data(as_text=True)
    return json.loads(resp.get_data(as_text=True))   # strict JSON: NaN would not parse as a number here


def err(resp: Any, status: int) -> str:
    assert resp.status_code == status, resp.get_data(as_text=True)
    body = resp.get_json()
    assert set(body) >= {"error", "type", "status"}
    return body["error"]


def a_node(client: Any, kind: str, dump: str | None = None) -> str:
    """The first node of a kind, found through the search API."""
    q = "" if dump is None else f"&dump={dump}"
    for hit in ok(client.get(f"/api/ranks/0/graphs/0/search?q=-{q}"))["items"] + \
            ok(client.get(f"/api/ranks/0/graphs/0/search?q=.{q}"))["items"]:
        if hit["kind"] == kind:
            return hit["node"]
    raise AssertionError(f"no {kind} node")


def line_of(script: str, code: str) -> int:
    """The 1-based line of ``script`` that holds ``code`` (stripped), e.g. where dumpmaker's MLP calls a layer."""
    with open(script, encoding="utf-8") as f:
        return [x.strip() for x in f.read().splitlines()].index(code) + 1


# -- dumps, ranks, graphs ---------------------------------------------------------------------------
def test_dumps_lists_the_one_dump_of_a_dump_root(client: Any, mlp_dump: str) -> None:
    d = ok(client.get("/api/dumps"))
    assert d["total"] == 1 and d["begin"] == 0 and d["end"] == 1
    assert d["items"][0]["path"] == mlp_dump


def test_dumps_of_a_parent_folder_lets_the_user_choose(sample_client: Any) -> None:
    d = ok(sample_client.get("/api/dumps"))
    assert [x["id"] for x in d["items"] if not x["id"].startswith(("msprobe/", "torch_"))] == ["dp2", "single"]
    assert ok(sample_client.get("/api/info?dump=single"))["id"] == "single"
    assert len(ok(sample_client.get("/api/info?dump=dp2"))["ranks"]) == 2
    assert "no dump 'nope'" in err(sample_client.get("/api/info?dump=nope"), 404)


def test_info_is_the_cli_json_plus_a_watch_summary(client: Any, mlp_dump: str) -> None:
    from debugger.model import serialize

    info = ok(client.get("/api/info"))
    expected = json.loads(json.dumps(serialize.dump_info(open_dump(mlp_dump))))
    assert {k: info[k] for k in expected} == expected
    assert info["watch"]["watchpoints"] == 0


def test_graphs_of_a_rank(client: Any) -> None:
    g = ok(client.get("/api/ranks/0/graphs"))
    assert g["total"] == 1
    assert g["items"][0]["graph"] == 0 and g["items"][0]["iterations"] == [0, 1]
    assert sum(g["items"][0]["kinds"].values()) == g["items"][0]["nodes"]


def test_kinds_are_the_librarys_and_cover_every_node_of_the_dump(client: Any) -> None:
    answer = ok(client.get("/api/kinds"))
    kinds = answer["items"]
    assert kinds == [getattr(k, "value", k) for k in KINDS] and "weight" in kinds
    # every kind has its colour, the one the graph export draws with
    assert set(answer["colors"]) == set(kinds) and answer["colors"]["weight"] == export.KIND_COLORS["weight"]
    seen = {k for g in ok(client.get("/api/ranks/0/graphs"))["items"] for k in g["kinds"]}
    assert seen and seen <= set(kinds)


def test_unknown_rank_graph_and_node_are_404_json(client: Any) -> None:
    assert "no rank 7" in err(client.get("/api/ranks/7/graphs"), 404)
    assert "no graph 3" in err(client.get("/api/ranks/0/graphs/3/scope"), 404)
    assert "no node 'nope'" in err(client.get("/api/ranks/0/graphs/0/node?node=nope"), 404)
    assert err(client.get("/api/no/such/route"), 404)


# -- paging -------------------------------------------------------------------------------------------
def test_pages_echo_begin_end_total(client: Any) -> None:
    whole = ok(client.get("/api/conditions"))
    assert whole["begin"] == 0 and whole["end"] == whole["total"] == len(whole["items"])
    part = ok(client.get("/api/conditions?begin=2&end=5"))
    assert (part["begin"], part["end"], part["total"]) == (2, 5, whole["total"])
    assert part["items"] == whole["items"][2:5]
    assert ok(client.get(f"/api/conditions?begin={whole['total']}"))["items"] == []


@pytest.mark.parametrize("query, message", [
    ("begin=-1", "begin index (-1) is negative"),
    ("begin=0&end=999", "end index (999) out of bounds ({total})"),
    ("begin=4&end=2", "end index (2) is before begin index (4)"),
    ("begin=999", "begin index (999) out of bounds ({total})"),
    ("begin=x", "bad begin 'x': expected an integer"),
])
def test_bad_ranges_are_400_with_the_checker_message(client: Any, query: str, message: str) -> None:
    total = ok(client.get("/api/conditions"))["total"]
    assert err(client.get(f"/api/conditions?{query}"), 400) == message.format(total=total)


def test_page_checker_is_one_function() -> None:
    from debugger.query import InvalidQueryError, check_range, page

    assert check_range(0, None, 3) == (0, 3)
    assert check_range(1, -1, 3) == (1, 3)
    assert check_range(0, None, 10_000, limit=100) == (0, 100)
    with pytest.raises(InvalidQueryError, match=re.escape("end index (4) out of bounds (3)")):
        check_range(0, 4, 3)
    p = page(list("abcde"), 1, 3)
    assert (p.begin, p.end, p.total, p.items) == (1, 3, 5, ["b", "c"])


# -- graph: scopes, folding, edges, search --------------------------------------------------------------
MOMENTUM = "Default/optimizer-Momentum"


def test_same_type_siblings_fold_into_a_group(client: Any) -> None:
    v = ok(client.get(f"/api/ranks/0/graphs/0/scope?path={MOMENTUM}&fold=3"))
    groups = [c for c in v["children"]["items"] if c["type"] == "group"]
    assert [g["name"] for g in groups] == ["ApplyMomentum[4]"]
    assert sum(groups[0]["kinds"].values()) == groups[0]["count"] == 4
    # edges only between children of this page
    root = ok(client.get("/api/ranks/0/graphs/0/scope"))
    ids = {c["id"] for c in root["children"]["items"]}
    assert {"Default", "Gradients"} <= ids
    assert root["edges"] and all(e["source"] in ids and e["target"] in ids and e["count"] >= 1 for e in root["edges"])


def test_a_folded_group_opens_into_its_members(client: Any) -> None:
    outer = ok(client.get(f"/api/ranks/0/graphs/0/scope?path={MOMENTUM}&fold=3"))
    group = next(c for c in outer["children"]["items"] if c["type"] == "group")
    inner = ok(client.get(f"/api/ranks/0/graphs/0/scope?path={group['path']}&fold=3"))
    assert inner["type"] == "group"
    assert inner["children"]["total"] == group["count"]
    assert {c["op_type"] for c in inner["children"]["items"]} == {"ApplyMomentum"}
    assert inner["parents"][-1]["path"] == group["path"]


def test_weights_and_constants_are_rows_of_the_ops_that_read_them(client: Any) -> None:
    root = ok(client.get("/api/ranks/0/graphs/0/scope"))
    # (a constant no node reads, Default_data-0, stays where it is)
    assert not [c for c in root["children"]["items"] if c.get("kind") in ("weight", "optimizer_state")
                or c.get("op_type") == "Parameter" and c["type"] == "group"]
    # each ApplyMomentum draws the weight it updates and its moment beside it, not as edges from the root
    opt = ok(client.get(f"/api/ranks/0/graphs/0/scope?path={MOMENTUM}"))
    apply0 = next(c for c in opt["children"]["items"] if c["name"] == "ApplyMomentum-op0")
    kinds = [r["kind"] for r in apply0["attached"]]
    assert "weight" in kinds and "optimizer_state" in kinds
    weight = next(r for r in apply0["attached"] if r["kind"] == "weight")
    assert weight["type"].startswith("float32 ") and weight["marks"] == {}
    # the weight's place is the level of its first reader (the forward layer), as search and the node say
    node = ok(client.get(f"/api/ranks/0/graphs/0/node?node={weight['node']}"))
    reader = ok(client.get(f"/api/ranks/0/graphs/0/scope?path={node['place']}"))
    assert any(weight["node"] in [r["node"] for r in c.get("attached", [])] for c in reader["children"]["items"])
    found = ok(client.get(f"/api/ranks/0/graphs/0/search?q={weight['node']}"))["items"]
    assert next(x for x in found if x["node"] == weight["node"])["place"] == node["place"]


def test_an_attached_weight_carries_its_own_marks_and_its_scope_takes_them_one_level_up(mlp_dump: str) -> None:
    from debugger import query

    graph = open_dump(mlp_dump).rank(0).graph(0)
    fc = query.scope_view(graph, MOMENTUM)
    weight = next(r["node"] for c in fc["children"]["items"] for r in c.get("attached", []) if r["kind"] == "weight")
    place = query.place_of(graph, weight)
    v = query.scope_view(graph, place, marks={"hit": [weight]})
    rows = [r for c in v["children"]["items"] for r in c.get("attached", []) if r["node"] == weight]
    assert rows and all(r["marks"] == {"hit": 1} for r in rows)
    assert not any(c["marks"] for c in v["children"]["items"])        # the reader itself is not marked
    up = query.scope_view(graph, place.rsplit("/", 1)[0], marks={"hit": [weight]})
    assert sum(c["marks"].get("hit", 0) for c in up["children"]["items"]) == 1


def test_fold_threshold_and_routing_ops_are_parameters(client: Any) -> None:
    unfolded = ok(client.get("/api/ranks/0/graphs/0/scope?fold=0"))
    assert not [c for c in unfolded["children"]["items"] if c["type"] == "group"]
    hidden = ok(client.get("/api/ranks/0/graphs/0/scope?path=Default/optimizer-Momentum"))
    shown = ok(client.get("/api/ranks/0/graphs/0/scope?path=Default/optimizer-Momentum&framework=1&fold=0"))
    ops = lambda v: {c.get("op_type") for c in v["children"]["items"]}  # noqa: E731
    assert "UpdateState" not in ops(hidden) and "UpdateState" in ops(shown)


def test_scope_children_page_and_edges_follow_the_page(client: Any) -> None:
    full = ok(client.get("/api/ranks/0/graphs/0/scope?fold=0"))
    one = ok(client.get("/api/ranks/0/graphs/0/scope?fold=0&begin=0&end=1"))
    assert one["children"]["total"] == full["children"]["total"] and len(one["children"]["items"]) == 1
    assert one["edges"] == []


def test_unknown_scope_is_404(client: Any) -> None:
    assert "no scope 'Nope/x'" in err(client.get("/api/ranks/0/graphs/0/scope?path=Nope/x"), 404)


def test_search_returns_the_place_that_shows_the_node(client: Any) -> None:
    s = ok(client.get("/api/ranks/0/graphs/0/search?q=matmul"))
    assert s["total"] > 0 and s["q"] == "matmul"
    for hit in s["items"][:3]:
        assert "matmul" in hit["node"].lower()
        place = ok(client.get(f"/api/ranks/0/graphs/0/scope?path={hit['place']}&framework=1"))
        assert hit["node"] in {c["id"] for c in place["children"]["items"]}
    assert err(client.get("/api/ranks/0/graphs/0/search?q="), 400)


def test_scope_marks_the_nodes_of_a_code_line(client: Any, mlp_script: str) -> None:
    loc = f"{os.path.basename(mlp_script)}:{line_of(mlp_script, 'x = self.fc1(x)')}"
    code = ok(client.get(f"/api/ranks/0/code/nodes?location={loc}"))
    # that line made fc1's MatMul and BiasAdd, and in backward fc1's weight and bias gradients
    made = sorted((n["direction"], n["op_type"]) for n in code["items"])
    assert made == [("backward", "BiasAddGrad"), ("backward", "MatMul"), ("forward", "BiasAdd"), ("forward", "MatMul")]
    v = ok(client.get(f"/api/ranks/0/graphs/0/scope?line={loc}"))
    marked = {c["name"]: c["marks"] for c in v["children"]["items"] if c["marks"]}
    fwd = sum(m.get("forward", 0) for m in marked.values())
    bwd = sum(m.get("backward", 0) for m in marked.values())
    assert fwd == sum(n["direction"] == "forward" for n in code["items"])
    assert bwd == sum(n["direction"] == "backward" for n in code["items"])


# -- nodes and tensors ---------------------------------------------------------------------------------
def test_node_has_kind_inputs_outputs_stack_and_tensors(sample_client: Any) -> None:
    n = ok(sample_client.get(f"/api/ranks/0/graphs/0/node?dump=single&node={FC1_MATMUL}&iteration=2"))
    assert n["op_type"] == "MatMul" and n["kind"] == "other" and n["name"] == "MatMul-op0"
    assert n["stack"][0]["file"].endswith("make_sample.py") and not n["stack"][0]["is_framework"]
    assert [f["is_framework"] for f in n["stack"]] == sorted(f["is_framework"] for f in n["stack"])
    out = next(t for t in n["tensors"] if t["io"] == "output")
    assert out["dumped"] and out["shape"] == [4, 16] and out["dtype"] == "float32"
    assert [t["slot"] for t in n["tensors"] if t["io"] == "input"] == [0, 1, 2, 3]
    assert n["iterations"] == list(range(8))
    assert n["place"] == "Default/network-WithLossCell/_backbone-Net/fc1-Dense"


def test_tensor_statistics_are_the_cli_stats_shape(sample_client: Any, sample_root: str) -> None:
    t = ok(sample_client.get(f"/api/ranks/0/graphs/0/tensor?dump=single&node={FC1_MATMUL}&iteration=2"))
    assert list(t["stats"]) == list(STAT_NAMES)
    ref = open_dump(os.path.join(sample_root, "single")).rank(0).tensor(0, 2, FC1_MATMUL)
    want = tensor_stats(ref.value()).to_dict()
    for k, v in want.items():
        assert t["stats"][k] == pytest.approx(v), k
    assert sum(t["histogram"]["counts"]) == want["count"]
    assert t["previous_iteration"] == 1
    assert t["tensor"]["shape"] == [4, 16]


def test_iteration_changes_the_statistics(sample_client: Any) -> None:
    a = ok(sample_client.get(f"/api/ranks/0/graphs/0/tensor?dump=single&node={FC1_MATMUL}&iteration=1"))
    b = ok(sample_client.get(f"/api/ranks/0/graphs/0/tensor?dump=single&node={FC1_MATMUL}&iteration=2"))
    assert a["stats"]["max"] != b["stats"]["max"]


def test_history_has_one_entry_per_iteration(sample_client: Any) -> None:
    h = ok(sample_client.get(f"/api/ranks/0/graphs/0/tensor/history?dump=single&node={FC1_MATMUL}&iteration=0"))
    assert h["total"] == 8 and [x["iteration"] for x in h["items"]] == list(range(8))
    assert all(list(x["stats"]) == list(STAT_NAMES) for x in h["items"])
    part = ok(sample_client.get(f"/api/ranks/0/graphs/0/tensor/history?dump=single&node={FC1_MATMUL}&begin=6&end=8"))
    assert [x["iteration"] for x in part["items"]] == [6, 7]


def test_values_of_a_slice_match_the_library(sample_client: Any, sample_root: str) -> None:
    ref = open_dump(os.path.join(sample_root, "single")).rank(0).tensor(0, 2, FC1_MATMUL, "input", 0)
    full = np.asarray(ref.value())
    v = ok(sample_client.get(f"/api/ranks/0/graphs/0/tensor/values?dump=single&node={FC1_MATMUL}"
                             "&iteration=2&io=input&slot=0&slice=[1, 0, :, 2:5]"))
    assert v["slice"] == "[1, 0, :, 2:5]" and v["shape"] == [8, 3] and not v["truncated"]
    np.testing.assert_array_equal(np.array(v["values"], dtype=np.float32), full[1, 0, :, 2:5])
    default = ok(sample_client.get(f"/api/ranks/0/graphs/0/tensor/values?dump=single&node={FC1_MATMUL}"
                                   "&iteration=2&io=input&slot=0"))
    assert default["slice"] == "[0, 0, :, :]" and default["shape"] == [8, 8]


def test_values_are_capped(sample_client: Any) -> None:
    v = ok(sample_client.get("/api/ranks/0/graphs/0/tensor/values?dump=single&node=fc1.weight&iteration=0&cap=100"))
    assert v["shape"] == [16, 128] and v["truncated"]
    assert v["shown"][0] * v["shown"][1] <= 100 and v["cap"] == 100


@pytest.mark.parametrize("slc, message", [
    ("[0, 0, 0, 0, 0]", "5 indices for 4 dimensions"),
    ("[a]", "expected integers"),
    ("[0, :, :]", "leaves 3 dimensions"),
    ("[9]", "index 9 out of range for dimension 0 of size 4"),
])
def test_bad_slices_are_400(sample_client: Any, slc: str, message: str) -> None:
    e = err(sample_client.get(f"/api/ranks/0/graphs/0/tensor/values?dump=single&node={FC1_MATMUL}"
                              f"&iteration=2&io=input&slot=0&slice={slc}"), 400)
    assert message in e


def test_diff_is_current_minus_previous(sample_client: Any, sample_root: str) -> None:
    rank = open_dump(os.path.join(sample_root, "single")).rank(0)
    d = ok(sample_client.get("/api/ranks/0/graphs/0/tensor/diff?dump=single&node=conv1.weight&iteration=3&slice=[0, 0, :, :]"))
    assert (d["iteration"], d["previous_iteration"]) == (3, 2)
    cur, prev = (np.asarray(rank.tensor(0, it, "conv1.weight").value())[0, 0] for it in (3, 2))
    np.testing.assert_allclose(np.array(d["difference"]["values"]), cur.astype(np.float64) - prev, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(np.array(d["previous"]["values"], dtype=np.float32), prev)
    assert set(d["stats"]) == {"current", "previous", "difference"}
    # the frozen layer: no difference at all
    frozen = ok(sample_client.get("/api/ranks/0/graphs/0/tensor/diff?dump=single&node=fc2.weight&iteration=3"))
    assert frozen["stats"]["difference"]["zeros"] == frozen["stats"]["difference"]["count"]
    # iteration 0 of a weight: the previous value is the one before that iteration's update, which its
    # forward kernel read -- the value weight_not_changed compares it with (the frozen fc2: the same)
    first = ok(sample_client.get("/api/ranks/0/graphs/0/tensor/diff?dump=single&node=fc2.weight&iteration=0"))
    assert first["previous_is"] == "before_update" and first["previous_iteration"] == 0
    assert first["previous_tensor"]["io"] == "input" and first["previous_tensor"]["op_type"] == "MatMul"
    assert first["stats"]["difference"]["zeros"] == first["stats"]["difference"]["count"]
    moving = ok(sample_client.get("/api/ranks/0/graphs/0/tensor/diff?dump=single&node=conv1.weight&iteration=0"))
    assert moving["previous_is"] == "before_update" and moving["stats"]["difference"]["zeros"] < \
        moving["stats"]["difference"]["count"]
    assert d["previous_is"] == "earlier_run"
    # an activation has no value before an update: the message says why, in words, with no path
    # (a state, not a miss: 200, so that the page's question logs no error)
    none = ok(sample_client.get(f"/api/ranks/0/graphs/0/tensor/diff?dump=single&node={FC1_MATMUL}&iteration=0"))
    assert none["available"] is False and d["available"] is True
    assert "has no earlier value to compare with (no previous iteration)" in none["reason"] and os.sep + "rank_0" not in none["reason"]


def test_npy_download_round_trips(client: Any, mlp_dump: str) -> None:
    node = a_node(client, "weight")
    r = client.get(f"/api/ranks/0/graphs/0/tensor/npy?node={node}&iteration=1")
    assert r.status_code == 200 and r.headers["Content-Disposition"].startswith("attachment; filename=")
    got = np.load(io.BytesIO(r.data))
    np.testing.assert_array_equal(got, open_dump(mlp_dump).rank(0).tensor(0, 1, node).value())


def test_nonfinite_values_are_strings_and_json_stays_strict(make_app: Any, tmp_path: Any) -> None:
    def plant(rank: int, it: int, node: str, io: str, slot: int, default: np.ndarray) -> np.ndarray | None:
        if node.endswith("fc1-Dense/MatMul-op0") and io == "output" and it == 1:
            a = np.array(default, dtype=np.float32, copy=True)
            a.flat[0], a.flat[1], a.flat[2] = np.nan, np.inf, -np.inf
            return a
        return None

    root = dumpmaker.make_dump(str(tmp_path / "nan"), iterations=2, values=plant)
    c = make_app(root).test_client()
    node = next(x["node"] for x in ok(c.get("/api/ranks/0/graphs/0/search?q=fc1-Dense/MatMul"))["items"]
                if not x["is_backward"])
    v = ok(c.get(f"/api/ranks/0/graphs/0/tensor/values?node={node}&iteration=1&slice=[:, :]"))
    assert v["values"][0][:3] == ["NaN", "Inf", "-Inf"]
    t = ok(c.get(f"/api/ranks/0/graphs/0/tensor?node={node}&iteration=1"))
    assert (t["stats"]["nan"], t["stats"]["pos_inf"], t["stats"]["neg_inf"]) == (1, 1, 1)
    assert all(isinstance(x, (int, float)) and math.isfinite(x) for x in t["histogram"]["edges"])


# -- code ------------------------------------------------------------------------------------------------
def test_code_files_hide_framework_files_unless_asked(sample_client: Any) -> None:
    user = ok(sample_client.get("/api/ranks/0/code/files?dump=single"))
    assert [f["name"] for f in user["items"]] == ["make_sample.py"]
    everything = ok(sample_client.get("/api/ranks/0/code/files?dump=single&framework=1"))
    assert everything["total"] > user["total"]
    assert [f["is_framework"] for f in everything["items"]] == sorted(f["is_framework"] for f in everything["items"])


def test_code_lines_and_source_text(sample_client: Any, sample_root: str) -> None:
    lines = ok(sample_client.get("/api/ranks/0/code/lines?dump=single&file=make_sample.py"))
    by_line = {x["line"]: x for x in lines["items"]}
    assert by_line[200]["code"] == "x = self.sigmoid(self.fc1(x))"
    assert by_line[200]["forward"] == 3 and by_line[200]["backward"] >= 1
    src = ok(sample_client.get("/api/ranks/0/code/source?dump=single&file=make_sample.py"))
    # the stacks hold the path the sample was made at; the server shows the copy under the folder it serves,
    # whether or not that recorded folder exists on this machine
    assert src["file"].endswith("/dumps_sample/make_sample.py")
    assert src["exists"] and src["found"] == os.path.realpath(os.path.join(sample_root, "make_sample.py"))
    assert "self.sigmoid(self.fc1(x))" in src["text"].splitlines()[199]


def test_a_line_that_defines_a_layer_lists_the_layers_nodes(sample_client: Any) -> None:
    """``self.fc2 = nn.Dense(...)`` in ``__init__`` makes no node; clicking it lists fc2's nodes."""
    lines = ok(sample_client.get("/api/ranks/0/code/lines?dump=single&file=make_sample.py"))
    by_line = {x["line"]: x for x in lines["items"]}
    assert by_line[192]["layer"] == "fc2" and by_line[192]["definition"] > 0
    assert by_line[192]["forward"] == by_line[192]["backward"] == 0
    assert "layer" not in by_line[200]                     # a line that ran keeps its own nodes
    r = ok(sample_client.get("/api/ranks/0/code/nodes?dump=single&location=make_sample.py:192"))
    assert {n["direction"] for n in r["items"]} == {"definition"} and len(r["items"]) == by_line[192]["definition"]
    names = {n["node"] for n in r["items"]}
    assert {"fc2.weight", "fc2.bias"} <= names
    assert all(n["param"] in (None, "fc2.weight", "fc2.bias") for n in r["items"])
    assert any(n["kind"] == "gradient" for n in r["items"]) and any(n["op_type"] == "MatMul" for n in r["items"])


def test_code_source_serves_only_files_named_by_the_stacks(sample_client: Any) -> None:
    assert "no source file" in err(sample_client.get("/api/ranks/0/code/source?dump=single&file=/etc/passwd"), 404)


def test_code_source_of_a_missing_file_says_so(make_app: Any, mlp_dump: str, mlp_script: str) -> None:
    # the script lies beside the dump, not in it: shown only from an allowed --source-root
    client = make_app(mlp_dump, SOURCE_ROOTS=[os.path.dirname(mlp_script)]).test_client()
    script, line = mlp_script, line_of(mlp_script, "x = self.fc1(x)")
    there = ok(client.get(f"/api/ranks/0/code/source?file={script}"))
    assert there["exists"] is True and there["text"].splitlines()[line - 1].strip() == "x = self.fc1(x)"
    os.remove(script)   # the stacks still name it: known to the dump, gone from this machine
    src = ok(client.get(f"/api/ranks/0/code/source?file={script}"))
    assert (src["file"], src["exists"], src["text"]) == (script, False, None)
    # a framework file of the stacks (the site-packages of the machine that made the dump): outside the
    # served dump and every --source-root, so never read, whether or not it exists here
    fw = ok(client.get(f"/api/ranks/0/code/source?file={dumpmaker.SITE}/nn/layer/basic.py"))
    assert fw["file"] == f"{dumpmaker.SITE}/nn/layer/basic.py"
    assert fw["exists"] is False and fw["text"] is None and fw["found"] is None


def test_code_source_outside_the_roots_is_never_read(client: Any, mlp_script: str) -> None:
    src = ok(client.get(f"/api/ranks/0/code/source?file={mlp_script}"))
    assert src["exists"] is False and src["text"] is None and src["found"] is None


def test_nodes_of_a_line_forward_first(sample_client: Any) -> None:
    r = ok(sample_client.get("/api/ranks/0/code/nodes?dump=single&location=make_sample.py:200"))
    dirs = [n["direction"] for n in r["items"]]
    assert dirs == sorted(dirs, key=lambda d: d != "forward") and "backward" in dirs
    assert {n["name"] for n in r["items"] if n["direction"] == "forward"} == {"MatMul-op0", "BiasAdd-op0", "Sigmoid-op0"}
    assert r["files"] and r["line"] == 200
    assert "expected FILE:LINE" in err(sample_client.get("/api/ranks/0/code/nodes?dump=single&location=oops"), 400)


# -- watchpoints -----------------------------------------------------------------------------------------
def test_conditions_are_the_registry(client: Any) -> None:
    c = ok(client.get("/api/conditions"))
    assert c["items"] == json.loads(json.dumps(watch.describe_conditions()))
    assert c["presets"] == watch.PRESETS


def test_a_bad_watchpoint_is_400(client: Any) -> None:
    assert "unknown condition" in err(client.post("/api/watchpoints", json={"name": "nope"}), 400)
    assert err(client.post("/api/watchpoints", json={"name": "gradient_vanishing", "params": {"abs_mean_lt": "x"}}), 400)
    assert "JSON object" in err(client.post("/api/watchpoints", data="[]", content_type="application/json"), 400)


def test_watchpoint_hits_are_the_scan_hits(sample_client: Any, sample_root: str) -> None:
    r = ok(sample_client.post("/api/watchpoints?dump=single", json={"name": "weight_not_changed"}), 201)
    wid = r["created"][0]["id"]
    assert r["watchpoints"][0]["text"].startswith("weight_not_changed:")
    hits = ok(sample_client.get("/api/hits?dump=single&rank=0&all=1"))
    res = watch.scan(open_dump(os.path.join(sample_root, "single")), [watch.Watchpoint.parse("weight_not_changed")], jobs=1)
    assert [{k: h[k] for k in res.hits[0].to_dict()} for h in hits["items"]] == \
        json.loads(json.dumps([h.to_dict() for h in res.hits]))
    assert {h["node"] for h in hits["items"]} >= {"fc2.weight", "fc2.bias"}
    assert all(h["watchpoint_id"] == wid for h in hits["items"])
    assert hits["groups"] == [{"id": wid, "text": r["created"][0]["text"], "name": "weight_not_changed", "hits": hits["total"]}]
    assert hits["checked"] == list(range(8))
    # the graph marks them in their iteration, the node lists them
    it = hits["items"][0]["iteration"]
    scope = ok(sample_client.get(f"/api/ranks/0/graphs/0/scope?dump=single&iteration={it}"))
    assert sum(c["marks"].get("hit", 0) for c in scope["children"]["items"]) >= 2
    node = ok(sample_client.get(f"/api/ranks/0/graphs/0/node?dump=single&node=fc2.weight&iteration={it}"))
    assert node["hits"] and node["hits"][0]["watchpoint"] == "weight_not_changed"
    assert ok(sample_client.get("/api/info?dump=single"))["watch"]["hits"] == hits["total"]
    ok(sample_client.delete(f"/api/watchpoints/{wid}?dump=single"))
    assert ok(sample_client.get("/api/hits?dump=single&all=1"))["total"] == 0
    assert err(sample_client.delete(f"/api/watchpoints/{wid}?dump=single"), 404)


def test_run_to_next_hit_stops_at_the_first_iteration_with_a_hit(sample_client: Any) -> None:
    assert "no watchpoint" in err(sample_client.post("/api/replay/next_hit?dump=single", json={"rank": 0, "iteration": 0}), 400)
    # conv1's gradient spikes (max |grad| 0.57) in iteration 2 only among the first ones
    ok(sample_client.post("/api/watchpoints?dump=single", json={"spec": "gradient_too_large:max_gt=0.5"}), 201)
    r = ok(sample_client.post("/api/replay/next_hit?dump=single", json={"rank": 0, "iteration": -1}))
    assert r["iteration"] is not None and r["checked"] == list(range(r["iteration"] + 1))
    assert r["hits"]["items"] and all(h["iteration"] == r["iteration"] for h in r["hits"]["items"])
    after = ok(sample_client.post("/api/replay/next_hit?dump=single", json={"rank": 0, "iteration": 7}))
    assert after["iteration"] is None and after["checked"] == []


def test_a_preset_adds_every_watchpoint(client: Any) -> None:
    r = ok(client.post("/api/watchpoints", json={"preset": "recommended"}), 201)
    assert [w["name"] for w in r["created"]] == [s.split(":")[0] for s in watch.PRESETS["recommended"]]
    hits = ok(client.get("/api/hits?iteration=1"))
    assert hits["checked"] == [1]
    ok(client.delete("/api/watchpoints"))
    assert ok(client.get("/api/watchpoints"))["total"] == 0


# -- ranks ------------------------------------------------------------------------------------------------
def test_rank_switch_in_a_two_rank_dump(sample_client: Any) -> None:
    r = ok(sample_client.get("/api/ranks?dump=dp2"))
    assert [x["rank"] for x in r["items"]] == [0, 1]
    a = ok(sample_client.get("/api/ranks/0/graphs/0/tensor?dump=dp2&node=Default/grad_reducer-DistributedGradReducer/AllReduce-op0&io=input&iteration=0"))
    b = ok(sample_client.get("/api/ranks/1/graphs/0/tensor?dump=dp2&node=Default/grad_reducer-DistributedGradReducer/AllReduce-op0&io=input&iteration=0"))
    assert a["tensor"]["rank"] == 0 and b["tensor"]["rank"] == 1
    assert a["stats"] != b["stats"]        # each rank reduces its own gradient


def test_compare_ranks_is_the_cli_compare_json(sample_client: Any, sample_root: str) -> None:
    from debugger.compare import compare_ranks

    r = sample_client.get("/api/compare?dump=dp2&base=0")
    body = r.get_json()
    assert r.status_code == 200 and body["available"] is True and body["base"] == 0
    want = json.loads(json.dumps(compare_ranks(open_dump(os.path.join(sample_root, "dp2")), base=0, jobs=1).to_dict()))
    want.pop("pairs")
    got = body["result"]
    for k in ("mode", "base", "ranks", "iterations", "first_divergence"):
        assert got[k] == want[k], k
    assert got["summary"]["pairs"] == want["summary"]["pairs"] > 0
    assert got["summary"]["error"] == 0 and got["first_divergence"] is None   # dp2 keeps its invariants
    every = ok(sample_client.get("/api/compare?dump=dp2&base=0&all=1&begin=0&end=3"))
    assert every["pairs"]["total"] == want["summary"]["pairs"] and len(every["pairs"]["items"]) == 3
    assert set(every["pairs"]["items"][0]) >= {"iteration", "a", "b", "node", "io", "slot", "metrics", "grade"}
    assert "needs two or more" in err(sample_client.get("/api/compare?dump=single"), 400)


# -- the page and the seams -----------------------------------------------------------------------------
def test_the_page_and_its_modules_are_served(client: Any) -> None:
    page = client.get("/")
    assert page.status_code == 200 and b'type="module"' in page.data
    for js in ("main.js", "api.js", "state.js", "layout.js", "layout-worker.js", "views/graph.js"):
        assert client.get(f"/static/js/{js}").status_code == 200, js


def test_static_files_need_no_internet() -> None:
    static = os.path.join(ROOT, "web", "static")
    for d, _, files in os.walk(static):
        for f in files:
            text = open(os.path.join(d, f), encoding="utf-8").read()
            for url in re.findall(r"https?://[^\s'\")]+", text):
                assert url.startswith("http://www.w3.org/2000/svg"), f"{f}: {url}"


def test_only_api_js_calls_fetch() -> None:
    js = os.path.join(ROOT, "web", "static", "js")
    callers = [os.path.relpath(os.path.join(d, f), js) for d, _, fs in os.walk(js) for f in fs
               if "fetch(" in open(os.path.join(d, f), encoding="utf-8").read()]
    assert callers == ["api.js"]


def test_the_web_layer_only_asks_the_library() -> None:
    web = os.path.join(ROOT, "web")
    for f in os.listdir(web):
        if f.endswith(".py"):
            text = open(os.path.join(web, f), encoding="utf-8").read()
            assert not re.search(r"\bnp\.load\b|numpy\.load|\bopen\(|debugger\.formats|import numpy", text), f


def test_the_library_never_imports_flask() -> None:
    lib = os.path.join(ROOT, "debugger")
    for d, _, files in os.walk(lib):
        for f in files:
            if f.endswith(".py"):
                assert not re.search(r"^\s*(from|import) (flask|werkzeug)\b", open(os.path.join(d, f)).read(), re.M), f


def test_app_binds_loopback_by_default(client: Any) -> None:
    from tdbg_web import DEFAULT_CONFIG

    assert DEFAULT_CONFIG["HOST"] == "127.0.0.1"


# -- graph export -------------------------------------------------------------------------------------
OPTIMIZER = "Default/optimizer-Momentum"


def test_export_dot_is_an_attachment_of_the_scope_level(sample_client: Any, sample_root: str) -> None:
    import pydot

    from debugger import query

    resp = sample_client.get(f"/api/ranks/0/graphs/0/export?dump=single&scope={OPTIMIZER}&format=dot")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.headers["Content-Disposition"] == 'attachment; filename="rank0_graph0_optimizer-Momentum.dot"'
    assert resp.mimetype == "text/vnd.graphviz"
    (g,) = pydot.graph_from_dot_data(resp.get_data(as_text=True))
    names = {n.get_name().strip('"') for n in g.get_nodes()} - {"node", "edge", "graph"}
    graph = open_dump(os.path.join(sample_root, "single")).rank(0).graph(0)
    assert names == {c["id"] for c in query.scope_view(graph, OPTIMIZER)["children"]["items"]}
    assert f"{OPTIMIZER}/ApplyMomentum[7]" in names
    # fold and framework are the scope route's: unfolded, the seven kernels are there one by one
    unfolded = sample_client.get(f"/api/ranks/0/graphs/0/export?dump=single&scope={OPTIMIZER}&fold=0&framework=1")
    assert unfolded.status_code == 200 and unfolded.get_data(as_text=True).count("ApplyMomentum-op") >= 7
    root = sample_client.get("/api/ranks/0/graphs/0/export?dump=single")       # defaults: root scope, DOT
    assert root.status_code == 200 and 'filename="rank0_graph0_root.dot"' in root.headers["Content-Disposition"]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_export_svg_when_graphviz_is_there(sample_client: Any) -> None:
    import xml.etree.ElementTree as ET

    assert ok(sample_client.get("/api/export/formats")) == {"formats": ["dot", "svg", "png"], "graphviz": True}
    resp = sample_client.get("/api/ranks/0/graphs/0/export?dump=dp2&scope=Default&format=svg")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.mimetype == "image/svg+xml" and resp.headers["Content-Disposition"].endswith('Default.svg"')
    svg = ET.fromstring(resp.data)
    texts = {t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")}
    assert {"network-WithLossCell/", "optimizer-Momentum/"} <= texts


def test_export_bad_format_unknown_scope_and_no_graphviz(sample_client: Any, monkeypatch: Any, tmp_path: Any) -> None:
    assert "bad format 'pdf'" in err(sample_client.get("/api/ranks/0/graphs/0/export?dump=single&format=pdf"), 400)
    assert "no scope 'nope'" in err(sample_client.get("/api/ranks/0/graphs/0/export?dump=single&scope=nope"), 404)
    assert "no graph 5" in err(sample_client.get("/api/ranks/0/graphs/5/export?dump=single"), 404)
    monkeypatch.setenv("PATH", str(tmp_path))          # a server without Graphviz
    assert ok(sample_client.get("/api/export/formats")) == {"formats": ["dot"], "graphviz": False}
    msg = err(sample_client.get("/api/ranks/0/graphs/0/export?dump=single&format=svg"), 400)
    assert "Graphviz" in msg and "apt-get install graphviz" in msg
    assert sample_client.get("/api/ranks/0/graphs/0/export?dump=single&format=dot").status_code == 200


def test_a_tensor_replaced_while_serving_is_read_anew(make_app: Any, mlp_dump: str) -> None:
    """Statistics and headers are keyed by the file as it is now, not as it was listed."""
    c = make_app(mlp_dump).test_client()
    node = a_node(c, "weight")
    url = f"/api/ranks/0/graphs/0/tensor?node={node}&iteration=1"
    before = ok(c.get(url))["stats"]
    path = open_dump(mlp_dump).rank(0).tensor(0, 1, node).location
    old = np.load(path)
    np.save(path, np.concatenate([old.ravel(), np.full(5, 7.0, old.dtype)]))   # another size: a new header too
    after = ok(c.get(url))["stats"]
    assert after["count"] == before["count"] + 5 and after["max"] == 7.0
    hist = ok(c.get(f"/api/ranks/0/graphs/0/tensor/history?node={node}&iteration=1"))
    assert [i["stats"]["count"] for i in hist["items"] if i["iteration"] == 1] == [after["count"]]


# -- issue 10: triage, persistence, idempotent presets, roll-up -------------------------------------
def test_triage_runs_in_the_background_then_answers_from_the_cache(make_app: Any, sample_root: str) -> None:
    import time as _t

    c = make_app(sample_root).test_client()
    r = c.get("/api/triage?dump=single").get_json()
    assert r["state"] in ("running", "done")
    deadline = _t.time() + 60
    while r["state"] == "running" and _t.time() < deadline:
        _t.sleep(0.1)
        r = c.get("/api/triage?dump=single").get_json()
    t = r["result"]
    names = [f["watchpoint"]["name"] for f in t["findings"]]
    assert {"weight_not_changed", "activation_saturated_layer"} <= set(names)
    frozen = t["findings"][names.index("weight_not_changed")]["first"]
    assert frozen["param"].startswith("fc2.") and frozen["source"].endswith("make_sample.py:201")
    assert t["loss"][0]["rank"] == 0 and len(t["loss"][0]["points"]) == 8 and t["agreement"] is None
    assert t["health"]["status"] == "problems"
    # a new server on the same cache: done at once, and the chooser knows the health
    c2 = make_app(sample_root).test_client()
    assert c2.get("/api/triage?dump=single").get_json()["state"] == "done"
    health = {d["id"]: d["health"] for d in c2.get("/api/dumps").get_json()["items"]}
    assert health["single"]["problems"] == len(names)


def test_the_page_is_answered_while_a_cold_triage_runs(make_app: Any, sample_root: str) -> None:
    """A triage scans the whole dump; the page's other requests must not wait for it."""
    import time as _t

    c = make_app(sample_root).test_client()
    assert c.get("/api/triage?dump=single").get_json()["state"] == "running"
    node = "Default/network-WithLossCell/_backbone-Net/sigmoid-Sigmoid/Sigmoid-op0"
    t0 = _t.perf_counter()
    r = c.get(f"/api/ranks/0/graphs/0/tensor?dump=single&node={node}&iteration=7")
    waited = _t.perf_counter() - t0
    assert r.status_code == 200 and r.get_json()["stats"]["count"] > 0
    # answered before the triage finished: it did not queue behind the scan
    assert c.get("/api/triage?dump=single").get_json()["state"] == "running", f"waited {waited:.2f} s"
    deadline = _t.time() + 60
    while c.get("/api/triage?dump=single").get_json()["state"] == "running" and _t.time() < deadline:
        _t.sleep(0.1)
    assert c.get("/api/triage?dump=single").get_json()["state"] == "done"


def test_a_slow_tensor_does_not_hold_up_another(make_app: Any, tmp_path: Any) -> None:
    """The statistics of a big tensor take a while; a small tensor asked for meanwhile is answered first."""
    import threading
    import time as _t

    from debugger.formats.tdbg_h5.writer import DumpWriter
    from debugger.formats.records import GraphRecord, NodeRecord

    root = str(tmp_path / "d")
    with DumpWriter(root, rank=0) as w:
        w.write_graph(GraphRecord(0, "g", [NodeRecord("big", "Op", ""), NodeRecord("small", "Op", "")], [], ""))
        with w.iteration(0) as it:
            it.add(0, "big", "Op", "output", 0,
                   values=np.random.default_rng(0).standard_normal(24_000_000, dtype=np.float32))
            it.add(0, "small", "Op", "output", 0, values=np.ones(4, np.float32))
    app = make_app(root)
    done: dict[str, float] = {}

    def ask(node: str) -> None:
        r = app.test_client().get(f"/api/ranks/0/graphs/0/tensor?node={node}&iteration=0")
        assert r.status_code == 200
        done[node] = _t.perf_counter()

    big = threading.Thread(target=ask, args=("big",))
    big.start()
    _t.sleep(0.05)
    ask("small")
    big.join()
    assert done["small"] < done["big"], "the small tensor waited for the big one"


def test_watchpoints_persist_per_dump_and_a_preset_twice_adds_nothing(make_app: Any, sample_root: str) -> None:
    c = make_app(sample_root).test_client()
    first = c.post("/api/watchpoints?dump=single", json={"preset": "recommended"}).get_json()
    again = c.post("/api/watchpoints?dump=single", json={"preset": "recommended"}).get_json()
    assert len(first["created"]) == 7 and again["created"] == [] and len(again["watchpoints"]) == 7
    hits = c.get("/api/hits?dump=single&rank=0&iteration=2").get_json()
    assert hits["total"] == len({(h["watchpoint"], h["node"], h["io"], h["slot"]) for h in hits["items"]})
    c2 = make_app(sample_root).test_client()          # a restarted server, same cache folder
    assert [w["text"] for w in c2.get("/api/watchpoints?dump=single").get_json()["items"]] == \
        [w["text"] for w in first["watchpoints"]]
    assert c2.get("/api/watchpoints?dump=dp2").get_json()["total"] == 0       # per dump
    assert c2.get("/api/hits?dump=single&rank=0&iteration=2").get_json()["items"] == hits["items"]
    # hits on fc2's weight and bias mark the layer that uses them
    scope = c2.get("/api/ranks/0/graphs/0/scope?dump=single&iteration=2"
                   "&path=Default/network-WithLossCell/_backbone-Net").get_json()
    marks = {x["name"]: x["marks"] for x in scope["children"]["items"]}
    assert marks["fc2-Dense"].get("hit")


def test_index_preloads_every_module_the_page_imports(client: Any) -> None:
    """Without a modulepreload link per module the browser finds them one import level at a time."""
    html = client.get("/").get_data(as_text=True)
    preloaded = set(re.findall(r'<link rel="modulepreload" href="/static/js/([^"]+)">', html))
    static = os.path.join(os.path.dirname(__file__), "..", "..", "web", "static", "js")
    modules = {os.path.relpath(os.path.join(d, f), static).replace(os.sep, "/")
               for d, _, files in os.walk(static) for f in files if f.endswith(".js")}
    assert modules - {"layout-worker.js"} == preloaded   # the worker loads in its own context
    for m in preloaded:
        assert client.get(f"/static/js/{m}").status_code == 200


def test_triage_with_start_0_starts_no_job(make_app: Any, mlp_dump: str) -> None:
    c = make_app(mlp_dump).test_client()
    assert c.get("/api/triage?start=0").get_json() == {"state": "idle"}
    assert c.get("/api/triage?start=0").get_json() == {"state": "idle"}       # still none
    assert c.get("/api/triage").get_json()["state"] in ("running", "done")     # the landing page's ask starts it


def test_a_row_names_its_weight_as_the_reading_layer_sees_it(sample_root: str) -> None:
    from debugger import query
    from debugger.query.attach import local_name

    assert local_name("transformer.h.1.ln_1.weight", "transformer.h.1.ln_1") == "weight"
    assert local_name("fc1.weight", "network._backbone.fc1") == "weight"          # MindSpore's longer module path
    assert local_name("exp_avg.fc1.weight", "fc1") == "exp_avg.fc1.weight"        # not the layer's own: whole
    assert local_name("fc1.weight", "") == "fc1.weight"
    graph = open_dump(os.path.join(sample_root, "single")).rank(0).graph(0)
    (matmul, _) = query.scope_view(graph, "Default/network-WithLossCell/_backbone-Net/fc1-Dense")["children"]["items"]
    assert matmul["attached"][0] | {"marks": {}} == {"node": "fc1.weight", "name": "weight", "op_type": "Parameter",
                                                     "kind": "weight", "param": "fc1.weight",
                                                     "type": "float32 16×128", "marks": {}}
