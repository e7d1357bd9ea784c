"""The MindSpore reader on framework-written dumps (tests/data/corpus_ms, made by make_corpus_ms.py with
MindSpore 2.10 on CPU; each dump's <name>.truth.json holds what the training script and numpy know apart
from tdbg). Reader-level facts only: which tensors are read, of what kind, at which iterations.
"""
from __future__ import annotations

import json
import os

import pytest

from clirun import run_cli

from debugger import open_dump
from debugger.model.rank import Rank
from debugger.model.serialize import dump_info

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "corpus_ms")
DUMPS = sorted(d for d in os.listdir(DATA) if os.path.isdir(os.path.join(DATA, d)))
WITH_GRAPHS = [d for d in DUMPS if d != "no_graphs_nan"]
# every dump whose files hold the Parameter outputs (the weights after each step)
WITH_PARAMETER_FILES = [d for d in WITH_GRAPHS if d not in ("kernels_nan", "inputs_only_nan")]


def _truth(name: str) -> dict:
    with open(os.path.join(DATA, name, f"{name}.truth.json")) as f:
        return json.load(f)


def _rank(name: str) -> Rank:
    return open_dump(os.path.join(DATA, name)).ranks[0]


def test_the_corpus_is_complete() -> None:
    assert DUMPS == sorted(["control_flow", "full_healthy", "full_nan", "functional_loop", "inputs_only_nan",
                            "iterations_gap", "kernels_nan", "momentum_nowd", "momentum_wd", "no_graphs_nan",
                            "outputs_only_nan", "pynative_nan", "train_one_step"])


@pytest.mark.parametrize("name", WITH_GRAPHS)
def test_info_lists_every_trainable_weight(name: str) -> None:
    """control_flow: conv1.weight is read in graph 0 and updated in graph 4; it was missing."""
    truth = _truth(name)
    assert dump_info(open_dump(os.path.join(DATA, name)))["trainable_weights"] == sorted(truth["trainable"])


def test_a_weight_is_a_weight_in_every_graph_that_reads_it() -> None:
    """control_flow: the graph of the forward conv holds conv1.weight, the optimizer's graph updates it."""
    rank = _rank("control_flow")
    truth = _truth("control_flow")
    holders = {gid: g.node("conv1.weight").kind for gid, g in rank.graphs.items() if "conv1.weight" in g}
    assert len(holders) >= 2 and set(holders.values()) == {"weight"}, holders
    kinds = dict(rank.parameters())
    assert {w: kinds[w] for w in truth["trainable"]} == {w: "weight" for w in truth["trainable"]}
    for gid in rank.graph_ids:
        for it in rank.iterations(gid):
            for ref in rank.tensors(gid, it):
                if ref.op_type == "Parameter" and ref.node in truth["trainable"]:
                    assert (ref.kind, ref.param) == ("weight", ref.node), (gid, it, ref.node)


def test_only_the_loss_is_the_loss_in_a_control_flow_net() -> None:
    """Branch and loop graphs end in a Tanh, a ReLU, a comparison: none of them is the loss (every node under
    WithLossCell's scope was taken for one), and the activations are activations."""
    rank = _rank("control_flow")
    losses = [(gid, n.name) for gid, g in rank.graphs.items() for n in g.nodes("loss")]
    assert [rank.graph(gid).node(n).op_type for gid, n in losses] == ["SparseSoftmaxCrossEntropyWithLogits"]
    acts = {(rank.graph(gid).node(n.name).op_type, str(n.kind)) for gid, g in rank.graphs.items()
            for n in g.nodes() if n.op_type in ("Tanh", "ReLU") and not n.is_backward}
    assert acts == {("Tanh", "activation"), ("ReLU", "activation")}


@pytest.mark.parametrize("name", ["momentum_nowd", "momentum_wd", "full_healthy", "full_nan", "functional_loop",
                                  "train_one_step", "iterations_gap", "kernels_nan", "outputs_only_nan"])
def test_every_trainable_weight_has_its_gradient(name: str) -> None:
    """With and without weight decay (AddN on the way or not); BatchNorm's gamma and beta through
    TupleGetItem to slots 1 and 2 of BatchNormGrad."""
    truth = _truth(name)
    rank = _rank(name)
    found: dict[str, set[tuple[str, int]]] = {}
    for ref in rank.tensors(0, rank.iterations(0)[0]):
        if ref.io == "output" and ref.kind == "gradient" and rank.graph(0).node(ref.node).is_backward:
            found.setdefault(ref.param, set()).add((ref.op_type, ref.slot))
    assert sorted(found) == sorted(truth["trainable"])
    for w in truth["trainable"]:
        if w.endswith((".gamma", ".beta")):
            assert found[w] == {("BatchNormGrad", 1 if w.endswith("gamma") else 2)}


