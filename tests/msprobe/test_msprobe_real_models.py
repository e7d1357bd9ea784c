"""msprobe dumps of real models (a transformers GPT-2 with AdamW, a CNN with BatchNorm, in-place ReLU
and SGD momentum), made by tests/data/msprobe_real/make_msprobe_real.py with mindstudio-probe 26.2.0.

Truth comes from outside tdbg: each dump's ``*.truth.json`` (what plain torch saw: the optimizer's
parameters, whether each one changed at every step) and msprobe's own dump.json of the next step.
"""
from __future__ import annotations

import json
import os

import pytest
from clirun import ACTIVATION_WATCHPOINTS, run_cli, scan_quiet

from debugger.model import open_dump

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(HERE, "data", "msprobe_real")
HEALTHY = ["gpt2_adamw_statistics", "cnn_sgdm_statistics", "cnn_sgdm_tensor"]


def dump(name: str) -> str:
    """A committed real-model dump."""
    return os.path.join(DATA, name)


def truth(name: str) -> dict:
    """What plain torch saw while the dump was made."""
    with open(os.path.join(DATA, f"{name}.truth.json")) as f:
        return json.load(f)


def _read_values(name: str, step: int) -> dict[str, dict]:
    """parameter -> msprobe's statistics of the value its module's forward read in ``step``."""
    with open(os.path.join(dump(name), f"step{step}", "proc0", "dump.json")) as f:
        data = json.load(f)["data"]
    out: dict[str, dict] = {}
    for key, entry in data.items():
        if key.startswith("Module.") and ".forward." in key and isinstance(entry.get("parameters"), dict):
            path = key[len("Module."):].split(".forward.")[0].rsplit(".", 1)[0]
            for p, item in entry["parameters"].items():
                out.setdefault(f"{path}.{p}", {k: item[k] for k in ("Max", "Min", "Mean", "Norm")})
    return out


# What msprobe's statistics (max, min, mean, norm: no zero count, no mean |x|) and L1 (no module, so no
# parameter) cannot answer: a scan of such a dump says so and exits 4, never "no hit" alone.
UNANSWERABLE = ACTIVATION_WATCHPOINTS | {"gradient_vanishing", "weight_change_too_large", "tensor_all_zero",
                                        "weight_not_changed"}


@pytest.mark.parametrize("name", HEALTHY)
def test_the_recommended_scan_of_a_healthy_real_model_is_quiet(name: str) -> None:
    t = truth(name)
    trained = {p for g in t["groups"] for p in g["params"]}
    assert all(changed[p] for changed in t["changed"] for p in trained)   # every step moved every weight
    res = scan_quiet(dump(name), "--no-cache", unanswered=UNANSWERABLE)
    assert res.json["errors"] == [] and res.json["first"] is None


@pytest.mark.parametrize("name", ["gpt2_adamw_statistics", "cnn_sgdm_tensor"])
def test_a_weight_is_its_value_after_the_step(name: str) -> None:
    """The weight's tensor in step i is what its module read in step i+1 (msprobe's own record)."""
    r = open_dump(dump(name)).rank(0)
    steps = r.iterations()
    trained = {p for g in truth(name)["groups"] for p in g["params"]}
    checked = 0
    for i in steps[:-1]:
        later = _read_values(name, i + 1)
        before = _read_values(name, i)
        for p in trained:
            recorded = dict(r.tensor(0, i, p).source.raw)
            assert {k: recorded[k] for k in later[p]} == later[p], (i, p)
            checked += 1
            assert recorded != before[p], (i, p)             # every trained weight moved (truth: changed)
    assert checked == len(trained) * (len(steps) - 1)


