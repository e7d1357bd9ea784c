"""`tdbg convert`: every command answers the same on the converted dump as on the original.

The originals are the committed real MindSpore samples and dumps written by dumpmaker; a values
conversion must give equal `info`, `node`, `code`, `scan --json` (every condition) and `compare
--json`; a statistics conversion the same hits for every condition statistics can answer and the
named "needs tensor values" error for the others. The original is never changed.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np
import pytest
from clirun import run_cli
from treehash import tree_digest

from debugger import open_dump
from debugger.watch.engine import scan
from debugger.watch.registry import CONDITIONS, SERIES, Watchpoint

SAMPLE_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dumps_sample")

# One watchpoint per condition, with thresholds that fire on the samples (so equality means something).
EVERY_CONDITION = [
    "weight_initialization:max_gt=0.1", "weight_overflow", "gradient_exploding", "tensor_overflow",
    "weight_too_large:abs_mean_gt=0.05", "gradient_too_large:max_gt=0.001", "tensor_too_large:max_gt=5",
    "weight_too_small:abs_mean_lt=0.05", "gradient_vanishing:abs_mean_lt=1e-4", "tensor_too_small:min_lt=-5",
    "tensor_all_zero:zero_percentage_ge=50", "weight_not_changed", "weight_change_too_large:abs_mean_update_ratio_gt=0.001",
    "weight_change_too_small:abs_mean_update_ratio_lt=0.01",
    "activation_range:range_start_inclusive=0.99,range_end_inclusive=1,range_percentage_gt=50",
    "tensor_range:max_min_gt=10", "activation_saturation", "activation_dead_relu", "tensor_unchanged:num_steps=2",
    "weight_update_ratio:large_threshold=0.01,small_threshold=1e-6", "loss_not_decreasing:num_steps=2",
    "tensor_exploding", "overflow", "activation_saturated_layer:saturated_percentage_gt=50",
    "activation_dead_layer:zero_percentage_gt=10", "nonfinite_sweep",
]
# What statistics alone cannot answer: element counts inside a range, per-unit activity, mean |cur - prev|.
NEEDS_VALUES = {"activation_range", "activation_saturation", "activation_dead_relu", "weight_change_too_large",
                "weight_change_too_small", "weight_update_ratio", "activation_saturated_layer"}

# Answered on a statistics-only conversion from the update and saturation statistics it stores beside the
# others (the saturated count at the preset's tolerance, 1e-3, which the watchpoint here keeps).
FROM_UPDATE_STATISTICS = {"weight_change_too_large", "weight_change_too_small", "weight_update_ratio",
                          "activation_saturated_layer"}


def test_every_condition_is_covered() -> None:
    # (the conditions over time read a per-step series, not the dumped iterations converted here)
    assert sorted(w.split(":")[0] for w in EVERY_CONDITION) == sorted(n for n, c in CONDITIONS.items()
                                                                      if c.needs != SERIES)


def _convert(src: str, dst: str, *extra: str) -> dict[str, Any]:
    before = tree_digest(src)
    r = run_cli("convert", src, dst, "--json", *extra)
    assert r.code == 0, r.err
    assert tree_digest(src) == before, "convert changed the dump it read"
    return r.json


def _plain(obj: Any, *roots: str) -> Any:
    """JSON with the dumps' own paths taken out (they differ by design)."""
    text = json.dumps(obj, sort_keys=True)
    for root in roots:
        text = text.replace(json.dumps(root)[1:-1], "<ROOT>")
    return json.loads(text)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: Any) -> dict[str, tuple[str, str, str]]:
    """name -> (original, values conversion, statistics conversion) for the samples and a made dump."""
    import dumpmaker

    base = tmp_path_factory.mktemp("convert")
    made = dumpmaker.make_dump(str(base / "adam2"), ranks=2, iterations=4, optimizer="Adam",
                               layers=(("fc1", 6, 5, "ReLU"), ("fc2", 5, 4, "Tanh"), ("fc3", 4, 2, None)))
    out = {}
    for name, src in (("single", os.path.join(SAMPLE_ROOT, "single")), ("dp2", os.path.join(SAMPLE_ROOT, "dp2")),
                      ("adam2", made)):
        vals, stats = str(base / f"{name}-h5"), str(base / f"{name}-stats")
        _convert(src, vals)
        _convert(src, stats, "--statistics")
        out[name] = (src, vals, stats)
    return out


