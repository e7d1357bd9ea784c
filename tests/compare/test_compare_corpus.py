"""Run-vs-run pairing by meaning on MindSpore-written dumps (issue 37 item 5): two bit-identical runs of
different program structure compare clean (tests/data/corpus_ms: the training scripts' losses agree bit for
bit, their truth files say)."""
from __future__ import annotations

import json
import os

from clirun import run_cli

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "corpus_ms")


def _losses(name: str) -> list[str]:
    with open(os.path.join(CORPUS, name, f"{name}.truth.json"), encoding="utf-8") as f:
        return json.load(f)["losses_hex"]


def test_pynative_against_graph_mode_pairs_each_update_by_its_weight() -> None:
    """PyNative dumps the optimizer graph only, its ApplyMomentum kernels in another order than graph mode's
    whole step: each update pairs with the same weight's, the forward and backward kernels graph mode holds
    are not compared (said), and iterations 0-1 (finite on both) compare clean."""
    a, b = os.path.join(CORPUS, "pynative_nan"), os.path.join(CORPUS, "full_nan")
    assert _losses("pynative_nan") == _losses("full_nan")
    r = run_cli("compare", a, b, "--iterations", "0-1", "--json", "--no-cache", "--all")
    assert r.code == 0 and r.json["first_divergence"] is None, r.out[-2000:]
    pairs = r.json["pairs"]
    updates = [p for p in pairs if p["op_type"] == "ApplyMomentum" and p["io"] == "input" and p["slot"] == 0]
    assert len(updates) == 8 and all(p["match"] == "parameter" for p in updates)
    weights = {p["node"] for p in pairs if p["kind"] == "weight" and p["op_type"] == "Parameter"}
    assert weights == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    [u] = r.json["unpaired"]
    assert u["b_only"] > 0 and any("Sqrt" in n for n in u["b_only_examples"])


def test_a_functional_loop_against_train_one_step_is_clean() -> None:
    a, b = os.path.join(CORPUS, "functional_loop"), os.path.join(CORPUS, "train_one_step")
    assert _losses("functional_loop") == _losses("train_one_step")
    r = run_cli("compare", a, b, "--json", "--no-cache")
    assert r.code == 0 and r.json["first_divergence"] is None