def test_weight_decay_adds_a_term_the_gradient_is_not() -> None:
    """momentum_wd: the optimizer's gradient input is AddN(decay term, gradient) for the weights MindSpore
    decays (not BatchNorm's gamma and beta); the backprop kernel is the gradient, the decay term optimizer
    state of its weight (momentum_nowd has no decay term)."""
    wd, nowd = _rank("momentum_wd").graph(0), _rank("momentum_nowd").graph(0)
    decay = sorted(n.param for n in wd.nodes("optimizer_state") if not n.is_parameter)
    assert decay == sorted(_truth("momentum_wd")["weight_decayed"])
    assert not [n for n in nowd.nodes("optimizer_state") if not n.is_parameter]


@pytest.mark.parametrize("name", DUMPS)
def test_iterations_read_are_those_dumped(name: str) -> None:
    truth = _truth(name)
    rank = _rank(name)
    assert sorted(rank.graph_ids) == sorted(int(g) for g in truth["graphs"]) or name == "control_flow"
    for gid, g in truth["graphs"].items():
        assert rank.iterations(int(gid)) == g["iterations"], gid


def test_a_gap_in_the_dumped_iterations() -> None:
    """iteration "0|2-3": 0, 2 and 3 read; the graph's run history (the csv) holds only those, so the step
    before 2 in the dump is 0 (the run trained 4 steps: truth)."""
    rank = _rank("iterations_gap")
    assert rank.iterations() == [0, 2, 3] and _truth("iterations_gap")["steps_trained"] == 4
    assert rank.previous_iteration(0, 2) == 0


@pytest.mark.parametrize("name", DUMPS)
def test_one_tensor_per_file_of_each_iteration(name: str) -> None:
    """Every file is read; several files of one (kernel, io, slot) in one iteration are one tensor (the
    newest): control_flow's while-loop graphs run twice an iteration and write each tensor twice."""
    truth = _truth(name)
    rank = _rank(name)
    for gid, g in truth["graphs"].items():
        for it, facts in g["per_iteration"].items():
            refs = rank.tensors(int(gid), int(it))
            assert len(refs) == facts["distinct_tensors"], (gid, it)
            if name != "control_flow":
                assert facts["distinct_tensors"] == facts["npy_files"]
            assert all(r.matched for r in refs) or name == "no_graphs_nan", [r.node for r in refs if not r.matched]


@pytest.mark.parametrize("name", WITH_PARAMETER_FILES)
def test_parameter_files_are_read_with_their_kind(name: str) -> None:
    truth = _truth(name)
    rank = _rank(name)
    for gid in rank.graph_ids:
        for it in rank.iterations(gid):
            for ref in rank.tensors(gid, it):
                if ref.op_type != "Parameter":
                    continue
                if ref.node in truth["trainable"]:
                    assert ref.kind == "weight", (ref.node, ref.kind)
                elif ref.node.startswith("moments."):
                    assert (ref.kind, ref.param) == ("optimizer_state", ref.node[len("moments."):])
                elif ref.node.startswith("inputs"):
                    assert ref.kind == "input"


@pytest.mark.parametrize("name", ["full_nan", "kernels_nan", "outputs_only_nan"])
def test_forward_outputs_are_read_with_their_kind(name: str) -> None:
    """The loss kernel's output is the loss, the Tanh's an activation, wherever outputs are dumped."""
    rank = _rank(name)
    kinds = {(r.op_type, str(r.kind)) for r in rank.tensors(0, 0) if r.io == "output"}
    assert ("SparseSoftmaxCrossEntropyWithLogits", "loss") in kinds
    assert ("Tanh", "activation") in kinds


def test_a_kernel_list_dump_holds_only_the_kernels_listed() -> None:
    truth = _truth("kernels_nan")
    listed = {k.replace("/", "_") for k in truth["kernels"]}
    rank = _rank("kernels_nan")
    refs = rank.tensors(0, 2)
    assert refs and {r.op_type for r in refs}.isdisjoint({"Parameter", "ApplyMomentum"})
    assert {r.node.replace("/", "_") for r in refs} <= listed


@pytest.mark.parametrize("name,io", [("inputs_only_nan", "input"), ("outputs_only_nan", "output")])
def test_one_side_dumps_hold_that_side(name: str, io: str) -> None:
    rank = _rank(name)
    assert {r.io for it in rank.iterations(0) for r in rank.tensors(0, it)} == {io}