@pytest.mark.parametrize("name", ["single", "dp2", "adam2"])
def test_info_is_the_same(converted: dict, name: str) -> None:
    src, vals, stats = converted[name]
    a, b, c = (run_cli("info", p, "--json") for p in (src, vals, stats))
    assert a.code == b.code == c.code == 0
    assert b.json["format"] == c.json["format"] == "tdbg-h5" and a.json["format"] == "mindspore"
    for conv, saved in ((b.json, "values+statistics"), (c.json, "statistics")):
        for ra, rb in zip(a.json["ranks"], conv["ranks"], strict=True):
            for k in ("rank", "graphs", "iterations", "run_iterations", "nodes_by_kind", "parameters", "framework",
                      "framework_version", "device_target", "net", "tensor_files"):
                assert ra[k] == rb[k], (k, ra[k], rb[k])
            strip = [{k: v for k, v in g.items() if k != "source"} for g in ra["graph_details"]]
            assert strip == [{k: v for k, v in g.items() if k != "source"} for g in rb["graph_details"]]
            assert rb["saved"] == saved
    if name == "single":   # smaller even on this sample of small tensors (the benchmark measures ~100x at scale)
        assert c.json["ranks"][0]["tensor_bytes"] * 3 < b.json["ranks"][0]["tensor_bytes"]


@pytest.mark.parametrize("name,node", [("single", "fc1.weight"), ("single", "Sigmoid-op0"), ("dp2", "conv1.weight"),
                                       ("adam2", "fc2.bias")])
def test_node_is_the_same(converted: dict, name: str, node: str) -> None:
    src, vals, stats = converted[name]
    # One source root for all: the original, beside its source, would otherwise find it where the conversion
    # in a temporary folder cannot (the command line follows a dump that travelled with its tree).
    a = run_cli("node", src, node, "--json", "--source-root", SAMPLE_ROOT)
    assert a.code == 0, a.err
    for other in (vals, stats):
        b = run_cli("node", other, node, "--json", "--source-root", SAMPLE_ROOT)
        assert b.code == 0, b.err
        assert _plain(a.json, src) == _plain(b.json, other)


def test_code_is_the_same(converted: dict) -> None:
    src, vals, stats = converted["single"]
    a = run_cli("code", src, "make_sample.py:197", "--json", "--source-root", SAMPLE_ROOT)   # as in test_node_is_the_same
    assert a.code == 0 and a.json["nodes"], a.err
    for other in (vals, stats):
        b = run_cli("code", other, "make_sample.py:197", "--json", "--source-root", SAMPLE_ROOT)
        assert _plain(a.json, src) == _plain(b.json, other)


def _scan(path: str) -> dict[str, Any]:
    """The scan's JSON, and its skipped checks with every tensor they name (``skipped_records``)."""
    res = scan(open_dump(path), [Watchpoint.parse(w) for w in EVERY_CONDITION], jobs=1)
    return {**res.to_dict(), "skipped_records": res.skipped}


def _errors(result: dict[str, Any]) -> list[tuple]:
    return sorted((e["watchpoint"], e["rank"], e["graph"], e["iteration"], e["node"]) for e in result["errors"])


@pytest.mark.parametrize("name", ["single", "dp2", "adam2"])
def test_scan_of_every_condition_is_the_same(converted: dict, name: str) -> None:
    src, vals, stats = converted[name]
    a, b = _scan(src), _scan(vals)
    assert _plain(a["hits"], src) == _plain(b["hits"], vals)
    assert a["first"] == b["first"] or _plain(a["first"], src) == _plain(b["first"], vals)
    assert _errors(a) == _errors(b)
    fired = {h["watchpoint"] for h in a["hits"]}
    if name == "single":   # the thresholds above make most conditions fire on the planted sample
        assert len(fired) >= 12, fired


