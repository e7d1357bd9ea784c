"""The scan's verdict on dumps MindSpore and msprobe wrote (tests/data/corpus_ms, corpus_msprobe), against
the truth their training scripts wrote beside them (issue 37): a NaN run is found at its first non-finite
iteration whatever the dump holds, with its origin as the dump tells it; a healthy run is quiet, and says
what it could not check, with exit 4 where a watchpoint answered nothing."""
from __future__ import annotations

import json
import os
from typing import Any

import pytest
from clirun import run_cli

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
MS, PROBE = os.path.join(DATA, "corpus_ms"), os.path.join(DATA, "corpus_msprobe")


def truth_ms(name: str) -> dict[str, Any]:
    with open(os.path.join(MS, name, f"{name}.truth.json"), encoding="utf-8") as f:
        return json.load(f)


def truth_probe(name: str) -> dict[str, Any]:
    with open(os.path.join(PROBE, f"{name}.truth.json"), encoding="utf-8") as f:
        return json.load(f)


def scan(path: str, *args: str) -> tuple[int, dict[str, Any]]:
    r = run_cli("scan", path, "--json", "--no-cache", "--jobs", "1", *args)
    assert "internal error" not in r.err, r.err
    return r.code, r.json


def first_nonfinite(doc: dict[str, Any]) -> int:
    """The earliest iteration of a hit that reports non-finite counts."""
    return min(h["iteration"] for h in doc["hits"] if {"nan", "pos_inf", "neg_inf"} & h["actual"].keys())


# -- NaN runs: found at the first iteration that holds one, whatever the dump holds ---------------------
@pytest.mark.parametrize("name, origin", [
    ("full_nan", "overflow"),            # the whole dump: the Sqrt that made it
    ("kernels_nan", "overflow"),          # a kernel list without weights or optimizer
    ("outputs_only_nan", "overflow"),     # outputs only
    ("inputs_only_nan", "nonfinite_sweep"),   # inputs only: the Sqrt's output is only seen as fc1's input
    ("pynative_nan", "nonfinite_sweep"),  # PyNative: the optimizer graph only
    ("no_graphs_nan", "nonfinite_sweep"),  # no graphs/: no kinds, no order but the files'
])
def test_mindspore_nan_runs_are_found_at_their_first_nan(name: str, origin: str) -> None:
    truth = truth_ms(name)
    code, doc = scan(os.path.join(MS, name))
    assert code == 1 and doc["verdict"] == "found"
    assert first_nonfinite(doc) == doc["first"]["iteration"] == min(truth["nonfinite_iterations"]) == 2
    assert doc["first"]["watchpoint"] == origin
    if name in ("full_nan", "kernels_nan", "outputs_only_nan", "no_graphs_nan"):   # the Sqrt is in the files
        assert truth["first_nonfinite"]["op_type"] in doc["first"]["node"]
    if origin == "nonfinite_sweep":
        assert "origin not in" in doc["first"]["note"]


def test_an_inputs_only_dump_names_what_it_could_not_check() -> None:
    code, doc = scan(os.path.join(MS, "inputs_only_nan"))
    unanswered = {u.split(":")[0] for u in doc["coverage"]["unanswered"]}
    # no output is dumped: no weight, gradient or activation to judge, and the scan says so, counting what the
    # graph holds and the dump does not (the net's activations are no ReLU: the dead-layer rule does not apply)
    assert {"gradient_vanishing", "weight_not_changed", "activation_saturated_layer"} <= unanswered
    assert all("not dumped" in u for u in doc["coverage"]["unanswered"] if u.startswith("gradient_vanishing"))
    by_name = {c["watchpoint"]: c for c in doc["coverage"]["watchpoints"]}
    assert by_name["activation_dead_layer"]["status"] == "not_applicable"
    assert by_name["weight_not_changed"]["unchecked"] == 4 * len(truth_ms("inputs_only_nan")["trainable"])


def test_msprobe_data_borne_nan_is_named_as_such() -> None:
    truth = truth_probe("mix_data_nan")
    code, doc = scan(os.path.join(PROBE, "mix_data_nan"))
    assert code == 1 and doc["first"]["iteration"] == min(truth["nonfinite_steps"]) == 1
    assert doc["first"]["watchpoint"] == "nonfinite_sweep" and doc["first"]["io"] == "input"
    assert doc["first"]["note"].startswith("data-borne")
    assert truth["nan_origin"]["kind"] == "data"


def test_msprobe_op_nan_is_its_origin() -> None:
    truth = truth_probe("L1_op_nan")
    code, doc = scan(os.path.join(PROBE, "L1_op_nan"))
    assert code == 1 and (doc["first"]["watchpoint"], doc["first"]["iteration"], doc["first"]["node"]) == (
        "overflow", truth["nonfinite_steps"][0], truth["nan_origin"]["msprobe_key"])


# -- healthy runs: quiet, and honest about what they could not check ----------------------------------
@pytest.mark.parametrize("name", ["full_healthy", "momentum_nowd", "momentum_wd", "functional_loop",
                                  "train_one_step", "control_flow"])
def test_healthy_mindspore_runs_are_clean(name: str) -> None:
    code, doc = scan(os.path.join(MS, name))
    assert (code, doc["verdict"], doc["hits"]) == (0, "clean", [])
    assert doc["coverage"]["status"] in ("complete", "partial") and doc["coverage"]["swept"] > 0


@pytest.mark.parametrize("name, clean", [("L0_tensor", True), ("mix_tensor", True), ("L0_statistics", False),
                                         ("L1_statistics", False), ("L1_tensor", False), ("mix_statistics", False)])
def test_healthy_msprobe_runs_are_quiet_and_incomplete_where_they_cannot_answer(name: str, clean: bool) -> None:
    code, doc = scan(os.path.join(PROBE, name))
    assert doc["hits"] == []
    if clean:
        assert (code, doc["verdict"]) == (0, "clean")
        return
    # statistics without abs_mean or zeros; L1 records no module, so no parameter: said, exit 4
    assert (code, doc["verdict"], doc["coverage"]["status"]) == (4, "incomplete", "incomplete")
    assert "gradient_vanishing" in {u.split(":")[0] for u in doc["coverage"]["unanswered"]}
    r = run_cli("scan", os.path.join(PROBE, name), "--no-cache", "--jobs", "1")
    assert "No watchpoint hit, but INCOMPLETE (exit status 4)" in r.out and "No watchpoint hit.\n" not in r.out
    assert "gradient_vanishing: NOT CHECKED" in r.out
    assert run_cli("scan", os.path.join(PROBE, name), "--no-cache", "--jobs", "1", "--strict").code == 1


def test_strict_fails_a_partial_scan() -> None:
    # md5 statistics hold no zero count: tensor_all_zero answers 2 of its tensors (those whose max and min are 0)
    path = os.path.join(os.path.dirname(DATA), "..", "dumps_sample", "msprobe", "md5_baseline")
    code, doc = scan(path, "--watch", "tensor_all_zero")
    [cov] = doc["coverage"]["watchpoints"]
    assert (cov["status"], code, doc["verdict"]) == ("partial", 0, "clean")
    assert cov["checked"] > 0 and cov["unchecked"] == sum(r["checks"] for r in cov["reasons"]) > 0
    assert "needs statistic zeros" in cov["reasons"][0]["reason"]
    code, doc = scan(path, "--watch", "tensor_all_zero", "--strict")
    assert (code, doc["verdict"], doc["coverage"]["status"]) == (1, "incomplete", "incomplete")
