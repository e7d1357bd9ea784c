"""Run A against run B: the same rank and iteration on both sides, tensors matched by name, by
aligned execution orders and by a mapping file; the first divergence."""
from __future__ import annotations

import json

import numpy as np
import pytest

import dumpmaker
from clirun import run_cli
from compare_kit import PAIR_KEYS, alter, find, graph, kernel, rewrite_names, shift_op_numbers
from debugger.compare import compare_runs
from debugger import open_dump


def test_two_copies_of_a_run_agree(sample_copy):
    a, b = sample_copy("a"), sample_copy("b")
    res = compare_runs(a, b)
    assert res.exit_code == 0 and res.first_divergence is None
    assert res.ranks == [0, 1] and res.iterations == [0, 1, 2]
    assert len(res.pairs) == 2 * 3 * 192 and all(p.reason == "identical" and p.match == "exact" for p in res.pairs)
    cli = run_cli("compare", a, b, "--json", "--all")
    assert cli.code == 0
    d = cli.json
    assert d["mode"] == "runs" and len(d["pairs"]) == len(res.pairs)
    assert set(d) >= {"mode", "pairs", "first_divergence", "summary"}
    assert PAIR_KEYS <= set(d["pairs"][0])


def test_runs_that_differ_from_iteration_1_on(sample_copy):
    a, b = sample_copy("a"), sample_copy("b")
    mm = kernel(b, "MatMul", scope="fc2-Dense/MatMul")
    add = kernel(b, "BiasAdd", scope="fc2-Dense")
    bump = lambda x: x * 1.5 + 0.25  # noqa: E731
    alter(find(b, 0, 1, mm), bump)                     # the kernel where B starts to differ ...
    alter(find(b, 0, 1, add, "input", 0), bump)        # ... and its consumer's input, as it would
    for ref in open_dump(b).rank(0).tensors(0, 2):     # from then on everything differs
        if ref.dtype.kind == "f" and ref.stored_bytes:
            alter(ref.location, lambda x: x * 1.1 + 0.5)
    res = compare_runs(a, b)
    f = res.first_divergence
    assert (f.iteration, f.a.rank, f.node, f.io, f.slot) == (1, 0, mm, "output", 0)
    assert {(p.iteration, p.node, p.io) for p in res.errors if p.iteration == 1} == {(1, mm, "output"),
                                                                                    (1, add, "input")}
    assert all(p.grade == "pass" for p in res.pairs if p.iteration == 0 or p.a.rank == 1)
    cli = run_cli("compare", a, b, "--json")
    assert cli.code == 1
    fd = cli.json["first_divergence"]
    assert (fd["iteration"], fd["node"], fd["io"], fd["a"]["rank"]) == (1, mm, "output", 0)
    assert fd["a"] == {"dump": a, "rank": 0} and fd["b"] == {"dump": b, "rank": 0}


def test_a_changed_local_gradient_is_found_before_the_collective_it_feeds(tmp_path):
    """Made runs: B's rank 1 computes another fc1 bias gradient from iteration 2 on. On rank 0 the
    AllReduce output differs while its inputs agree; rank 1's gradient kernel comes first."""
    kw = dict(ranks=2, iterations=4, layers=(("fc1", 4, 3, "Sigmoid"), ("fc2", 3, 2, None)))
    a = dumpmaker.make_dump(str(tmp_path / "a"), **kw)
    bias_grad = kernel(a, "BiasAddGrad", param="fc1.bias")

    def values(rank, it, node, io, slot, x):
        return x * 3 + 1 if rank == 1 and it >= 2 and node == bias_grad and io == "output" else None

    b = dumpmaker.make_dump(str(tmp_path / "b"), values=values, **kw)
    res = compare_runs(a, b)
    f = res.first_divergence
    assert (f.iteration, f.a.rank, f.node, f.io, f.slot) == (2, 1, bias_grad, "output", 0)
    assert {p.iteration for p in res.errors} == {2, 3}
    g = graph(a)
    rank0 = sorted((p for p in res.errors if p.a.rank == 0 and p.iteration == 2), key=lambda p: p.sort_key())
    assert g.node(rank0[0].node).op_type == "AllReduce" and rank0[0].io == "output"