@pytest.mark.parametrize("name", ["single", "dp2", "adam2"])
def test_statistics_conversion_answers_what_statistics_can(converted: dict, name: str) -> None:
    src, _, stats = converted[name]
    a, c = _scan(src), _scan(stats)
    # update ratios come from the update statistics convert stores (stats_extra)
    want = [h for h in _plain(a["hits"], src) if h["watchpoint"] not in NEEDS_VALUES - FROM_UPDATE_STATISTICS]
    got = _plain(c["hits"], stats)
    # what a statistics-only dump cannot answer is said once per watchpoint and reason (with every check)
    said = c["errors"] + [{"watchpoint": s.watchpoint, "rank": r, "iteration": i, "node": n, "error": s.reason}
                          for s in c["skipped_records"] for r, i, n in s.where]
    undecided = {(e["watchpoint"], e["rank"], e["iteration"], e["node"]) for e in said
                 if "digests differ" in e["error"]}
    # unchanged-weight checks are exact through the digest, or an error says statistics cannot decide
    want = [h for h in want if (h["watchpoint"], h["rank"], h["iteration"], h["node"]) not in undecided]
    assert got == want
    for e in said:
        if e["watchpoint"] in NEEDS_VALUES:
            assert "needs tensor values; this dump holds statistics only" in e["error"], e
    needs = {e["watchpoint"] for e in said if "needs tensor values" in e["error"]}
    assert needs <= NEEDS_VALUES - FROM_UPDATE_STATISTICS
    ran = {w["name"] for w in c["watchpoints"]}
    for cond in (NEEDS_VALUES - FROM_UPDATE_STATISTICS) & ran:
        if any(h["watchpoint"] == cond for h in a["hits"]) or any(e["watchpoint"] == cond for e in a["errors"]):
            assert cond in needs, f"{cond} passed silently on a statistics-only dump"


def test_compare_ranks_is_the_same(converted: dict) -> None:
    src, vals, _ = converted["dp2"]
    a = run_cli("compare", src, "--ranks", "--json", "--all", "--no-cache")
    b = run_cli("compare", vals, "--ranks", "--json", "--all", "--no-cache")
    assert a.code == b.code == 0, (a.err, b.err)
    assert _plain(a.json, src) == _plain(b.json, vals)


def test_compare_runs_is_the_same(converted: dict, tmp_path: Any) -> None:
    src, vals, _ = converted["adam2"]
    a = run_cli("compare", src, src, "--json", "--all", "--no-cache")
    b = run_cli("compare", vals, src, "--json", "--all", "--no-cache")
    assert a.code == b.code == 0, (a.err, b.err)
    assert a.json["summary"]["pairs"] == b.json["summary"]["pairs"] > 0
    assert [p["grade"] for p in a.json["pairs"]] == [p["grade"] for p in b.json["pairs"]]
    assert all(p["metrics"]["cosine"] == 1.0 for p in b.json["pairs"] if p["metrics"])


def test_values_are_bit_identical(converted: dict) -> None:
    src, vals, _ = converted["single"]
    da, db = open_dump(src), open_dump(vals)
    ra, rb = da.rank(0), db.rank(0)
    for it in ra.iterations(0):
        ma, mb = ra.tensor_map(0, it), rb.tensor_map(0, it)
        assert ma.keys() == mb.keys()
        for k, ta in ma.items():
            x, y = np.asarray(ta.value()), np.asarray(mb[k].value())
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), k


def test_convert_subsets_and_refusals(converted: dict, tmp_path: Any) -> None:
    src = converted["dp2"][0]
    part = str(tmp_path / "part")
    got = _convert(src, part, "--ranks", "1", "--iterations", "1-2")
    assert got["ranks"] == [1] and got["iterations"] == [1, 2]
    info = run_cli("info", part, "--json").json
    assert [r["rank"] for r in info["ranks"]] == [1] and info["ranks"][0]["iterations"] == [1, 2]
    # never inside the dump, never over existing files
    inside = run_cli("convert", src, os.path.join(src, "rank_0", "h5"))
    assert inside.code == 2 and "inside the dump" in inside.err and not os.path.exists(os.path.join(src, "rank_0", "h5"))
    again = run_cli("convert", src, part)
    assert again.code == 2 and "not an empty folder" in again.err
    assert re.search(r"tdbg: error: .*part", again.err)
    # a folder that cannot be made (its parent is a file): exit 2 naming it, before anything is read
    blocker = str(tmp_path / "a_file")
    open(blocker, "w").close()
    unwritable = run_cli("convert", src, os.path.join(blocker, "out"))
    assert unwritable.code == 2 and f"{blocker}/out: cannot write the converted dump" in unwritable.err


def test_a_first_scan_of_a_converted_dump_reads_stored_statistics_not_values(converted: dict) -> None:
    from debugger.stats.cache import StatsCache
    from debugger.watch import scan
    from debugger.watch.registry import Watchpoint

    src, vals, _ = converted["single"]
    wps = [Watchpoint.parse(w) for w in ("overflow", "gradient_vanishing:abs_mean_lt=1e-4", "tensor_all_zero")]
    a = scan(open_dump(src), wps, jobs=1, cache=StatsCache(enabled=False))
    b = scan(open_dump(vals), wps, jobs=1, cache=StatsCache(enabled=False))
    assert a.files_checked > 500 and b.files_checked == 0
    assert a.hits and [h.to_dict() for h in a.hits] == [h.to_dict() for h in b.hits]