def test_inputs_only_weights_are_known_from_the_graph() -> None:
    """No Parameter file in an inputs-only dump: the forward MatMul's weight input is fc1.weight by the graph."""
    rank = _rank("inputs_only_nan")
    graph = rank.graph(0)
    matmul = next(r for r in rank.tensors(0, 0) if r.op_type == "MatMul" and not graph.node(r.node).is_backward
                  and "fc1" in r.node and r.slot == 1)
    assert graph.value_inputs(matmul.node)[1] == "fc1.weight"
    assert graph.node("fc1.weight").kind == "weight"


def test_pynative_dumps_the_optimizer_graph_with_its_roles() -> None:
    """PyNative: only the optimizer graph is dumped; each ApplyMomentum names its weight (input 0) and its
    gradient (input 3, a graph input: no backprop kernel in the dump)."""
    truth = _truth("pynative_nan")
    rank = _rank("pynative_nan")
    graph = rank.graph(0)
    kernels = [n for n in graph.nodes() if n.op_type == "ApplyMomentum"]
    assert sorted(graph.value_inputs(n.name)[0] for n in kernels) == sorted(truth["trainable"])
    assert {n.input_roles[:4] for n in kernels} == {("weight", "state", "hyper", "gradient")}
    assert rank.iterations(0) == [0, 1, 2, 3]


def test_no_graphs_reads_every_file_and_says_why_kinds_are_missing() -> None:
    rank = _rank("no_graphs_nan")
    assert rank.iterations() == [0, 1, 2, 3]
    assert rank.tensors(0, 2) and not rank.graphs
    assert any("no readable graph" in w for w in rank.warnings)


def test_the_functional_loop_and_train_one_step_agree() -> None:
    """Truth: the two trainers' losses are bit-identical; tdbg reads the same weights from both."""
    fl, tos = _truth("functional_loop"), _truth("train_one_step")
    assert fl["losses_bit_identical_to"] == {"train_one_step": True}
    assert dump_info(open_dump(os.path.join(DATA, "functional_loop")))["trainable_weights"] == \
        dump_info(open_dump(os.path.join(DATA, "train_one_step")))["trainable_weights"] == sorted(tos["trainable"])


@pytest.mark.parametrize("name", ["momentum_nowd", "momentum_wd", "full_healthy"])
def test_info_counts_every_weight_with_a_gradient(name: str) -> None:
    """Momentum without weight decay: BatchNormGrad makes gamma's and beta's gradients as output slots of one
    kernel; info counted gradient nodes (5 of 9 weights), as if the BatchNorm gradients were missing."""
    from clirun import run_cli

    trained = _truth(name)["trainable"]
    r = run_cli("info", os.path.join(DATA, name), "--json")
    [rank] = r.json["ranks"]
    assert rank["weights_with_gradient"] == len(trained) == len(_rank(name).gradient_params() & set(trained))
    text = run_cli("info", os.path.join(DATA, name)).out
    assert "with grad" in text


def test_control_flow_gradients_passed_between_graphs_are_gradients() -> None:
    """control_flow: four of the five gradients reach the optimizer's graph as graph inputs (made in the loop's
    graphs and passed in); they were kind other, so the gradient watchpoints' "checked 4 tensors" read as
    every gradient checked. Each is its weight's gradient now, and the scan counts the 16 it could not read."""
    truth = _truth("control_flow")
    rank = _rank("control_flow")
    assert rank.gradient_params() == set(truth["trainable"])
    passed_in = {n.param for g in rank.graphs.values() for n in g.nodes("gradient") if n.is_parameter}
    assert len(passed_in) == 4 and passed_in < set(truth["trainable"])
    r = run_cli("scan", os.path.join(DATA, "control_flow"), "--json", "--no-cache", "--watch", "gradient_vanishing")
    [cov] = r.json["coverage"]["watchpoints"]
    assert cov["status"] == "partial" and cov["checked"] == 4 and cov["unchecked"] == 4 * len(passed_in)
    assert cov["reasons"][0]["reason"].startswith("in the graph, not in the dump")


def test_a_jit_functions_arguments_are_its_data_inputs() -> None:
    """functional_loop: the batch of a @jit step function arrives as its arguments x and y (kind other: a NaN
    in them could not be named data-borne); they are the data input, as TrainOneStepCell's inputs0 and
    inputs1, and global_step (assigned to) is not."""
    kinds = {n.name: str(n.kind) for n in _rank("functional_loop").graph(0).nodes() if n.is_parameter}
    assert (kinds["x"], kinds["y"], kinds["global_step"]) == ("input", "input", "other")
    cell = {n.name: str(n.kind) for n in _rank("train_one_step").graph(0).nodes() if n.is_parameter}
    assert (cell["inputs0"], cell["inputs1"]) == ("input", "input")
