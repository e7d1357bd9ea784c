"""Which value a condition compares with: the previous run of the graph, the value a weight had
before its first update, and what happens when there is none or it is not finite."""
from __future__ import annotations

import math
import os

from watch_kit import Plant, errors, full, hit_keys, hits, make, run, tensor_file, wp

PREVIOUS = ["weight_not_changed", "weight_change_too_large", "weight_change_too_small", "weight_update_ratio"]


def test_previous_follows_the_run_history_not_the_dumps(tmp_path, layout):
    lay = layout()
    b = full(1.0)
    # Parameter(2) == Parameter(0), but iteration 1 ran (undumped) in between: not comparable
    plant = Plant().weight(lay, "fc1.weight", before=b, seq=[b, b * 2, b, b])
    root = make(tmp_path, plant=plant, run_history=[0, 1, 2, 3], dumped_iterations=[0, 2, 3])
    res = run(root, "weight_not_changed")
    assert hit_keys(res) == [(0, "fc1.weight"), (3, "fc1.weight")]   # 0: before vs after; 3: vs 2
    want = [(2, w, "no previous value: iteration 1 has no dump of this tensor") for w in lay.weights]
    assert errors(res) == want
    for name in PREVIOUS[1:]:
        res = run(root, name)
        assert 2 not in {h.iteration for h in res.hits}, name
        assert errors(res) == want, name


def test_without_a_run_history_the_previous_dump_is_the_previous_value(tmp_path, layout):
    lay = layout()
    b = full(1.0)
    plant = Plant().weight(lay, "fc1.weight", before=b, seq=[b, b * 2, b, b])
    root = make(tmp_path, plant=plant, run_history=[0, 1, 2, 3], dumped_iterations=[0, 2, 3])
    os.remove(os.path.join(root, "rank_0", "execution_order", "ms_global_execution_order_graph_0.csv"))
    res = run(root, "weight_not_changed")
    # iteration 2's previous dumped iteration is 2 steps back (1 is not in the dump): its previous value is
    # what its forward kernel read before the update (b * 2, one step's), not Parameter(0) (b, equal by
    # chance: "unchanged" over two steps that changed it)
    assert hit_keys(res) == [(0, "fc1.weight"), (3, "fc1.weight")]
    assert res.errors == []


def test_scanning_some_iterations_does_not_change_the_previous_value(tmp_path, layout):
    lay = layout()
    b = full(1.0)
    plant = Plant().weight(lay, "fc1.weight", before=b * 3, seq=[b * 2, b, b])
    root = make(tmp_path, plant=plant)
    assert hit_keys(run(root, "weight_not_changed", iterations={2})) == [(2, "fc1.weight")]
    # iteration 1 is not a first iteration: it compares with Parameter(0), not with its forward input
    assert run(root, "weight_not_changed", iterations={1}).hits == []


def test_a_weight_in_its_first_iteration_compares_with_what_its_forward_kernel_read(tmp_path, layout):
    lay = layout()
    plant = Plant().weight(lay, "fc1.weight", before=full(1.0), seq=[full(3.0), full(3.0)])
    root = make(tmp_path, plant=plant, iterations=2)
    # the optimizer's input 0 is updated in place (it equals Parameter(0)): comparing with it would give 0
    res = run(root, wp("weight_change_too_large", abs_mean_update_ratio_gt=1.5))
    assert hits(res) == [(0, "fc1.weight", {"abs_mean_update_ratio_gt": 2.0 / (1.0 + 1e-9)},
                          {"abs_mean_update_ratio_gt": 1.5})]
    assert hit_keys(run(root, "weight_not_changed")) == [(1, "fc1.weight")]


