"""Every condition's exact hits and misses on dumps with planted statistics, boundaries included.

Planted values are exactly representable in float32 and their sums are exact, so a statistic equals
its threshold exactly at a boundary: ``gt``/``lt`` miss there, ``ge`` hits. Thresholds sit far from
what the dump maker's random tensors can reach, so the expected hit lists are complete.
"""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import dumpmaker
from watch_kit import (BATCH, F32, LAYERS, Plant, down, errors, full, hit_keys, hits, make, run, up, wp)

OPS = {"gt": operator.gt, "lt": operator.lt}
# 16-element tensors with exact statistics
TENSORS = {
    "signed": [64.0] * 12 + [-128.0] * 4,          # mean 16, abs_mean 80, max 64, min -128
    "pos": [64.0] * 12 + [32.0] * 4,               # mean 56, abs_mean 56, max 64, min 32
    "neg": [-64.0] * 12 + [-32.0] * 4,             # mean -56, abs_mean 56, max -32, min -64
    "tiny": [2.0 ** -20] * 12 + [-2.0 ** -19] * 4,  # mean 2**-22, abs_mean 1.25 * 2**-20, max 2**-20, min -2**-19
}
PLANTED = ["signed", "pos", "neg", "tiny"]          # iteration i holds TENSORS[PLANTED[i]]


