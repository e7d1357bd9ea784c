"""The recommended preset on mindcv's ResNet trained by MindSpore 2.10 (tests/data/mindcv, made by
make_mindcv.py, which records beside each dump what it knows apart from the dump: truth.json).

A healthy run is quiet; every trainable weight has its backprop gradient found (BatchNorm's gamma and
beta: slots 1 and 2 of BatchNormGrad, reached through TupleGetItem); BatchNorm's outputs that the CPU
kernel leaves unwritten are listed but never checked; a dead ReLU, a frozen layer and a NaN in the data
are found, each as the first hit.
"""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.watch import preset, scan
from tests.clirun import run_cli

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mindcv")
BLOCK = "layer1-SequentialCell/0-BasicBlock/"


def _truth(variant: str) -> dict:
    with open(os.path.join(DATA, variant, "truth.json")) as f:
        return json.load(f)


def _scan(path: str):  # type: ignore[no-untyped-def]
    return scan(open_dump(path), preset("recommended"), jobs=1, cache=StatsCache(enabled=False))


def _gradients(path: str) -> dict[str, list]:
    """Weight -> the backward tensors of iteration 0 that tdbg calls its gradient."""
    rank = open_dump(path).ranks[0]
    graph = rank.graph(0)
    out: dict[str, list] = {}
    for ref in rank.tensors(0, 0):
        if ref.io == "output" and ref.kind == "gradient" and graph.node(ref.node).is_backward:
            out.setdefault(ref.param, []).append(ref)
    return out


def test_the_healthy_run_trains() -> None:
    losses = _truth("resnet_healthy")["losses"]
    assert losses[1] < losses[0]


def test_the_recommended_preset_is_quiet_on_the_healthy_run() -> None:
    truth = _truth("resnet_healthy")
    res = _scan(os.path.join(DATA, "resnet_healthy"))
    assert res.hits == [], [(h.watchpoint, h.iteration, h.node, h.slot) for h in res.hits]
    # The only records left say that an update ratio from an all-zero start is undefined: the rule does
    # not apply to the zero-initialised betas and bias (summarised once by the watch engine's summary)
    assert {(e.watchpoint, e.node) for e in res.errors} <= {("weight_change_too_large", p)
                                                             for p in truth["zero_initialised"]}
    assert all("update ratio undefined" in e.error for e in res.errors)


@pytest.mark.parametrize("variant", ["resnet_healthy", "resnet_dead"])
def test_every_trainable_weight_has_its_backprop_gradient(variant: str) -> None:
    truth = _truth(variant)
    found = _gradients(os.path.join(DATA, variant))
    assert sorted(found) == sorted(truth["trainable"])
    for name in truth["trainable"]:
        if name.endswith((".gamma", ".beta")):   # BatchNormGrad: gamma's gradient is slot 1, beta's slot 2
            (ref,) = found[name]
            assert (ref.op_type, ref.slot) == ("BatchNormGrad", 1 if name.endswith("gamma") else 2)


def test_the_gradient_found_is_what_the_optimizer_adds_weight_decay_to() -> None:
    """Truth from the dump's own optimizer inputs: ApplyMomentum's gradient input is AddN(decay, grad),
    the decay term is 1e-4 times the weight the step started from (the forward kernels' input)."""
    path = os.path.join(DATA, "resnet_healthy")
    rank = open_dump(path).ranks[0]
    graph = rank.graph(0)
    tmap = rank.tensor_map(0, 0)
    found = _gradients(path)
    checked = 0
    for kernel in graph.execution_order:
        roles = graph.node(kernel).input_roles
        if not roles:
            continue
        weight = graph.value_inputs(kernel)[roles.index("weight")]
        applied = tmap[(kernel, "input", roles.index("gradient"))].value()
        (grad,) = found[weight]
        reader, slot = next((n, s) for n, s in _forward_readers(graph, weight))
        before = tmap[(reader, "input", slot)].value()
        np.testing.assert_allclose(applied, grad.value() + 1e-4 * before, rtol=1e-5, atol=1e-7)
        checked += 1
    assert checked == len(_truth("resnet_healthy")["trainable"])


def _forward_readers(graph, weight: str):  # type: ignore[no-untyped-def]
    from debugger.model.locate import readers
    return readers(graph)[weight]


