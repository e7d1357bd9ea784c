"""Graphs and node kinds from graph evidence (optimizer inputs), never from names."""
from __future__ import annotations

import os

import pytest

from debugger import open_dump
from debugger.formats.mindspore.graph_ir import read_graph_ir
from debugger.formats.mindspore.graph_pb import read_graph_pb
from debugger.formats.mindspore.matching import file_key, op_number
from debugger.formats.mindspore.semantics import annotate, is_backward
from debugger.model.graph import Graph

BB = "Default/network-WithLossCell/_backbone-Net"
GRAD = f"Gradients/{BB}/fc2-Dense"
LOSS = ("Default/network-WithLossCell/_loss_fn-SoftmaxCrossEntropyWithLogits/"
        "SparseSoftmaxCrossEntropyWithLogits-op0")
THREE = (("l1", 5, 4, "ReLU"), ("l2", 4, 3, "Tanh"), ("l3", 3, 2, None))


def _graph(root: str, rank: int = 0) -> Graph:
    return open_dump(root).rank(rank).graph(0)


def _kinds(g: Graph, kind: str) -> dict[str, str | None]:
    return {n.name: n.param for n in g.nodes(kind)}


def test_kinds_of_the_default_mlp(make_dump) -> None:
    g = _graph(make_dump(iterations=1))
    assert _kinds(g, "weight") == {p: p for p in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")}
    # every gradient kernel sits under the LAST layer's scope: the param comes from the optimizer
    assert _kinds(g, "gradient") == {f"{GRAD}/Grad_BiasAdd/BiasAddGrad-op0": "fc2.bias",
                                     f"{GRAD}/Grad_MatMul/MatMul-op0": "fc2.weight",
                                     f"{GRAD}/Grad_BiasAdd/BiasAddGrad-op1": "fc1.bias",
                                     f"{GRAD}/Grad_MatMul/MatMul-op2": "fc1.weight"}
    assert _kinds(g, "optimizer_state") == {"moments.fc1.weight": "fc1.weight", "moments.fc1.bias": "fc1.bias",
                                            "moments.fc2.weight": "fc2.weight", "moments.fc2.bias": "fc2.bias",
                                            "learning_rate": "learning_rate", "momentum": "momentum"}
    assert list(_kinds(g, "activation")) == [f"{BB}/fc1_act-Sigmoid/Sigmoid-op0"]
    assert list(_kinds(g, "loss")) == [LOSS]
    assert set(_kinds(g, "input")) == {"inputs0", "inputs1"}
    assert set(_kinds(g, "constant")) == {f"Default_data-{i}" for i in range(5)}
    assert g.node(f"{GRAD}/Grad_MatMul/MatMul-op1").kind == "other"    # an input gradient, not a weight's
    assert g.node(f"Gradients/{BB}/fc1_act-Sigmoid/Grad_Sigmoid/SigmoidGrad-op0").kind == "other"
    assert g.node("global_step").kind == "other"


def test_kinds_param_never_follows_the_scope(make_dump) -> None:
    g = _graph(make_dump(iterations=1, layers=THREE))
    grads = _kinds(g, "gradient")
    assert len(grads) == 6 and set(grads.values()) == {f"l{i}.{p}" for i in (1, 2, 3) for p in ("weight", "bias")}
    assert all("/l3-Dense/" in n for n in grads)
    for name, param in grads.items():   # each is the gradient input (3) of the ApplyMomentum updating param
        opt = [c for c in g.node(name).consumers if g.node(c).op_type == "ApplyMomentum"]
        assert len(opt) == 1 and g.node(opt[0]).inputs[0][0] == param and g.node(opt[0]).inputs[3][0] == name
    assert {n.op_type for n in g.nodes("activation")} == {"ReLU", "Tanh"}


def test_kinds_of_data_parallel_gradients_through_allreduce(make_dump) -> None:
    g = _graph(make_dump(ranks=2, iterations=1), rank=1)
    grads = _kinds(g, "gradient")
    reducer = "Default/grad_reducer-DistributedGradReducer"
    assert {n.rsplit("/", 1)[-1]: p for n, p in grads.items() if n.startswith(reducer)} == {
        "AllReduce-op0": "fc2.bias", "Mul-op0": "fc2.bias", "AllReduce-op1": "fc2.weight", "Mul-op1": "fc2.weight",
        "AllReduce-op2": "fc1.bias", "Mul-op2": "fc1.bias", "AllReduce-op3": "fc1.weight", "Mul-op3": "fc1.weight"}
    assert grads[f"{GRAD}/Grad_MatMul/MatMul-op2"] == "fc1.weight"   # the local gradient before the reduction
    assert len(grads) == 12 and g.kind_counts()["weight"] == 4


def test_kinds_of_adam_state(make_dump) -> None:
    g = _graph(make_dump(iterations=1, optimizer="Adam"))
    state = _kinds(g, "optimizer_state")
    assert {n: p for n, p in state.items() if n.startswith("moment")} == {
        f"moment{k}.fc{i}.{w}": f"fc{i}.{w}" for k in (1, 2) for i in (1, 2) for w in ("weight", "bias")}
    assert {"beta1_power", "beta2_power", "learning_rate"} <= set(state)
    assert set(_kinds(g, "gradient").values()) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}


@pytest.mark.parametrize("options", [{}, {"ranks": 2}, {"layers": THREE}, {"optimizer": "Adam"}, {"version": "2.2"}],
                         ids=["mlp", "data-parallel", "three-layers", "adam", "short-names"])
