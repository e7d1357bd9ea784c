"""The recommended preset on real MindSpore 2.10 runs (tests/data/realruns, made by make_realruns.py).

Healthy runs with each optimizer MindSpore runs on CPU must be quiet (Adam's and AdamWeightDecay's
kernels return all-zero placeholder outputs, plain SGD keeps an all-zero momentum buffer); a layer
whose outputs are at least 90 % saturated, or a ReLU layer that is dead, must fire at every batch
size from 4 to 64, and the healthy layers beside them never.
"""
from __future__ import annotations

import os

import pytest

from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.watch import preset, scan
from debugger.watch.registry import Watchpoint

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "realruns")
OPTIMIZERS = ["SGD", "Momentum", "Adam", "AdamWeightDecay", "Adagrad", "RMSProp", "FTRL"]
BATCHES = [4, 8, 16, 32, 64]


def _layer(node: str) -> str:
    return node.split("/")[-2].split("-")[0].removesuffix("_act")


def _scan(path: str, wps: list[Watchpoint]) -> list:
    return scan(open_dump(path), wps, jobs=1, cache=StatsCache(enabled=False)).hits


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_the_recommended_preset_is_quiet_on_a_healthy_run(name: str) -> None:
    path = os.path.join(DATA, "optimizers", name)
    hits = _scan(path, preset("recommended"))
    assert hits == [], [(h.watchpoint, h.node, h.io, h.slot) for h in hits]


def test_placeholder_outputs_are_why_adam_used_to_fire() -> None:
    """Adam's kernel outputs on CPU are placeholders: all zero in some iterations and not in others, for
    the same (kernel, slot). tensor_all_zero skips outputs of in-place updates (the updated parameters
    are checked as their own tensors), while a genuinely all-zero tensor (the dead ReLU's output) fires."""
    r = open_dump(os.path.join(DATA, "optimizers", "Adam")).rank(0)
    zero = [{t.key for t in r.tensors(iteration=it) if t.op_type == "Adam" and t.io == "output"
             and not t.value().any()} for it in (0, 1)]
    assert zero[0] and zero[1] and zero[0] != zero[1]
    dead = _scan(os.path.join(DATA, "batch8"), [Watchpoint.parse("tensor_all_zero")])
    assert "relu_dead" in {_layer(h.node) for h in dead if h.kind == "activation"}


@pytest.mark.parametrize("batch", BATCHES)
def test_planted_layers_fire_at_every_batch_size_and_healthy_ones_never(batch: int) -> None:
    path = os.path.join(DATA, f"batch{batch}")
    hits = _scan(path, preset("recommended"))
    fired = {(h.watchpoint, _layer(h.node), h.iteration) for h in hits
             if h.watchpoint in ("activation_saturated_layer", "activation_dead_layer")}
    assert fired == {(w, layer, it) for it in (0, 1) for w, layer in (
        ("activation_saturated_layer", "tanh_sat"), ("activation_saturated_layer", "sig_sat"),
        ("activation_dead_layer", "relu_dead"))}
    share = {(_layer(h.node), h.iteration): h.actual["saturated_percentage_gt"] for h in hits
             if h.watchpoint == "activation_saturated_layer"}
    assert all(v >= 90 for v in share.values()), share          # planted: at least 90 % saturated
    healthy = {"tanh_ok", "relu_ok"}
    assert not any(_layer(h.node) in healthy for h in hits if h.kind == "activation")


def test_the_per_unit_rule_depends_on_the_batch_size() -> None:
    """Why the preset changed: SageMaker's per-unit saturation misses the same saturated sigmoid as the
    batch grows (a unit counts only when nearly every sample in the batch is saturated)."""
    wp = [Watchpoint.parse("activation_saturation:threshold_inactivity=1,threshold_layer=50")]
    found = {b: {_layer(h.node) for h in _scan(os.path.join(DATA, f"batch{b}"), wp)} for b in BATCHES}
    assert "sig_sat" not in found[64] and "tanh_sat" not in found[64]
    assert any(found[b] != found[64] for b in BATCHES)
