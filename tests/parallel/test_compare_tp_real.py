"""compare across layouts on real recordings: tensor parallel on 2 gloo ranks against one process, values
saved; rank 1's shard of layers.0.up.weight planted (+1.0) after step 1."""
from __future__ import annotations

import json

import numpy as np
import pytest

from clirun import run_cli
from debugger.compare import compare_ranks
from debugger.compare.logical_runs import compare_logical
from realruns import record

SHARD = "shard [6:12, 0:8] of [12, 8], tp=Shard(0) on rank 1"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[str, str]:
    d = str(tmp_path_factory.mktemp("tp"))
    return record(d, "single", save="tensors"), record(d, "tp", save="tensors", plant="layers.0.up.weight@1:1")


def test_tp_agrees_with_one_process_until_the_planted_shard(runs):
    single, tp = runs
    res = compare_logical(tp, single)
    # iteration 0, and all of iteration 1 made before the plant (loss, gradients, state, other weights), agree
    assert {(p.iteration, p.node) for p in res.pairs if p.grade != "pass"} == {(1, "layers.0.up.weight")}
    kinds = {p.kind for p in res.pairs if p.iteration == 0}
    assert kinds == {"loss", "gradient", "optimizer_state", "weight"}
    assert len({p.param for p in res.pairs if p.kind == "weight"}) == 12
    assert max(p.metrics.max_abs_err for p in res.pairs if p.grade == "pass") < 1e-6   # reduction order only
    f = res.first_divergence
    assert (f.iteration, f.node, f.kind, f.a.rank, f.shard) == (1, "layers.0.up.weight", "weight", 1, SHARD)
    assert f.metrics.max_abs_err == pytest.approx(1.0, abs=1e-5)


def test_the_logical_weight_is_the_one_torch_gathers(runs):
    """The last iteration's layers.0.up.weight assembled from the two shards is what DTensor.full_tensor() gave."""
    single, tp = runs
    res = compare_logical(tp, single)
    pair = next(p for p in res.pairs if p.iteration == 1 and p.node == "layers.0.up.weight")
    with open(tp + ".json.0") as f:
        want = np.array(json.load(f)["params"]["layers.0.up.weight"], np.float32)
    assert np.array_equal(pair.ref_a.source.array(), want)


def test_cli_names_the_first_divergence_and_agrees_before_it(runs):
    single, tp = runs
    cli = run_cli("compare", tp, single, "--no-cache")
    assert cli.code == 1
    assert f"First divergence: iteration 1: layers.0.up.weight (weight, logical)\n  shard: {SHARD}" in cli.out
    ok = run_cli("compare", tp, single, "--no-cache", "--iterations", "0", "--json")
    assert ok.code == 0 and ok.json["mode"] == "logical" and ok.json["summary"]["error"] == 0


def test_tp_ranks_agree_on_their_replicated_parameters_and_collectives(runs):
    """The replicated biases and the all-reduces agree across the two TP ranks; the Shard(0) weights are never
    compared with each other (the planted shard has no replica)."""
    _, tp = runs
    res = compare_ranks(tp)
    assert res.exit_code == 0, [(p.node, p.reason) for p in res.errors][:3]
    compared = {p.node for p in res.pairs if p.counted and p.node == p.param}
    assert "layers.0.down.bias" in compared and "layers.0.up.weight" not in compared