def test_nan_injected_in_one_kernel_output(sample_copy):
    a, b = sample_copy("a"), sample_copy("b")
    add = kernel(a, "BiasAdd", scope="fc1-Dense")
    sig = kernel(a, "Sigmoid")

    def nan(x):
        x.flat[5] = np.nan
        return x

    alter(find(a, 1, 0, add), nan)
    alter(find(a, 1, 0, sig, "input", 0), nan)
    res = compare_runs(a, b, ranks=[1])
    f = res.first_divergence
    assert (f.iteration, f.a.rank, f.node, f.io, f.reason) == (0, 1, add, "output", "NaN/Inf on a only (1 element)")
    assert len(res.errors) == 2 and res.ranks == [1]


def test_renumbered_ops_match_fuzzy(sample_copy):
    a, b = sample_copy("a"), sample_copy("b")
    rewrite_names(b, shift_op_numbers)
    res = compare_runs(a, b)
    assert res.exit_code == 0 and not res.warnings
    assert not [p for p in res.pairs if p.missing]
    kernels = [p for p in res.pairs if p.op_type != "Parameter"]
    # optimizer kernels pair by the weight they update, the others by the aligned execution orders
    assert kernels and all(p.match in ("fuzzy", "parameter") and p.node_b == shift_op_numbers(p.node) for p in kernels)
    assert {p.op_type for p in kernels if p.match == "parameter"} == {"ApplyMomentum"}
    assert all(p.match == "exact" for p in res.pairs if p.op_type == "Parameter")
    # without alignment nothing would pair: the kernel names differ in every op number
    assert not set(graph(a).execution_order) & set(graph(b).execution_order)


def test_renamed_scope_matches_by_op_types(sample_copy):
    a, b = sample_copy("a"), sample_copy("b")
    rewrite_names(b, lambda t: t.replace("fc2-Dense", "dense2-Dense"))
    res = compare_runs(a, b, iterations="0")
    assert res.exit_code == 0 and not [p for p in res.pairs if p.missing]
    moved = {p.node: p.node_b for p in res.pairs if p.node_b}
    assert moved and all("fc2-Dense" in k and v == k.replace("fc2-Dense", "dense2-Dense") for k, v in moved.items())


def test_mapping_file_overrides_the_other_matches(sample_copy, tmp_path):
    a, b = sample_copy("a"), sample_copy("b")
    m2, m3 = kernel(a, "MatMul", scope="fc2-Dense/MatMul"), kernel(a, "MatMul", scope="fc3-Dense/MatMul-op0")
    path = tmp_path / "map.json"
    path.write_text(json.dumps({m2: m3.replace("/", "_")}))   # a file spelling works too
    res = compare_runs(a, b, iterations=[0], mapping=str(path))
    mapped = [p for p in res.pairs if p.match == "mapping"]
    assert mapped and {p.node for p in mapped} == {m2} and {p.node_b for p in mapped} == {m3}
    out = next(p for p in mapped if p.io == "output")
    assert out.reason == "shape (4, 16) vs (4, 10)"
    assert {p.reason for p in res.pairs if p.node == m3} == {"missing on b"}   # m3 on a lost its partner
    cli = run_cli("compare", a, b, "--mapping", str(path), "--iterations", "0", "--json")
    assert cli.code == 1 and any(p["match"] == "mapping" for p in cli.json["pairs"])
    path.write_text("[1, 2]")
    assert run_cli("compare", a, b, "--mapping", str(path)).code == 2
    path.write_text(json.dumps({"no/such/node": m3}))
    res = compare_runs(a, b, iterations=[0], mapping=str(path))
    assert res.exit_code == 0 and any("no/such/node" in w for w in res.warnings)


def test_different_lengths_compare_the_common_iterations(tmp_path):
    a = dumpmaker.make_dump(str(tmp_path / "a"), iterations=3)
    b = dumpmaker.make_dump(str(tmp_path / "b"), iterations=2)
    res = compare_runs(a, b)
    assert res.iterations == [0, 1] and res.exit_code == 0
    assert any("iteration(s) 2 dumped on this side only" in w for w in res.warnings)
    with pytest.raises(Exception, match="no selected iteration"):
        compare_runs(a, b, iterations=[2])