@pytest.mark.parametrize("name, per_param", [("gpt2_adamw_statistics", 7), ("cnn_sgdm_statistics", 1)])
def test_optimizer_internals_are_state_of_their_parameter(name: str, per_param: int) -> None:
    """AdamW (single tensor): step += 1, lerp_, mul_, addcmul_, sqrt, /, add_ are state; mul_ (decay) and
    addcdiv_ update the weight. SGD momentum from step 1: mul_ and add_ on the buffer; add_ updates."""
    t = truth(name)
    trained = [p for g in t["groups"] for p in g["params"]]
    assert set(trained) == set(t["state"][-1])                 # torch.optim holds state for each of them
    g = open_dump(dump(name)).rank(0).graph(0)
    opt_nodes = [n for n in g.nodes() if n.scope == "optimizer"]
    state = [n for n in opt_nodes if n.kind == "optimizer_state"]
    updates = [n for n in opt_nodes if n.input_roles]
    assert {n.param for n in state} == set(trained) and {n.param for n in updates} == set(trained)
    assert len(state) + len(updates) == len(opt_nodes)         # every optimizer op placed
    by_param: dict[str, list[str]] = {}
    for n in state:
        by_param.setdefault(n.param, []).append(n.op_type)
    # a node is an op key; its meaning is that of the first step it appears in. SGD's step 0 has no buffer
    # op (clone is not recorded), so Tensor.add_.1 updates 0.weight in step 0 and 0.weight's buffer later
    assert all(len(v) >= per_param for v in by_param.values()), by_param
    last = {"AdamW": "Tensor.addcdiv_", "SGD": "Tensor.add_"}[t["optimizer"]]
    assert {n.op_type for n in updates} <= {last, "Tensor.mul_"}   # AdamW's decay mul_ writes the weight too
    assert {n.param for n in updates if n.op_type == last} == set(trained)
    for n in updates:
        assert n.input_roles[0] == "weight" and [s for s, _ in n.inputs][0] == n.param


def test_step_counters_and_zero_moments_are_not_all_zero_hits() -> None:
    """AdamW's moments are all zero in step 0 (exp_avg_sq.mul_ outputs zeros): optimizer state, not checked."""
    scan_quiet(dump("gpt2_adamw_statistics"), "--watch", "tensor_all_zero", "--no-cache")
    g = open_dump(dump("gpt2_adamw_statistics")).rank(0).graph(0)
    counters = [n for n in g.nodes() if n.op_type == "Tensor.__iadd__" and n.scope == "optimizer"]
    assert len(counters) == len(truth("gpt2_adamw_statistics")["shapes"])   # named_parameters: tied once
    assert all(n.kind == "optimizer_state" for n in counters)


def test_a_frozen_layer_is_found_at_every_step_and_nothing_else() -> None:
    """The second conv in a param group with lr=0 (statistics with md5 digests): truth says which did not change."""
    name = "cnn_sgdm_frozen_md5"
    res = run_cli("scan", dump(name), "--json", "--no-cache")
    assert res.code == 1
    got = sorted((h["iteration"], h["node"]) for h in res.json["hits"])
    frozen = sorted((i, p) for i, changed in enumerate(truth(name)["changed"]) for p, c in changed.items() if not c)
    assert frozen == [(i, p) for i in range(3) for p in ("3.bias", "3.weight")]
    assert got == frozen
    assert {h["watchpoint"] for h in res.json["hits"]} == {"weight_not_changed"}
    assert res.json["first"]["node"].startswith("3.") and res.json["first"]["iteration"] == 0


def test_a_nan_in_gpt2_is_the_headline_on_its_line() -> None:
    name = "gpt2_adamw_nan_statistics"
    res = run_cli("scan", dump(name), "--json", "--no-cache")
    assert res.code == 1
    first = res.json["first"]
    assert first["watchpoint"] == "overflow" and first["node"] == "Torch.log.0.forward"
    assert first["iteration"] == truth(name)["nan_step"]
    line = first["source"].rsplit(":", 1)[1]
    with open(os.path.join(DATA, "make_msprobe_real.py")) as f:
        assert "torch.log(out)" in f.read().splitlines()[int(line) - 1]
    assert not [h for h in res.json["hits"] if h["iteration"] < truth(name)["nan_step"]]


@pytest.mark.parametrize("name", ["tensor_mix", "pair_baseline", "statistics_mix", "statistics_L0", "statistics_L1",
                                  "md5_baseline", "ddp_2rank_tensor", "mindspore_pynative_tensor",
                                  "mindspore_pynative_statistics"])
def test_the_committed_msprobe_baselines_have_no_problem(name: str) -> None:
    """Healthy runs of every level and task, PyTorch and MindSpore: at L0 and in MindSpore's PyNative dumps
    no optimizer op is recorded, so a weight has no value after its update (its first step used to
    compare the value read with itself: "unchanged", atol 0)."""
    root = os.path.join(os.path.dirname(HERE), "dumps_sample", "msprobe", name)
    res = scan_quiet(root, "--no-cache", unanswered=UNANSWERABLE)
    assert res.json["errors"] == []
