"""Ranks of the real 2-rank data-parallel sample against the base rank, unaltered and with planted
divergences (a weight, a NaN, a shape, a missing file)."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from clirun import run_cli
from compare_kit import DP2, METRIC_KEYS, PAIR_KEYS, WEIGHTS, alter, find, graph, kernel
from debugger.compare import compare_ranks, invariant_nodes
from debugger.compare import evaluate as evaluate_mod
from debugger import open_dump


def test_unaltered_sample_every_invariant_agrees(sample_copy):
    root = sample_copy()
    res = compare_ranks(root)
    assert res.exit_code == 0 and res.first_divergence is None
    assert res.iterations == [0, 1, 2] and res.ranks == [1] and res.base == 0
    assert all(p.grade == "pass" and p.reason == "identical" and p.counted for p in res.pairs)
    weights = {(p.iteration, p.node) for p in res.pairs if p.kind == "weight" and p.node == p.param}
    assert weights == {(it, w) for it in range(3) for w in WEIGHTS}
    # a kernel input that carries a weight's value is named after the weight
    reads = {p.param for p in res.pairs if p.io == "input" and p.kind == "weight"}
    assert reads and reads <= set(WEIGHTS)
    states = {p.node for p in res.pairs if p.kind == "optimizer_state"}
    assert {f"moments.{w}" for w in WEIGHTS} | {"learning_rate", "momentum"} <= states
    ops = {p.op_type for p in res.pairs if p.io == "output"}
    assert {"AllReduce", "Mul", "ApplyMomentum", "Parameter"} == ops   # collectives and what follows from them
    cli = run_cli("compare", root, "--json")
    assert cli.code == 0, cli.err
    d = cli.json
    assert d["mode"] == "ranks" and d["pairs"] == [] and d["first_divergence"] is None
    assert d["summary"]["pairs"] == len(res.pairs) and d["summary"]["error"] == 0


def test_invariants_follow_the_graph(sample_copy):
    g = graph(sample_copy())
    inv = invariant_nodes(g)
    assert {n for n in inv if g.node(n).op_type == "AllReduce"} == \
        {n for n in g.execution_order if g.node(n).op_type == "AllReduce"}
    local = [n for n in g.execution_order if n.startswith("Gradients/") or "_backbone" in n]
    assert not inv & set(local)                    # activations and local gradients may differ
    assert "inputs0" not in inv and "global_step" not in inv


def test_weight_perturbed_on_one_rank_from_iteration_1(sample_copy):
    root = sample_copy()
    for it in (1, 2):
        alter(find(root, 1, it, "fc3.weight"), lambda a: a + 0.5)
    res = compare_ranks(root)
    f = res.first_divergence
    assert (f.iteration, f.node, f.kind, f.io, f.slot, f.a.rank, f.b.rank) == (1, "fc3.weight", "weight", "output", 0, 1, 0)
    assert f.grade == "error" and f.metrics.max_abs_err == pytest.approx(0.5)
    assert {(p.iteration, p.node) for p in res.errors} == {(1, "fc3.weight"), (2, "fc3.weight")}
    cli = run_cli("compare", root, "--ranks", "--json")
    assert cli.code == 1
    d = cli.json
    assert d["first_divergence"]["node"] == "fc3.weight" and d["first_divergence"]["iteration"] == 1
    for p in d["pairs"]:
        assert PAIR_KEYS <= set(p) and set(p["metrics"]) == METRIC_KEYS
        assert p["a"] == {"dump": root, "rank": 1} and p["b"] == {"dump": root, "rank": 0}
    text = run_cli("compare", root).out
    assert "First divergence: iteration 1, rank 1 vs 0: fc3.weight output 0" in text
    assert "make_sample.py:" in text       # the user code line of the weight


def test_nan_in_an_invariant_kernel_output_is_the_origin(sample_copy):
    root = sample_copy()
    mul = kernel(root, "Mul", param="fc2.weight")                 # the gradient mean after the AllReduce
    opt = next(n for n in graph(root).execution_order
               if graph(root).node(n).op_type == "ApplyMomentum" and
               graph(root).node(n).inputs[0][0] == "fc2.weight")

    def nan(a):
        a.flat[0] = np.nan
        return a

    # the NaN flows on as it would: into the optimizer's gradient input, its update and the state
    for node, io, slot in ((mul, "output", 0), (opt, "input", 3), (opt, "input", 1), (opt, "output", 0),
                           ("moments.fc2.weight", "output", 0)):
        alter(find(root, 1, 1, node, io, slot), nan)
    res = compare_ranks(root)
    f = res.first_divergence
    assert (f.iteration, f.node, f.io, f.slot, f.a.rank) == (1, mul, "output", 0, 1)
    assert f.reason == "NaN/Inf on a only (1 element)"
    assert len(res.errors) == 5
    assert run_cli("compare", root).code == 1


def test_nan_in_a_local_tensor_is_listed_with_all_tensors_but_not_counted(sample_copy):
    root = sample_copy()
    relu = kernel(root, "ReLU")
    alter(find(root, 1, 0, relu), lambda a: np.where(np.arange(a.size).reshape(a.shape) == 3, np.nan, a))
    assert compare_ranks(root).exit_code == 0
    res = compare_ranks(root, all_tensors=True)
    hit = [p for p in res.pairs if p.node == relu and p.io == "output" and p.iteration == 0]
    assert len(hit) == 1 and hit[0].grade == "error" and not hit[0].counted
    assert "NaN/Inf on a only" in hit[0].reason
    assert res.exit_code == 0 and res.first_divergence is None
    cli = run_cli("compare", root, "--all-tensors", "--json")
    assert cli.code == 0
    assert any(p["node"] == relu and not p["counted"] for p in cli.json["pairs"])
    assert "must agree" in run_cli("compare", root, "--all-tensors").out


def test_shape_changed(sample_copy):
    root = sample_copy()
    alter(find(root, 1, 0, "moments.fc1.bias"), lambda a: a.reshape(1, -1))
    res = compare_ranks(root)
    f = res.first_divergence
    assert (f.iteration, f.node, f.metrics) == (0, "moments.fc1.bias", None)
    assert f.reason == "shape (1, 16) vs (16,)"
    assert [p.node for p in res.errors] == ["moments.fc1.bias"]
    assert run_cli("compare", root, "--json").json["pairs"][0]["metrics"] is None


def test_file_missing(sample_copy):
    root = sample_copy()
    os.remove(find(root, 1, 2, "fc1.bias"))
    res = compare_ranks(root)
    assert [(p.iteration, p.node, p.reason) for p in res.errors] == [(2, "fc1.bias", "missing on a")]
    assert res.first_divergence is res.errors[0]
    cli = run_cli("compare", root, "--json")
    assert cli.code == 1
    (p,) = cli.json["pairs"]
    assert p["metrics"] is None and p["reason"] == "missing on a" and p["grade"] == "error"


def test_base_rank_and_selection(sample_copy):
    root = sample_copy()
    alter(find(root, 1, 2, "fc1.weight"), lambda a: a * 2)
    res = compare_ranks(root, base=1, iterations="1-2")
    assert res.iterations == [1, 2] and res.ranks == [0] and res.base == 1
    f = res.first_divergence
    assert (f.iteration, f.node, f.a.rank, f.b.rank) == (2, "fc1.weight", 0, 1)
    assert compare_ranks(root, iterations=[0, 1]).exit_code == 0
    assert run_cli("compare", root, "--base", "1", "--rank", "0", "--iterations", "2").code == 1
    assert run_cli("compare", root, "--base", "5").code == 2
    assert run_cli("compare", root, "--iterations", "7").code == 2
    assert run_cli("compare", root, "--iterations", "x-y").code == 2


def test_single_rank_dump_is_a_usage_error(sample_copy):
    root = sample_copy(which="single")
    cli = run_cli("compare", root, "--ranks")
    assert cli.code == 2 and "two or more" in cli.err


def test_cache_answers_a_second_comparison(sample_copy, tmp_path):
    root = sample_copy()
    alter(find(root, 1, 1, "fc2.bias"), lambda a: a + 2.0)
    args = ("compare", root, "--json", "--all", "--cache-dir", str(tmp_path / "c"))
    first, second = run_cli(*args), run_cli(*args)
    assert first.code == second.code == 1
    assert first.json["summary"]["computed"] > 0 and first.json["summary"]["cached"] == 0
    assert second.json["summary"]["computed"] == 0
    assert second.json["summary"]["cached"] == first.json["summary"]["computed"]
    assert second.json["pairs"] == first.json["pairs"]
    alter(find(root, 1, 1, "fc2.bias"), lambda a: a + 1.0)   # a rewritten file is compared again
    third = run_cli(*args)
    assert third.json["summary"]["computed"] == 1
    assert third.json["first_divergence"]["metrics"]["max_abs_err"] == pytest.approx(3.0, rel=1e-5)


def test_process_pool_gives_the_same_result(sample_copy, monkeypatch):
    root = sample_copy()
    alter(find(root, 1, 1, "fc2.bias"), lambda a: a + 1e-3)
    one = compare_ranks(root, all_tensors=True, jobs=1)
    monkeypatch.setattr(evaluate_mod, "POOL_MIN_BYTES", 0)
    two = compare_ranks(open_dump(root), all_tensors=True, jobs=2)
    assert [p.to_dict() for p in two.pairs] == [p.to_dict() for p in one.pairs]


def test_an_iteration_missing_on_one_rank(sample_copy):
    root = sample_copy()
    shutil.rmtree(os.path.join(root, "rank_1", "Net", "0", "2"))
    res = compare_ranks(root)
    assert res.iterations == [0, 1, 2]
    assert {p.iteration for p in res.errors} == {2} and all(p.reason == "missing on a" for p in res.errors)
    assert len(res.errors) == len([p for p in compare_ranks(DP2, iterations=[2]).pairs])
    assert any("rank 1 has no dump of graph 0 iteration(s) 2" in w for w in res.warnings)


def test_many_ranks_folded_a_few_at_a_time_equal_the_whole(tmp_path, monkeypatch):
    """With passes folded (the CLI without --all, the triage) the ranks are compared a chunk at a time and
    forgotten: the summary, the divergent pairs and the first divergence are those of the comparison that
    keeps every pair, and no compared rank still holds its index or listing afterwards. On a pool (the next
    chunk paired while the workers compare the last, each base tensor read once per run of pairs) too."""
    import dumpmaker

    monkeypatch.setenv("TDBG_RANKS_AT_ONCE", "3")      # ten ranks take the path a thousand take
    planted = {(5, 1): "fc2.weight"}      # rank 5 (in the second chunk) departs at iteration 1

    def values(rank, it, node, io, slot, default):
        return default + 0.5 if planted.get((rank, it)) == node else None

    root = dumpmaker.make_dump(str(tmp_path / "d"), ranks=10, iterations=3, values=values)
    whole = compare_ranks(root, jobs=1)
    d = open_dump(root)
    folded = compare_ranks(d, jobs=1, keep_passes=False)
    assert folded.summary() == whole.summary() and folded.exit_code == whole.exit_code == 1
    assert [p.to_dict() for p in folded.divergent()] == [p.to_dict() for p in whole.divergent()]
    assert folded.first_divergence.to_dict() == whole.first_divergence.to_dict()
    assert (folded.first_divergence.a.rank, folded.first_divergence.iteration) == (5, 1)
    assert len(folded.pairs) < len(whole.pairs) // 10
    held = [r.rank for r in d.ranks if r._local is not None or "listing" in r.reader.__dict__]
    assert held == [0]      # only the base rank
    forked_dump = open_dump(root)      # on a pool: each chunk compared whole by a forked worker
    forked = compare_ranks(forked_dump, jobs=2, keep_passes=False)
    assert forked.summary() == whole.summary() and forked.warnings == folded.warnings
    assert [p.to_dict() for p in forked.divergent()] == [p.to_dict() for p in whole.divergent()]
    assert forked.first_divergence.source is not None and forked.first_divergence.graph_obj is not None
    # the workers listed the ranks and told their warnings: this process listed only the base
    assert [r.rank for r in forked_dump.ranks if r._local is not None or "listing" in r.reader.__dict__] == [0]
    assert all(r.indexed for r in forked_dump.ranks)
    from debugger.stats.cache import StatsCache    # the workers write what they compared to the cache, under its lock
    first = compare_ranks(root, jobs=2, keep_passes=False, cache=StatsCache(str(tmp_path / "cache")))
    again = compare_ranks(root, jobs=2, keep_passes=False, cache=StatsCache(str(tmp_path / "cache")))
    assert first.computed > 100 and (again.computed, again.cached) == (0, first.computed)
    assert again.summary()["counted_errors"] == whole.summary()["counted_errors"]