def test_real_single_rank_run_against_rank_0_of_the_data_parallel_run(sample_copy):
    """Rank 0 of dp2 trains on the batches of single: the forward pass of iteration 0 agrees; the
    first divergence is the gradient the optimizer gets (dp2 averages it over both ranks)."""
    single, dp2 = sample_copy("single", which="single"), sample_copy("dp2")
    res = compare_runs(single, dp2)
    assert res.ranks == [0] and res.iterations == [0, 1, 2]
    f = res.first_divergence
    g = graph(single)
    opt = [n for n in g.execution_order if g.node(n).op_type == "ApplyMomentum"][0]
    assert (f.iteration, f.node, f.io, f.slot) == (0, opt, "input", 3)
    forward = [p for p in res.pairs if p.iteration == 0 and p.node.startswith("Default/network-WithLossCell/")]
    assert forward and all(p.grade == "pass" for p in forward)
    # dp2's all-reduces are not in single's graph: another program, not compared, and said
    assert not [p for p in res.pairs if "grad_reducer" in p.node]
    [u] = res.unpaired
    assert u.a_only == [] and {n for n in u.b_only if "grad_reducer" in n} and all(
        "grad_reducer" in n or n.startswith("Default_data") for n in u.b_only)
    text = run_cli("compare", single, dp2).out
    assert "First divergence: iteration 0, rank 0" in text and "more (see --json)" in text


def test_usage_errors(sample_copy, tmp_path):
    a, b = sample_copy("a"), sample_copy("b")
    assert run_cli("compare", a, b, "--ranks").code == 2
    assert run_cli("compare", a, b, "--base", "1").code == 2
    assert run_cli("compare", a, "--mapping", "x.json").code == 2
    assert run_cli("compare", a, str(tmp_path / "nothing")).code == 2
    assert run_cli("compare", a, b, "--rank", "4").code == 2
    assert run_cli("compare", a, b, "--thresholds", "cos_warn=abc").code == 2
    assert run_cli("compare", a, b, "--jobs", "0").code == 2


def test_thresholds_move_the_grades(sample_copy):
    a, b = sample_copy("a"), sample_copy("b")
    alter(find(b, 0, 0, "fc3.bias"), lambda x: x + 1e-3)
    assert compare_runs(a, b).errors == [] and compare_runs(a, b).divergent()
    strict = compare_runs(a, b, thresholds={"abs_fail": 1e-4})
    assert [p.node for p in strict.errors] == ["fc3.bias"]
    assert run_cli("compare", a, b, "--thresholds", "abs_fail=1e-4").code == 1


def test_a_weight_that_differs_from_the_start_is_named(tmp_path):
    """Two 2-rank runs that differ only in fc2's initial weights on rank 1: the first divergence is
    iteration 0, rank 1, the forward MatMul's weight input, and it says which weight that is."""
    kw = dict(ranks=2, iterations=3, layers=(("fc1", 4, 3, "Sigmoid"), ("fc2", 3, 2, None)))
    a = dumpmaker.make_dump(str(tmp_path / "a"), **kw)
    b = dumpmaker.make_dump(str(tmp_path / "b"), **kw)
    mm = kernel(b, "MatMul", scope="fc2-Dense/MatMul")
    g = graph(b)
    slot = next(i for i, src in enumerate(g.value_inputs(mm)) if src == "fc2.weight")
    for it in range(3):
        alter(find(b, 1, it, "fc2.weight"), lambda x: x * 1.5 + 0.25)
        alter(find(b, 1, it, mm, "input", slot), lambda x: x * 1.5 + 0.25)
    fd = run_cli("compare", b, a, "--json").json["first_divergence"]
    assert (fd["iteration"], fd["a"]["rank"], fd["node"], fd["io"], fd["slot"]) == (0, 1, mm, "input", slot)
    assert (fd["param"], fd["kind"]) == ("fc2.weight", "weight")