def test_later_iterations_compare_with_the_previous_parameter_not_the_forward_input(tmp_path, layout):
    lay = layout()
    rd, slot = lay.reader("fc1.weight")
    b = full(1.0)
    plant = Plant().weight(lay, "fc1.weight", before=b * 5, seq=[b, b, b])
    plant.set(rd, b * 7, io="input", slot=slot, it=1)    # disagrees with Parameter(0): not the one used
    root = make(tmp_path, plant=plant)
    assert hit_keys(run(root, "weight_not_changed")) == [(1, "fc1.weight"), (2, "fc1.weight")]


def test_no_previous_value_is_an_error_record_never_a_hit(tmp_path, layout):
    lay = layout()
    rd, slot = lay.reader("fc1.weight")
    b = full(1.0)
    root = make(tmp_path, plant=Plant().weight(lay, "fc1.weight", before=b, seq=[b, b]), iterations=2)
    # the forward kernel's input was not dumped: a weight's first iteration has nothing to compare with
    os.remove(tensor_file(root, 0, rd.replace("/", "_"), "input", slot))
    for name in PREVIOUS:
        res = run(root, name)
        assert 0 not in {h.iteration for h in res.hits}, name
        assert (0, "fc1.weight", "no previous iteration") in errors(res), name
    # tensors other than weights have no value before the first iteration
    res = run(root, wp("tensor_unchanged", num_steps=2))
    assert {i for i, _ in hit_keys(res)} <= {1}
    act = lay.activation()
    assert (0, act, "no previous iteration") in errors(res)
    assert all(i == 0 and m == "no previous iteration" for i, _, m in errors(res))


def test_a_nan_in_the_previous_value_is_an_error_record(tmp_path, layout):
    lay = layout()
    b = full(1.0)
    nan1 = b.copy()
    nan1[3] = math.nan
    before = b.copy()
    before[0] = math.nan
    act = lay.activation()
    plant = Plant().weight(lay, "fc1.weight", before=before, seq=[b, nan1, b])
    plant.set(act, b, it=0).set(act, nan1, it=1).set(act, b, it=2)
    root = make(tmp_path, plant=plant)
    for name in PREVIOUS:
        res = run(root, name)
        got = {(i, n): m for i, n, m in errors(res) if n == "fc1.weight"}
        assert got == {(0, "fc1.weight"): "previous value: tensor contains 1 NaN",
                       (1, "fc1.weight"): "tensor contains 1 NaN",
                       (2, "fc1.weight"): "previous value: tensor contains 1 NaN"}, name
        assert "fc1.weight" not in {n for _, n in hit_keys(res)}, name
    res = run(root, wp("tensor_unchanged", num_steps=2))
    got = {i: m for i, n, m in errors(res) if n == act}
    assert got == {0: "no previous iteration", 1: "tensor contains 1 NaN", 2: "previous value: tensor contains 1 NaN"}
    assert act not in {n for _, n in hit_keys(res)}


def test_tensor_unchanged_compares_the_last_dumped_iterations(tmp_path, layout):
    """tensor_unchanged is over "the last num_steps dumped iterations" (README), like SageMaker's
    saved steps: a dump every other iteration can still be checked."""
    lay = layout()
    act = lay.activation()
    plant = Plant().set(act, full(1.0))
    root = make(tmp_path, plant=plant, iterations=5, dumped_iterations=[0, 2, 4])
    res = run(root, wp("tensor_unchanged", num_steps=3))
    keys = hit_keys(res)
    assert (4, act) in keys and (2, act) not in keys
    assert sorted(keys) == sorted([(4, act)] + [(4, c) for c in lay.hyper])
    assert {(i, m) for i, n, m in errors(res) if n == act} == {
        (0, "no previous iteration"), (2, "needs 3 dumped iterations, only 2 up to this one")}
    # weight_not_changed keeps to the run history: iteration 3 ran between 2 and 4
    res = run(root, "weight_not_changed")
    assert {(i, m) for i, _, m in errors(res)} == {
        (2, "no previous value: iteration 1 has no dump of this tensor"),
        (4, "no previous value: iteration 3 has no dump of this tensor")}
