"""The dump model: discovery, iterations, run history, and the tensor index of every version."""
from __future__ import annotations

import os
from collections import defaultdict

import numpy as np
import pytest

import dumpmaker
from debugger.errors import NotADumpError, QueryError
from debugger import find_dump_roots, open_dump, open_dumps
from debugger.formats.mindspore.filenames import parse_tensor_file_name

BB = "Default/network-WithLossCell/_backbone-Net"
MM1 = f"{BB}/fc1-Dense/MatMul-op0"
BA1 = f"{BB}/fc1-Dense/BiasAdd-op0"
APPLY_FC1_W = "Default/optimizer-Momentum/ApplyMomentum-op3"   # updates fc1.weight (the last one)


def test_model_opens_a_dump_root(make_dump) -> None:
    root = make_dump(ranks=2, iterations=2)
    dump = open_dump(root)
    assert dump.root == root and dump.rank_ids == [0, 1] and dump.warnings == []
    assert [r.rank for r in dump.ranks] == [0, 1] and dump.rank(1).path == os.path.join(root, "rank_1")
    with pytest.raises(QueryError, match=r"no rank 5 \(ranks: \[0, 1\]\)"):
        dump.rank(5)


@pytest.mark.parametrize("rank", [0, 1])
def test_model_opens_one_rank_dir(make_dump, rank: int) -> None:
    root = make_dump(ranks=2, iterations=1)
    dump = open_dump(os.path.join(root, f"rank_{rank}"))
    assert dump.root == root and dump.rank_ids == [rank]
    assert len(dump.rank(rank).tensors()) == 110


def test_model_open_dumps_finds_every_dump_below_a_parent(make_dump, tmp_path) -> None:
    a = make_dump("runs/a", iterations=1)
    b = make_dump("runs/deeper/b", iterations=1)
    assert find_dump_roots(str(tmp_path / "runs")) == [a, b]   # b sits two levels down
    dumps = open_dumps(str(tmp_path / "runs"))
    assert [d.root for d in dumps] == [a, b]
    assert open_dumps(a)[0].root == a


def test_model_open_dump_on_a_parent_of_two_dumps_names_both(make_dump, tmp_path) -> None:
    make_dump("runs/a", iterations=1)
    make_dump("runs/b", iterations=1)
    parent = str(tmp_path / "runs")
    with pytest.raises(NotADumpError) as e:
        open_dump(parent)
    msg = str(e.value)
    assert msg.startswith(parent + ": ") and "holds 2 dumps" in msg and "a, b" in msg and "open one of them" in msg


def test_model_sample_root_holds_two_dumps(sample_root: str) -> None:
    assert sorted(os.path.basename(d.root) for d in open_dumps(sample_root) if d.format == "mindspore") == ["dp2", "single"]
    with pytest.raises(NotADumpError, match="dp2, msprobe/"):
        open_dump(sample_root)


def test_model_metadata_and_layout_options(make_dump) -> None:
    dump = open_dump(make_dump(ranks=2, iterations=1, net="LeNet", graph_id=3, version="2.3",
                               metadata_on_all_ranks=False))
    r0, r1 = dump.ranks
    assert (r0.info.framework_version, r0.info.device_target, r0.info.net, r0.graph_ids) == ("2.3.0", "CPU", "LeNet", [3])
    assert r0.info.raw["dump_config"]["common_dump_settings"]["net_name"] == "LeNet"
    assert not os.path.exists(os.path.join(r1.path, ".dump_metadata"))   # only rank_0 has it, as in real runs
    assert (r1.info.framework_version, r1.graph_ids) == ("2.3.0", [3])               # ... and the other ranks share it
    assert len(r1.tensors(3, 0)) == 110 and dump.all_warnings() == []


def test_model_iterations_dumped_versus_run_history(make_dump) -> None:
    rank = open_dump(make_dump(iterations=7, run_history=[0, 2, 4, 6], dumped_iterations=[4, 6])).rank(0)
    assert rank.iterations() == rank.iterations(0) == [4, 6]
    assert rank.run_history(0) == [0, 2, 4, 6]
    assert rank.previous_iteration(0, 6) == 4
    assert rank.previous_iteration(0, 4) == 2        # ran, but was not dumped
    assert rank.previous_iteration(0, 0) is None
    assert rank.info.raw["dump_config"]["common_dump_settings"]["iteration"] == "4|6"