def test_ir_fallback_gives_the_same_nodes_and_kinds(make_dump, options: dict) -> None:
    root = make_dump(iterations=1, **options)
    graphs = os.path.join(root, "rank_0", "graphs")
    from_pb = Graph(annotate(read_graph_pb(os.path.join(graphs, "ms_output_trace_code_graph_0.pb"), 0)))
    from_ir = Graph(annotate(read_graph_ir(os.path.join(graphs, "ms_output_trace_code_graph_0.ir"), 0)))

    def summary(g: Graph) -> dict:
        return {n.name: (n.op_type, n.kind, n.param, n.scope,
                         [s for s, _ in n.inputs if not s.startswith("Default_data")], n.stack)
                for n in g.nodes() if n.kind != "constant"}

    pb, ir = summary(from_pb), summary(from_ir)
    assert pb.keys() == ir.keys()
    for name in pb:   # .ir keeps literal arguments as empty names, so input slots line up with the .pb
        assert pb[name][:4] == ir[name][:4] and pb[name][5] == ir[name][5], name
        assert pb[name][4] == [s for s in ir[name][4] if s], name
    assert from_pb.outputs and [n.name for n in from_ir.nodes("loss")] == [n.name for n in from_pb.nodes("loss")] != []


@pytest.mark.parametrize("name", ["single", "dp2"])
def test_ir_fallback_agrees_with_pb_on_the_real_sample(sample_root: str, name: str) -> None:
    graphs = os.path.join(sample_root, name, "rank_0", "graphs")
    from_pb = Graph(annotate(read_graph_pb(os.path.join(graphs, "ms_output_trace_code_graph_0.pb"), 0)))
    from_ir = Graph(annotate(read_graph_ir(os.path.join(graphs, "ms_output_trace_code_graph_0.ir"), 0)))

    def summary(g: Graph) -> dict:
        # real .ir stacks of backward nodes hold a few more framework frames than the .pb: compare user frames
        return {n.name: (n.op_type, n.kind, n.param,
                         {(f.location, f.forward_candidate) for f in n.stack if not f.is_framework})
                for n in g.nodes() if n.kind != "constant"}

    assert summary(from_pb) == summary(from_ir)


def test_ir_fallback_is_what_a_dump_without_pb_uses(make_dump) -> None:
    root = make_dump(iterations=1, write_pb=False)
    dump = open_dump(root)
    g = dump.rank(0).graph(0)
    graphs = os.path.join(root, "rank_0", "graphs")
    # a missing .pb is said, naming both files: the .ir may hold fewer nodes
    assert g.source_file.endswith(".ir") and dump.all_warnings() == [
        f"{graphs}/ms_output_trace_code_graph_0.pb: missing; graph 0 is read from "
        f"{graphs}/ms_output_trace_code_graph_0.ir instead, which can hold fewer nodes"]
    assert g.kind_counts() == {"weight": 4, "gradient": 4, "optimizer_state": 6, "activation": 1, "loss": 1,
                               "input": 2, "other": 33}


def test_graph_execution_order_comes_from_the_csv(make_dump) -> None:
    root = make_dump(iterations=1)
    g = _graph(root)
    with open(os.path.join(root, "rank_0", "execution_order", "ms_execution_order_graph_0.csv")) as f:
        order = f.read().split()[1:]
    assert g.execution_order == order and len(order) == 18
    assert g.node(order[0]).execution_index == 0 and g.node("fc1.weight").execution_index is None
    assert not any(g.node(n).is_routing for n in order)
    assert g.node(f"{BB}/Load-op0").is_routing


def test_graph_structure_and_helpers(make_dump) -> None:
    g = _graph(make_dump(iterations=1))
    mm = g.node(f"{BB}/fc1-Dense/MatMul-op0")
    assert [s for s, _ in mm.inputs] == ["inputs0", f"{BB}/Load-op0", "Default_data-1", "Default_data-2"]
    assert mm.scope == f"{BB}/fc1-Dense" and mm.outputs[0].shape == (2, 3) and mm.outputs[0].dtype == "float32"
    assert f"{BB}/fc1-Dense/BiasAdd-op0" in mm.consumers
    assert g.value_source(f"{BB}/Load-op0") == "fc1.weight"
    assert g.value_source(g.outputs[0]) == LOSS       # MakeTuple -> Depend -> Depend input 0
    assert is_backward(f"{GRAD}/Grad_MatMul/MatMul-op0") and not is_backward(LOSS)
    assert g.node(f"{GRAD}/Grad_MatMul/MatMul-op0").is_backward
    assert op_number(f"{GRAD}/Grad_MatMul/MatMul-op12") == 12 and op_number("fc1.weight") == -1
    assert file_key(g.record, "fc1_weight") == "fc1.weight"
    assert file_key(g.record, f"{BB}/fc1-Dense/MatMul-op0".replace("/", "_")) == f"{BB}/fc1-Dense/MatMul-op0"
    with pytest.raises(KeyError):
        g.node("no/such/node")


def test_graph_of_ranks_is_parsed_once(make_dump) -> None:
    dump = open_dump(make_dump(ranks=3, iterations=1))
    assert dump.rank(0).graph(0) is dump.rank(1).graph(0) is dump.rank(2).graph(0)


def test_kinds_of_the_real_data_parallel_sample(sample_root: str) -> None:
    g = open_dump(os.path.join(sample_root, "dp2")).rank(0).graph(0)
    grads = _kinds(g, "gradient")
    weights = set(_kinds(g, "weight"))
    assert weights == {"conv1.weight"} | {f"fc{i}.{p}" for i in (1, 2, 3) for p in ("weight", "bias")}
    assert set(grads.values()) == weights
    conv = [n for n, p in grads.items() if p == "conv1.weight"]
    assert {g.node(n).op_type for n in conv} == {"Conv2DBackpropFilter", "AllReduce", "Mul"}
    assert list(_kinds(g, "loss")) == [LOSS]