def test_batchnorm_slots_the_cpu_kernel_leaves_unwritten_are_listed_but_never_checked() -> None:
    path = os.path.join(DATA, "resnet_healthy")
    rank = open_dump(path).ranks[0]
    graph = rank.graph(0)
    bns = [n.name for n in graph.nodes() if n.op_type == "BatchNorm"]
    assert len(bns) == len([p for p in _truth("resnet_healthy")["trainable"] if p.endswith(".gamma")])
    for n in bns:
        outs = graph.node(n).outputs
        assert [o.undefined for o in outs] == [False, True, True, False, False]
        x = rank.tensor(0, 0, n, "input", 0).value().astype(np.float64)
        # what the kernel does write: slots 3 and 4 are the batch's mean and variance
        np.testing.assert_allclose(rank.tensor(0, 0, n, "output", 3).value(), x.mean((0, 2, 3)), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(rank.tensor(0, 0, n, "output", 4).value(), x.var((0, 2, 3)), rtol=1e-3, atol=1e-5)
    # the stem's slots 1-2 are all zero in this dump: a check would have fired there
    stem = next(n for n in bns if "/bn1-BatchNorm2d/" in n and "layer" not in n)
    assert not np.any(rank.tensor(0, 0, stem, "output", 1).value())
    res = run_cli("scan", path, "--watch", "tensor_all_zero", "--no-cache", "--json")
    assert res.code == 0 and res.json["hits"] == []


def test_the_ir_text_gives_the_same_gradients(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """TupleGetItem's index is a literal (I64(2)) in the .ir: read when the .pb is missing."""
    copy = tmp_path / "resnet_healthy"
    shutil.copytree(os.path.join(DATA, "resnet_healthy"), copy)
    (copy / "rank_0" / "graphs" / "ms_output_trace_code_graph_0.pb").unlink()
    found = _gradients(str(copy))
    assert sorted(found) == sorted(_truth("resnet_healthy")["trainable"])
    graph = open_dump(str(copy)).ranks[0].graph(0)
    bn = next(n.name for n in graph.nodes() if n.op_type == "BatchNorm")
    assert [o.undefined for o in graph.node(bn).outputs][1:3] == [True, True]


def test_a_dead_relu_block_is_found_first() -> None:
    path = os.path.join(DATA, "resnet_dead")
    rank = open_dump(path).ranks[0]
    relu = next(n for n in rank.graph(0) if n.endswith(BLOCK + "relu-ReLU/ReLU-op0"))
    assert not np.any(rank.tensor(0, 0, relu, "output", 0).value())   # truth: the planted layer is dead
    res = _scan(path)
    dead = {h.node for h in res.hits if h.watchpoint == "activation_dead_layer"}
    assert relu in dead and all(BLOCK in n for n in dead)
    assert res.hits[0].node == relu
    assert (res.first.watchpoint, res.first.node) == ("activation_dead_layer", relu)   # the headline: the cause


def test_a_frozen_layer_is_found_first() -> None:
    truth = _truth("resnet_frozen")
    frozen = truth["planted"]["parameter"]
    res = _scan(os.path.join(DATA, "resnet_frozen"))
    assert [(h.watchpoint, h.node) for h in res.hits] == [("weight_not_changed", frozen)]
    out = run_cli("scan", os.path.join(DATA, "resnet_frozen"), "--no-cache", "--json")
    assert out.code == 1 and out.json["first"]["node"] == frozen


def test_a_nan_in_the_data_is_found_at_its_origin_first() -> None:
    path = os.path.join(DATA, "resnet_nan")
    rank = open_dump(path).ranks[0]
    assert not np.isnan(rank.tensor(0, 0, "inputs0").value()).any()
    assert np.isnan(rank.tensor(0, 1, "inputs0").value()).sum() == 1
    out = run_cli("scan", path, "--no-cache", "--json")
    assert out.code == 1
    first = out.json["first"]
    assert (first["watchpoint"], first["iteration"], first["node"]) == ("overflow", 1, "inputs0")
    assert not [h for h in out.json["hits"] if h["iteration"] == 0]


def test_converted_to_tdbg_h5_it_stays_quiet_and_keeps_each_slot_s_gradient(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "h5"
    assert run_cli("convert", os.path.join(DATA, "resnet_healthy"), str(out)).code == 0
    assert sorted(_gradients(str(out))) == sorted(_truth("resnet_healthy")["trainable"])
    res = _scan(str(out))
    assert res.hits == [], [(h.watchpoint, h.node, h.slot) for h in res.hits]