def test_model_previous_iteration_falls_back_to_dumped_iterations(make_dump) -> None:
    root = make_dump(iterations=5, dumped_iterations=[1, 3, 4])
    os.remove(os.path.join(root, "rank_0", "execution_order", "ms_global_execution_order_graph_0.csv"))
    rank = open_dump(root).rank(0)
    assert rank.run_history(0) == [1, 3, 4]   # no recorded history: the dumped iterations are the known runs
    assert [rank.previous_iteration(0, i) for i in (1, 3, 4)] == [None, 1, 3]


def test_model_previous_iteration_weights_follow_the_run_history(make_dump) -> None:
    rank = open_dump(make_dump(iterations=6, run_history=[0, 1, 3, 5], dumped_iterations=[1, 3, 5])).rank(0)
    for it in (3, 5):
        prev = rank.previous_iteration(0, it)
        assert prev == {3: 1, 5: 3}[it]
        np.testing.assert_array_equal(rank.tensor(0, it, MM1, "input", 1).value(),
                                      rank.tensor(0, prev, "fc1.weight").value())


@pytest.mark.parametrize("options", [{"version": "2.10"}, {"version": ">=2.4"}, {"version": "2.3"},
                                     {"version": "2.2"}, {"version": "1.x"}, {"version": "2.2", "param_dots": True},
                                     {"name_style": "short", "dtype_field": True},
                                     {"name_style": "full", "dtype_field": False}, {"optimizer": "Adam"},
                                     {"ranks": 2}], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_model_tensor_index_matches_every_version_style(make_dump, options: dict) -> None:
    dump = open_dump(make_dump(iterations=2, **options))
    for rank in dump.ranks:
        refs = rank.tensors(0, 1)
        assert refs and all(t.matched for t in refs), [t.node for t in refs if not t.matched]
        g = rank.graph(0)
        assert all(t.node in g for t in refs)
        kernels = {t.node for t in refs if not g.node(t.node).op_type == "Parameter"}
        assert kernels == set(g.execution_order)
        assert {t.node for t in refs if t.op_type == "Parameter"} == {n.name for n in g.nodes()
                                                                      if n.is_parameter}
        dtype_field = options.get("dtype_field", options.get("version", "2.10") in ("2.10", ">=2.4"))
        assert all((t.file_dtype == t.dtype.name) if dtype_field else t.file_dtype is None for t in refs)
    assert dump.all_warnings() == []


def test_model_tensor_refs_carry_kind_param_and_order(make_dump) -> None:
    rank = open_dump(make_dump(iterations=1)).rank(0)
    g, refs = rank.graph(0), rank.tensors(0, 0)
    positions = [g.execution_index.get(t.node, len(g.execution_order)) for t in refs]
    assert positions == sorted(positions)           # execution order, not file-timestamp order
    assert refs[0].node == g.execution_order[0] and refs[-1].op_type == "Parameter"
    grads = {t.node: t.param for t in refs if t.kind == "gradient" and t.io == "output"}
    assert sorted(grads.values()) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    weights = {t.node for t in refs if t.kind == "weight"}
    assert weights == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert rank.tensor(0, 0, MM1, "input", 2).dtype == np.dtype(bool)
    assert rank.tensor_map(0, 0)[(MM1, "output", 0)].shape == (2, 3)
    with pytest.raises(QueryError, match="no tensor"):
        rank.tensor(0, 0, MM1, "output", 7)
    assert rank.find_node("fc1_weight") == [(0, "fc1.weight")]
    assert rank.find_node(MM1.replace("/", "_")) == [(0, MM1)] == rank.find_node("fc1-Dense/MatMul-op0")
    assert rank.tensor_file_count() == 90 and rank.tensor_bytes() == sum(t.stored_bytes for t in refs)


def test_model_newest_timestamp_wins(make_dump) -> None:
    root = make_dump(iterations=2, duplicate_timestamps=True)
    rank = open_dump(root).rank(0)
    newest: dict[tuple, int] = defaultdict(int)
    for it in (0, 1):
        d = os.path.join(root, "rank_0", "Net", "0", str(it))
        for name in os.listdir(d):
            p = parse_tensor_file_name(name)
            assert p is not None
            key = (it, p.op_name, p.io, p.slot)
            newest[key] = max(newest[key], p.timestamp)
    refs = rank.tensors(0)
    assert rank.tensor_file_count() > len(refs) == 180
    for t in refs:
        p = parse_tensor_file_name(os.path.basename(t.location))
        assert p is not None and p.timestamp == newest[(t.iteration, p.op_name, t.io, t.slot)]
        v = t.value()
        assert not (v.dtype != bool and v.size and np.all(v == dumpmaker.STALE_VALUE))


def test_model_mapping_csv_resolves_long_names(make_dump) -> None:
    layers = (("fc_" + "very_long_cell_name_" * 8, 4, 3, "Sigmoid"), ("fc2", 3, 2, None))
    root = make_dump(iterations=1, layers=layers, long_names=True)
    d = os.path.join(root, "rank_0", "Net", "0", "0")
    numbered = [n for n in os.listdir(d) if n[:-4].isdigit()]
    assert numbered and os.path.isfile(os.path.join(d, "mapping.csv"))
    rank = open_dump(root).rank(0)
    refs = rank.tensors(0, 0)
    assert len(refs) == 90 and all(t.matched for t in refs)
    long_refs = [t for t in refs if os.path.basename(t.location) in numbered]
    assert len(long_refs) == len(numbered)
    for t in long_refs:
        assert layers[0][0] in t.node
        np.testing.assert_array_equal(t.value(), np.load(t.location))


def test_model_renumbered_files_match_by_scope_and_op_type(make_dump) -> None:
    root = make_dump(iterations=2, renumber_files=True)
    rank = open_dump(root).rank(0)
    node = f"Gradients/{BB}/fc1_act-Sigmoid/Grad_Sigmoid/SigmoidGrad-op1"   # the graph's number
    assert node in rank.graph(0) and node in rank.graph(0).execution_order
    refs = [t for t in rank.tensors(0, 1) if t.node == node]
    assert len(refs) == 3 and all("SigmoidGrad-op0." in os.path.basename(t.location) for t in refs)   # the files'
    assert all(t.matched for t in rank.tensors(0)) and open_dump(root).all_warnings() == []


def test_model_values_follow_the_reference_semantics(make_dump) -> None:
    rank = open_dump(make_dump(iterations=3)).rank(0)
    for it in (0, 1, 2):
        w = rank.tensor(0, it, "fc1.weight").value()
        np.testing.assert_array_equal(rank.tensor(0, it, APPLY_FC1_W, "input", 0).value(), w)
        np.testing.assert_array_equal(rank.tensor(0, it, APPLY_FC1_W, "output", 0).value(), w)
        if it:
            before = rank.tensor(0, it - 1, "fc1.weight").value()
            np.testing.assert_array_equal(rank.tensor(0, it, MM1, "input", 1).value(), before)
            moment = rank.tensor(0, it, "moments.fc1.weight").value()
            np.testing.assert_allclose(w - before, -0.01 * moment, rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(rank.tensor(0, it, BA1, "input", 0).value(),
                                      rank.tensor(0, it, MM1, "output", 0).value())
        assert rank.tensor(0, it, "global_step").value().tolist() == [it + 1]


def test_model_data_parallel_ranks_share_weights_not_local_gradients(make_dump) -> None:
    dump = open_dump(make_dump(ranks=2, iterations=2))
    r0, r1 = dump.ranks
    wgrad = f"Gradients/{BB}/fc2-Dense/Grad_MatMul/MatMul-op2"
    reduced = "Default/grad_reducer-DistributedGradReducer/AllReduce-op3"
    np.testing.assert_array_equal(r0.tensor(0, 1, "fc1.weight").value(), r1.tensor(0, 1, "fc1.weight").value())
    np.testing.assert_array_equal(r0.tensor(0, 1, reduced).value(), r1.tensor(0, 1, reduced).value())
    assert not np.array_equal(r0.tensor(0, 1, wgrad).value(), r1.tensor(0, 1, wgrad).value())
    total = r0.tensor(0, 1, wgrad).value() + r1.tensor(0, 1, wgrad).value()
    np.testing.assert_allclose(r0.tensor(0, 1, reduced).value(), total, rtol=1e-6)


def test_model_values_override_reaches_files_and_consumers(make_dump) -> None:
    marker = np.full((2, 3), 7.5, np.float32)
    odd = np.arange(5, dtype=np.float16)

    def values(rank: int, it: int, node: str, io: str, slot: int, default: np.ndarray) -> np.ndarray | None:
        if it == 1 and node == MM1 and io == "output":
            return marker
        if node == "inputs1" and io == "output":
            return odd
        return None

    rank = open_dump(make_dump(iterations=2, values=values)).rank(0)
    np.testing.assert_array_equal(rank.tensor(0, 1, MM1).value(), marker)
    np.testing.assert_array_equal(rank.tensor(0, 1, BA1, "input", 0).value(), marker)   # flows to the consumer
    assert not np.array_equal(rank.tensor(0, 0, MM1).value(), marker)
    ref = rank.tensor(0, 0, "inputs1")
    assert (ref.shape, ref.dtype, ref.file_dtype) == ((5,), np.dtype("float16"), "float16")
    np.testing.assert_array_equal(ref[1:3], odd[1:3])