def _stats(values: list[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    return {"abs_mean": float(np.abs(a).sum() / a.size), "max": float(a.max()), "min": float(a.min()),
            "mean": float(a.sum() / a.size)}


STATS = [_stats(TENSORS[k]) for k in PLANTED]
assert STATS[0] == {"abs_mean": 80.0, "max": 64.0, "min": -128.0, "mean": 16.0}
assert STATS[3] == {"abs_mean": 1.25 * 2 ** -20, "max": 2 ** -20, "min": -2 ** -19, "mean": 2 ** -22}

FAMILIES = {  # family -> (too large condition, too small condition, what is planted)
    "weight": ("weight_too_large", "weight_too_small", "weight"),
    "gradient": ("gradient_too_large", "gradient_vanishing", "gradient"),
    "tensor": ("tensor_too_large", "tensor_too_small", "activation"),
}


@pytest.fixture(scope="module")
def stat_dumps(tmp_path_factory, layout):
    """family -> (root, planted node): iteration i of the node holds TENSORS[PLANTED[i]]."""
    lay = layout()
    out = {}
    for family, (_, _, target) in FAMILIES.items():
        node = {"weight": "fc1.weight", "gradient": lay.gradient("fc1.weight"), "activation": lay.activation()}[target]
        plant = Plant()
        for i, k in enumerate(PLANTED):
            plant.set(node, TENSORS[k], it=i)
        root = dumpmaker.make_dump(str(tmp_path_factory.mktemp(family) / "d"), layers=LAYERS, batch=BATCH,
                                   iterations=len(PLANTED), values=plant)
        out[family] = (root, node)
    return out


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("param", ["abs_mean_gt", "max_gt", "min_gt", "mean_gt",
                                   "abs_mean_lt", "max_lt", "min_lt", "mean_lt"])
def test_too_large_and_too_small_at_the_boundary(stat_dumps, family, param):
    root, node = stat_dumps[family]
    stat, _, op = param.rpartition("_")
    large, small, _ = FAMILIES[family]
    cond = large if op == "gt" else small
    extreme = (max if op == "gt" else min)(s[stat] for s in STATS)
    nudged = down(extreme) if op == "gt" else up(extreme)
    hit_its = {}
    for thr in (extreme, nudged):
        res = run(root, wp(cond, **{param: thr}))
        want = [(i, node, {param: s[stat]}, {param: thr}) for i, s in enumerate(STATS) if OPS[op](s[stat], thr)]
        assert hits(res) == want, (cond, param, thr)
        assert res.errors == []
        hit_its[thr] = {h.iteration for h in res.hits}
    # the extreme tensor misses at its own value (strict comparison) and hits just past it
    at_extreme = {i for i, s in enumerate(STATS) if s[stat] == extreme}
    assert not at_extreme & hit_its[extreme] and at_extreme <= hit_its[nudged]


def test_a_watchpoint_hits_when_any_parameter_hits_and_reports_only_those(stat_dumps):
    root, node = stat_dumps["tensor"]
    res = run(root, wp("tensor_too_large", abs_mean_gt=79.0, max_gt=64.0, mean_gt=15.0))
    assert hits(res) == [
        (0, node, {"abs_mean_gt": 80.0, "mean_gt": 16.0}, {"abs_mean_gt": 79.0, "mean_gt": 15.0}),
        (1, node, {"mean_gt": 56.0}, {"mean_gt": 15.0}),
    ]
    # no parameter fires: no hit
    assert run(root, wp("tensor_too_large", abs_mean_gt=80.0, max_gt=64.0, mean_gt=56.0)).hits == []


def test_gradient_vanishing_at_its_threshold(tmp_path, layout):
    lay = layout()
    g = lay.gradient("fc1.weight")
    root = make(tmp_path, plant=Plant().set(g, full(2.0 ** -30)))
    assert run(root, wp("gradient_vanishing", abs_mean_lt=2.0 ** -30)).hits == []
    thr = 2.0 ** -30 * 1.0000001
    assert hits(run(root, wp("gradient_vanishing", abs_mean_lt=thr))) == [
        (i, g, {"abs_mean_lt": 2.0 ** -30}, {"abs_mean_lt": thr}) for i in range(3)]
    # the default threshold 1e-9 is above 2**-30 (9.3e-10)
    assert hit_keys(run(root, "gradient_vanishing")) == [(i, g) for i in range(3)]


def test_tensor_all_zero_at_100_and_at_a_lower_percentage(tmp_path, layout):
    lay = layout()
    act = lay.activation()
    plant = (Plant().set(act, [0.0] * 8 + [-0.0] * 8, it=0)             # -0.0 is zero too
             .set(act, [0.0] * 4 + [1.0] * 12, it=1)                    # 25 %
             .set(act, [0.0] + [1.0] * 15, it=2)                        # 6.25 %
             .set(act, np.zeros(16, np.float16), it=3)                  # float16 is floating
             .set("inputs1", np.zeros(BATCH, np.int32)))                # integer zeros are never checked
    root = make(tmp_path, plant=plant, iterations=4)

    def zero_hits(**p):
        return [(i, n, a) for i, n, a, _ in hits(run(root, wp("tensor_all_zero", **p)))]

    assert zero_hits() == [(0, act, {"zero_percentage_ge": 100.0}), (3, act, {"zero_percentage_ge": 100.0})]
    assert zero_hits(zero_percentage_ge=25.0) == [(0, act, {"zero_percentage_ge": 100.0}),
                                                   (1, act, {"zero_percentage_ge": 25.0}),
                                                   (3, act, {"zero_percentage_ge": 100.0})]
    assert [k[:2] for k in zero_hits(zero_percentage_ge=up(25.0))] == [(0, act), (3, act)]
    assert [k[:2] for k in zero_hits(zero_percentage_ge=6.25)] == [(0, act), (1, act), (2, act), (3, act)]


def test_weight_initialization_checks_the_value_before_the_first_update_only(tmp_path, layout):
    lay = layout()
    rd_w, slot_w = lay.reader("fc1.weight")
    rd_b, slot_b = lay.reader("fc1.bias")
    plant = Plant()
    for it in range(3):   # fc1.weight: zero before and after every update
        plant.set(rd_w, full(0.0), io="input", slot=slot_w, it=it).set("fc1.weight", full(0.0), it=it)
    plant.set(rd_b, [64.0, -64.0, 0.0, 1.0], io="input", slot=slot_b, it=0)   # 25 % zeros, max 64, min -64
    plant.set("fc2.weight", full(0.0, 8), it=0)   # zero AFTER the first update only: not an initialisation
    root = make(tmp_path, plant=plant)

    def init_hits(**p):
        return hits(run(root, wp("weight_initialization", **p)))

    assert init_hits() == [(0, "fc1.weight", {"zero_percentage_ge": 100.0}, {"zero_percentage_ge": 100.0})]
    assert [h[:3] for h in init_hits(zero_percentage_ge=25.0)] == [
        (0, "fc1.bias", {"zero_percentage_ge": 25.0}), (0, "fc1.weight", {"zero_percentage_ge": 100.0})]
    assert init_hits(max_gt=64.0) == [] and init_hits(min_lt=-64.0) == []
    assert init_hits(max_gt=down(64.0)) == [(0, "fc1.bias", {"max_gt": 64.0}, {"max_gt": down(64.0)})]
    assert init_hits(min_lt=up(-64.0)) == [(0, "fc1.bias", {"min_lt": -64.0}, {"min_lt": up(-64.0)})]
    h = run(root, "weight_initialization").hits[0]
    assert (h.kind, h.param, h.io, h.slot) == ("weight", "fc1.weight", "output", 0)


def test_weight_initialization_needs_the_first_run_iteration(tmp_path, layout):
    lay = layout()
    rd, slot = lay.reader("fc1.weight")
    plant = Plant().set(rd, full(0.0), io="input", slot=slot).set("fc1.weight", full(0.0))
    root = make(tmp_path, plant=plant, run_history=[0, 1, 2, 3], dumped_iterations=[1, 2, 3])
    res = run(root, "weight_initialization")
    assert res.hits == [] and res.errors == []


def test_weight_not_changed_at_atol_plus_rtol_times_prev(tmp_path, layout):
    lay = layout()
    tol = 2.0 ** -20                      # atol and rtol
    base = np.array([1.0] * 8 + [4.0] * 8)
    step = tol + tol * np.abs(base)       # the largest change that still counts as unchanged
    p1 = base + step * np.array([1, -1] * 8)   # up and down by exactly atol + rtol * |prev|
    p2 = p1.copy()
    p2[5] += 2.0 ** -18                        # one element changes by more
    seq = [base, p1, p2, p2]
    for a in seq:
        assert np.array_equal(a.astype(F32), a)
    root = make(tmp_path, plant=Plant().weight(lay, "fc1.weight", before=full(0.5), seq=seq), iterations=4)
    th = {"atol": tol, "rtol": tol}
    assert hits(run(root, wp("weight_not_changed", rtol=tol, atol=tol))) == [
        (1, "fc1.weight", {"atol": tol}, th), (3, "fc1.weight", {"atol": 0.0}, th)]
    # the rtol term uses |prev|: with |cur| the downward steps of iteration 1 would exceed it
    assert hit_keys(run(root, wp("weight_not_changed", rtol=tol, atol=down(tol)))) == [(3, "fc1.weight")]
    # the defaults (rtol 1e-5, atol 1e-8) are looser than all of these steps
    assert hit_keys(run(root, "weight_not_changed")) == [(1, "fc1.weight"), (2, "fc1.weight"), (3, "fc1.weight")]


@pytest.fixture(scope="module")
def ratio_dump(tmp_path_factory, layout):
    """fc1.weight: 1.0 before the first update, then 3.0, 3 * (1 + 2**-10), 3 * (1 + 2**-10)."""
    lay = layout()
    seq = [full(3.0), full(3.0 * (1 + 2.0 ** -10)), full(3.0 * (1 + 2.0 ** -10))]
    return dumpmaker.make_dump(str(tmp_path_factory.mktemp("ratio") / "d"), layers=LAYERS, batch=BATCH, iterations=3,
                               values=Plant().weight(lay, "fc1.weight", before=full(1.0), seq=seq))


def _ratios(eps: float) -> list[float]:
    return [2.0 / (1.0 + eps), (3.0 * 2.0 ** -10) / (3.0 + eps), 0.0 / (3.0 * (1 + 2.0 ** -10) + eps)]


@pytest.mark.parametrize("eps", [None, 1.0, 0.25, 0.0])
def test_weight_change_too_large_ratio_is_exact_and_honours_epsilon(ratio_dump, eps):
    ratios = _ratios(1e-9 if eps is None else eps)
    extra = {} if eps is None else {"epsilon": eps}
    assert run(ratio_dump, wp("weight_change_too_large", abs_mean_update_ratio_gt=ratios[0], **extra)).hits == []
    thr = down(ratios[0])
    assert hits(run(ratio_dump, wp("weight_change_too_large", abs_mean_update_ratio_gt=thr, **extra))) == [
        (0, "fc1.weight", {"abs_mean_update_ratio_gt": ratios[0]}, {"abs_mean_update_ratio_gt": thr})]


def test_weight_change_too_small_ratio_and_epsilon(ratio_dump):
    r = _ratios(0.0)
    assert r[1] == 2.0 ** -10
    name = "weight_change_too_small"
    assert hits(run(ratio_dump, wp(name, abs_mean_update_ratio_lt=2.0 ** -10, epsilon=0.0))) == [
        (2, "fc1.weight", {"abs_mean_update_ratio_lt": 0.0}, {"abs_mean_update_ratio_lt": 2.0 ** -10})]
    thr = up(2.0 ** -10)
    assert hits(run(ratio_dump, wp(name, abs_mean_update_ratio_lt=thr, epsilon=0.0))) == [
        (1, "fc1.weight", {"abs_mean_update_ratio_lt": 2.0 ** -10}, {"abs_mean_update_ratio_lt": thr}),
        (2, "fc1.weight", {"abs_mean_update_ratio_lt": 0.0}, {"abs_mean_update_ratio_lt": thr})]
    # the default epsilon (1e-9) makes iteration 1's ratio a hair smaller than 2**-10: a hit
    res = run(ratio_dump, wp(name, abs_mean_update_ratio_lt=2.0 ** -10))
    assert [(i, a) for i, _, a, _ in hits(res)] == [(1, {"abs_mean_update_ratio_lt": _ratios(1e-9)[1]}),
                                                    (2, {"abs_mean_update_ratio_lt": 0.0})]


def test_weight_update_ratio_large_and_small(ratio_dump):
    r = _ratios(1e-9)
    res = run(ratio_dump, wp("weight_update_ratio", large_threshold=r[0], small_threshold=0.0))
    assert res.hits == []
    res = run(ratio_dump, wp("weight_update_ratio", large_threshold=down(r[0]), small_threshold=0.0))
    assert hits(res) == [(0, "fc1.weight", {"large_threshold": r[0]}, {"large_threshold": down(r[0])})]
    r0 = _ratios(0.0)
    res = run(ratio_dump, wp("weight_update_ratio", small_threshold=2.0 ** -10, epsilon=0.0))
    assert hits(res) == [(2, "fc1.weight", {"small_threshold": 0.0}, {"small_threshold": 2.0 ** -10})]
    res = run(ratio_dump, wp("weight_update_ratio", small_threshold=up(2.0 ** -10), epsilon=0.0))
    assert hits(res) == [(1, "fc1.weight", {"small_threshold": r0[1]}, {"small_threshold": up(2.0 ** -10)}),
                         (2, "fc1.weight", {"small_threshold": 0.0}, {"small_threshold": up(2.0 ** -10)})]
    # SageMaker's defaults (10, 1e-8): only the update that did nothing
    assert hits(run(ratio_dump, "weight_update_ratio")) == [
        (2, "fc1.weight", {"small_threshold": 0.0}, {"small_threshold": 1e-8})]


def test_an_all_zero_previous_value_skips_the_ratio_once_in_the_summary(tmp_path, layout):
    lay = layout()
    root = make(tmp_path, plant=Plant().weight(lay, "fc1.weight", before=full(0.0), seq=[full(1.0), full(0.0), full(2.0)]))
    for name in ("weight_change_too_large", "weight_change_too_small", "weight_update_ratio"):
        res = run(root, name)
        assert {i for i, n in hit_keys(res) if n == "fc1.weight"} <= {1}, name   # 1.0 -> 0.0 has a ratio
        assert errors(res) == [], name       # not an error per tensor per iteration: one line of the summary
        [skip] = [s.to_dict() for s in res.skipped]
        assert skip == {"watchpoint": name, "checks": 2, "gap": False,
                        "example": {"rank": 0, "iteration": 0, "node": "fc1.weight"}, "reason": "previous value is all zero (a zero-initialised bias): update ratio undefined"}, name
    # weight_not_changed has no ratio: an all-zero previous value is an ordinary comparison
    res = run(root, "weight_not_changed")
    assert res.hits == [] and res.errors == []


# -- ranges ---------------------------------------------------------------------------------------
RANGE_PLANT = [
    [1024.0, 2048.0, 1536.0, 1280.0] + [4096.0] * 12,   # 25 % in [1024, 2048]; max - min 3072
    [1024.0, 2048.0] * 4 + [-4096.0] * 8,               # 50 %; max - min 6144
    [1024.0] * 12 + [0.0] * 4,                          # 75 %; max - min 1024
]


@pytest.fixture(scope="module")
def range_dump(tmp_path_factory, layout):
    act = layout().activation()
    plant = Plant()
    for i, v in enumerate(RANGE_PLANT):
        plant.set(act, v, it=i)
    root = dumpmaker.make_dump(str(tmp_path_factory.mktemp("range") / "d"), layers=LAYERS, batch=BATCH,
                               iterations=3, values=plant)
    return root, act


@pytest.mark.parametrize("params, want", [
    ({"range_percentage_lt": 50.0}, [(0, {"range_percentage_lt": 25.0})]),
    ({"range_percentage_lt": up(50.0)}, [(0, {"range_percentage_lt": 25.0}), (1, {"range_percentage_lt": 50.0})]),
    ({"range_percentage_gt": 50.0}, [(2, {"range_percentage_gt": 75.0})]),
    ({"range_percentage_gt": down(25.0)}, [(0, {"range_percentage_gt": 25.0}), (1, {"range_percentage_gt": 50.0}),
                                           (2, {"range_percentage_gt": 75.0})]),   # both ends are inside
    ({"range_percentage_gt": 25.0}, [(1, {"range_percentage_gt": 50.0}), (2, {"range_percentage_gt": 75.0})]),
    ({"max_min_lt": 1024.0}, []),
    ({"max_min_lt": up(1024.0)}, [(2, {"max_min_lt": 1024.0})]),
    ({"max_min_gt": 6144.0}, []),
    ({"max_min_gt": down(6144.0)}, [(1, {"max_min_gt": 6144.0})]),
    ({"range_percentage_gt": 70.0, "max_min_gt": 3000.0},
     [(0, {"max_min_gt": 3072.0}), (1, {"max_min_gt": 6144.0}), (2, {"range_percentage_gt": 75.0})]),
])
def test_activation_range_with_inclusive_bounds(range_dump, params, want):
    root, act = range_dump
    w = wp("activation_range", range_start_inclusive=1024.0, range_end_inclusive=2048.0, **params)
    got = hits(run(root, w))
    assert [(i, a) for i, _, a, _ in got] == want
    assert all(n == act and set(t) == set(a) and all(t[k] == params[k] for k in t) for _, n, a, t in got)


def test_range_with_one_open_end(range_dump):
    root, act = range_dump
    # [2048, +inf): 13/16, 4/16, 0/16
    res = run(root, wp("activation_range", range_start_inclusive=2048.0, range_percentage_gt=down(81.25)))
    assert hits(res) == [(0, act, {"range_percentage_gt": 81.25}, {"range_percentage_gt": down(81.25)})]
    # (-inf, 0]: 0/16, 8/16, 4/16
    res = run(root, wp("activation_range", range_end_inclusive=0.0, range_percentage_gt=25.0))
    assert hits(res) == [(1, act, {"range_percentage_gt": 50.0}, {"range_percentage_gt": 25.0})]


def test_tensor_range_checks_any_tensor(range_dump):
    root, act = range_dump
    # no other tensor of the dump has values in [1024, 2048]
    res = run(root, wp("tensor_range", range_start_inclusive=1024.0, range_end_inclusive=2048.0,
                       range_percentage_gt=down(50.0)))
    assert hit_keys(res) == [(1, act), (2, act)]
    res = run(root, wp("tensor_range", range_start_inclusive=1024.0, range_end_inclusive=2048.0,
                       range_percentage_lt=50.0, node=act))
    assert hits(res) == [(0, act, {"range_percentage_lt": 25.0}, {"range_percentage_lt": 50.0})]


# -- SageMaker-style: units of a layer ------------------------------------------------------------
def _units(*columns):
    """(batch 4, 4 units) from four columns of four samples."""
    return np.array(columns, dtype=np.float64).T.reshape(-1)


SATURATION = {   # op type -> (saturated +, saturated -, active, just inside on the negative side)
    "Sigmoid": (20.0, -32.0, 0.0, -20.0),       # SageMaker's sigmoid input range (-23, 16.99999)
    "Tanh": (16.0, -9.5, 9.0, -9.0),            # tanh input range (-9.4999, 9.4999)
}


@pytest.mark.parametrize("op", sorted(SATURATION))
def test_activation_saturation_per_unit_over_the_batch(tmp_path, layout, op):
    layers = (("fc1", 4, 4, op), ("fc2", 4, 2, None))
    lay = layout(layers)
    act = lay.activation(op)
    sp, sn, ok, inside = SATURATION[op]
    plant = (Plant()
             .set(act, _units([sp] * 4, [sn] * 4, [ok] * 4, [inside] * 4), io="input", it=0)   # 2 of 4 units: 50 %
             .set(act, _units([sp] * 4, [sn] * 4, [sp] * 4, [ok] * 4), io="input", it=1)       # 3 of 4: 75 %
             .set(act, _units([sp] * 4, [inside] * 4, [sn] * 4, [sp] * 3 + [ok]), io="input", it=2))  # active 1/4
    root = make(tmp_path, plant=plant, layers=layers)
    res = run(root, "activation_saturation")
    assert hits(res) == [(1, act, {"threshold_layer": 75.0}, {"threshold_layer": 50.0})]
    h = res.hits[0]
    assert (h.io, h.slot, h.kind, h.op_type) == ("input", 0, "activation", op)   # the input is what is checked
    assert res.errors == []
    assert hit_keys(run(root, wp("activation_saturation", threshold_layer=down(50.0)))) == [(0, act), (1, act), (2, act)]
    # a unit active on exactly threshold_inactivity % of the samples is not saturated
    assert hit_keys(run(root, wp("activation_saturation", threshold_inactivity=25.0))) == [(1, act)]
    assert hit_keys(run(root, wp("activation_saturation", threshold_inactivity=up(25.0)))) == [(1, act), (2, act)]


def test_two_saturation_watchpoints_with_different_inactivity_in_one_scan(tmp_path, layout):
    lay = layout()
    act = lay.activation()
    plant = Plant().set(act, _units([32.0] * 4, [32.0] * 4, [32.0] * 3 + [0.0], [0.0] * 4), io="input")
    root = make(tmp_path, plant=plant, iterations=1)
    res = run(root, wp("activation_saturation", threshold_inactivity=1.0),
              wp("activation_saturation", threshold_inactivity=up(25.0)))
    assert [(h.order, h.actual) for h in res.hits] == [(1, {"threshold_layer": 75.0})]
    res = run(root, wp("activation_saturation", threshold_inactivity=up(25.0)),
              wp("activation_saturation", threshold_inactivity=1.0))
    assert [(h.order, h.actual) for h in res.hits] == [(0, {"threshold_layer": 75.0})]


def test_activation_dead_relu(tmp_path, layout):
    layers = (("fc1", 4, 4, "ReLU"), ("fc2", 4, 2, None))
    lay = layout(layers)
    act = lay.activation("ReLU")
    z = [0.0] * 4
    plant = (Plant().set(act, _units(z, z, [1.0] * 4, [2.0] * 4), it=0)            # 2 dead of 4: 50 %
             .set(act, _units(z, z, z, [1.0] * 4), it=1)                            # 3 dead: 75 %
             .set(act, _units(z, z, [0.0] * 3 + [1.0], [1.0] * 4), it=2))          # positive on 1 of 4 samples
    root = make(tmp_path, plant=plant, layers=layers)
    res = run(root, "activation_dead_relu")
    assert hits(res) == [(1, act, {"threshold_layer": 75.0}, {"threshold_layer": 50.0})]
    assert (res.hits[0].io, res.hits[0].slot) == ("output", 0)
    assert hit_keys(run(root, wp("activation_dead_relu", threshold_inactivity=up(25.0)))) == [(1, act), (2, act)]
    assert run(root, "activation_saturation").hits == []    # not a tanh/sigmoid


# -- SageMaker-style: several iterations -----------------------------------------------------------
def test_tensor_unchanged_over_num_steps(tmp_path, layout):
    lay = layout()
    act = lay.activation()
    a = full(1.0)
    plant = Plant().set(act, a, it=0).set(act, a, it=1).set(act, a, it=2)
    plant.set(act, a + 2.0 ** -20, it=3).set(act, a + 2.0 ** -10, it=4)
    root = make(tmp_path, plant=plant, iterations=5)
    consts = lay.hyper        # learning rate and momentum never change
    assert consts == ["learning_rate", "momentum"]

    def unchanged(**p):
        return sorted(hit_keys(run(root, wp("tensor_unchanged", **p))))

    assert unchanged() == sorted([(2, act), (3, act)] + [(i, c) for i in (2, 3, 4) for c in consts])
    assert unchanged(num_steps=2) == sorted([(1, act), (2, act), (3, act)] + [(i, c) for i in (1, 2, 3, 4) for c in consts])
    # the tolerance is inclusive: a step of exactly atol (rtol 0) counts as unchanged
    assert (3, act) in unchanged(num_steps=2, rtol=0.0, atol=2.0 ** -20)
    assert (3, act) not in unchanged(num_steps=2, rtol=0.0, atol=down(2.0 ** -20))
    res = run(root, wp("tensor_unchanged", num_steps=3))
    h = [x for x in res.hits if x.node == act]
    assert [(x.actual, x.threshold) for x in h] == [({"atol": 0.0}, {"atol": 1e-8, "rtol": 1e-5, "num_steps": 3.0})] * 2
    errs = {(i, n): m for i, n, m in errors(res)}
    assert errs[(0, act)] == "no previous iteration"
    assert errs[(1, act)] == "needs 3 dumped iterations, only 2 up to this one"
    assert {i for i, _ in errs} == {0, 1}


def test_loss_not_decreasing(tmp_path, layout):
    lay = layout()
    loss = lay.loss
    values = [4.0, 2.0, 2.0, 3.0, 1.0]
    plant = Plant()
    for i, v in enumerate(values):
        plant.set(loss, v, it=i)
    root = make(tmp_path, plant=plant, iterations=5)

    def dec(then, now):
        return 100.0 * (then - now) / abs(then)

    res = run(root, wp("loss_not_decreasing", num_steps=1))
    assert hits(res) == [(2, loss, {"diff_percent": 0.0}, {"diff_percent": 0.0}),
                         (3, loss, {"diff_percent": -50.0}, {"diff_percent": 0.0})]
    assert [(i, n) for i, n, m in errors(res)] == [(0, loss)] and "1 or more" in res.errors[0].error
    res = run(root, wp("loss_not_decreasing", num_steps=1, diff_percent=50.0))
    assert [(i, a) for i, _, a, _ in hits(res)] == [(1, {"diff_percent": 50.0}), (2, {"diff_percent": 0.0}),
                                                    (3, {"diff_percent": -50.0})]
    assert dec(3.0, 1.0) > 50.0
    res = run(root, wp("loss_not_decreasing", num_steps=2))
    assert [(i, a) for i, _, a, _ in hits(res)] == [(3, {"diff_percent": dec(2.0, 3.0)})]
    assert [i for i, _, _ in errors(res)] == [0, 1]


# -- overflow conditions and the NaN rule ----------------------------------------------------------
def test_overflow_conditions(tmp_path, layout):
    lay = layout()
    act, g = lay.activation(), lay.gradient("fc1.weight")
    plant = (Plant().set(act, [math.nan, math.inf, -math.inf] + [1.0] * 13, it=1)
             .set(g, [math.inf] + [1.0] * 15, it=2))      # the update then makes fc1.weight -Inf
    root = make(tmp_path, plant=plant)
    nf = {"nan": 1.0, "pos_inf": 1.0, "neg_inf": 1.0}
    assert hits(run(root, "tensor_exploding:only_nan=1")) == [(1, act, nf, {})]
    res = run(root, "gradient_exploding")
    assert hits(res, "gradient_exploding") == [(2, g, {"nan": 0.0, "pos_inf": 1.0, "neg_inf": 0.0}, {})]
    # the activation's NaN at iteration 1, which no gradient watchpoint looks at, is told all the same
    assert hits(res, "nonfinite_sweep") == [(1, act, nf, {})]
    res = run(root, "weight_overflow")
    assert hits(res, "weight_overflow") == [(2, "fc1.weight", {"nan": 0.0, "pos_inf": 0.0, "neg_inf": 1.0}, {})]
    assert hits(res, "nonfinite_sweep") == [(1, act, nf, {})]
    # the optimizer kernel's own output is not checked (an in-place update's outputs are aliases or
    # placeholders); the weight it updated is, as its own tensor
    downstream = {(1, act), (2, g), (2, "fc1.weight")} | {(2, s) for s in lay.state("fc1.weight")}
    for name in ("tensor_overflow", "tensor_exploding"):
        res = run(root, name)
        assert set(hit_keys(res)) == downstream and len(res.hits) == len(downstream), name
        assert res.errors == []


NAN_LAYERS = (("fc1", 4, 4, "Sigmoid"), ("fc2", 4, 4, "ReLU"), ("fc3", 4, 2, None))


@pytest.fixture(scope="module")
def nan_dump(tmp_path_factory, layout):
    """NaN at iteration 2 in: the sigmoid's input and output, the ReLU's output, the loss, fc1.weight's
    gradient (so fc1.weight after the update); and in fc2.weight's value before the first update."""
    lay = layout(NAN_LAYERS)
    sig, relu = lay.activation("Sigmoid"), lay.activation("ReLU")

    def one_nan(d: np.ndarray) -> np.ndarray:
        return np.where(np.arange(d.size).reshape(d.shape) == 1, np.nan, d).astype(d.dtype)

    plant = Plant()
    for node in (lay.producer(sig, 0), sig, relu, lay.gradient("fc1.weight")):
        plant.set(node, one_nan, it=2)
    plant.set(lay.loss, math.nan, it=2)
    rd, slot = lay.reader("fc2.weight")
    plant.set(rd, one_nan, io="input", slot=slot, it=0)
    root = dumpmaker.make_dump(str(tmp_path_factory.mktemp("nan") / "d"), layers=NAN_LAYERS, batch=BATCH,
                               iterations=3, values=plant)
    return root, lay


@pytest.mark.parametrize("name, params, target", [
    ("weight_initialization", {"max_gt": 1e30}, "fc2.weight@0"),
    ("weight_too_large", {"max_gt": 1e30}, "fc1.weight"),
    ("weight_too_small", {"max_lt": -1e30}, "fc1.weight"),
    ("weight_not_changed", {}, "fc1.weight"),
    ("weight_change_too_large", {}, "fc1.weight"),
    ("weight_change_too_small", {}, "fc1.weight"),
    ("weight_update_ratio", {}, "fc1.weight"),
    ("gradient_too_large", {"max_gt": 1e30}, "gradient"),
    ("gradient_vanishing", {}, "gradient"),
    ("tensor_too_large", {"max_gt": 1e30}, "sigmoid"),
    ("tensor_too_small", {"max_lt": -1e30}, "sigmoid"),
    ("tensor_range", {"range_start_inclusive": 0.0, "range_percentage_gt": 0.0}, "sigmoid"),
    ("tensor_unchanged", {"num_steps": 2}, "sigmoid"),
    ("activation_range", {"max_min_gt": 0.0}, "sigmoid"),
    ("activation_saturation", {}, "sigmoid"),
    ("activation_dead_relu", {}, "relu"),
    ("loss_not_decreasing", {"num_steps": 1}, "loss"),
])
def test_nan_makes_every_other_condition_an_error_record(nan_dump, name, params, target):
    root, lay = nan_dump
    it = 0 if target.endswith("@0") else 2
    node = {"fc2.weight@0": "fc2.weight", "fc1.weight": "fc1.weight", "gradient": lay.gradient("fc1.weight"),
            "sigmoid": lay.activation("Sigmoid"), "relu": lay.activation("ReLU"), "loss": lay.loss}[target]
    res = run(root, wp(name, **params))
    assert (it, node) not in hit_keys(res)
    msgs = [m for i, n, m in errors(res) if (i, n) == (it, node)]
    assert len(msgs) == 1 and "NaN" in msgs[0], (name, errors(res))
    # the overflow conditions hit the same tensor
    over = "tensor_exploding" if target != "fc1.weight" and target != "fc2.weight@0" else "weight_overflow"
    if target != "fc2.weight@0":
        assert (it, node) in hit_keys(run(root, over))


@pytest.mark.parametrize("name, target", [("tensor_all_zero", "sigmoid"), ("weight_initialization", "fc2.weight@0")])
def test_a_zero_share_is_answered_beside_nan(nan_dump, name, target):
    """Counts stay exact beside NaN/Inf: the share of zeros of a tensor holding NaN is answered (not all
    zero: no hit), neither an error record nor a skip."""
    root, lay = nan_dump
    it = 0 if target.endswith("@0") else 2
    node = {"fc2.weight@0": "fc2.weight", "sigmoid": lay.activation("Sigmoid")}[target]
    res = run(root, wp(name, zero_percentage_ge=100.0))
    assert (it, node) not in hit_keys(res) and (it, node) not in {(i, n) for i, n, _ in errors(res)}
    assert not res.skipped
    assert (it, node) in hit_keys(run(root, wp(name, zero_percentage_ge=0.0)))


def test_statistics_of_huge_finite_values_are_exact_not_inf(tmp_path, layout):
    """float32 values near the top of the range: sums overflow float32, the statistics must not."""
    lay = layout()
    act = lay.activation()
    big = 2.0 ** 127
    root = make(tmp_path, plant=Plant().set(act, [big] * 8 + [-big] * 8, it=0).set(act, [big] * 16, it=1), iterations=2)
    res = run(root, wp("tensor_too_large", abs_mean_gt=2.0 ** 126, mean_gt=2.0 ** 126))
    assert hits(res) == [(0, act, {"abs_mean_gt": big}, {"abs_mean_gt": 2.0 ** 126}),
                         (1, act, {"abs_mean_gt": big, "mean_gt": big}, {"abs_mean_gt": 2.0 ** 126, "mean_gt": 2.0 ** 126})]
    assert res.errors == []
