"""compare across layouts on real recordings: FSDP2 against DDP on 2 gloo ranks each, values saved; rank 1's
FSDP shard of layers.0.up.weight planted (+1.0) after step 1."""
from __future__ import annotations

import pytest

from clirun import run_cli
from debugger.compare import compare_ranks
from debugger.compare.logical_runs import compare_logical
from realruns import record


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[str, str]:
    d = str(tmp_path_factory.mktemp("fsdp"))
    return record(d, "ddp", save="tensors"), record(d, "fsdp2", save="tensors", plant="layers.0.up.weight@1:1")


def test_fsdp2_agrees_with_ddp_until_the_planted_shard(runs):
    ddp, fsdp2 = runs
    res = compare_logical(fsdp2, ddp)
    assert {(p.iteration, p.node) for p in res.pairs if p.grade != "pass"} == {(1, "layers.0.up.weight")}
    assert {p.kind for p in res.pairs} == {"loss", "gradient", "optimizer_state", "weight"}
    f = res.first_divergence
    assert (f.iteration, f.node, f.kind, f.a.rank) == (1, "layers.0.up.weight", "weight", 1)
    assert f.shard.startswith("shard [6:12, 0:8] of [12, 8], ") and f.shard.endswith("=Shard(0) on rank 1")


def test_cli_picks_the_logical_comparison_for_other_layouts(runs):
    ddp, fsdp2 = runs
    cli = run_cli("compare", fsdp2, ddp, "--no-cache", "--json", "--iterations", "0")
    assert cli.code == 0 and cli.json["mode"] == "logical"
    assert run_cli("compare", fsdp2, ddp, "--no-cache").code == 1


def test_ddp_ranks_agree_and_fsdp_shards_are_not_compared(runs):
    """DDP's replicas agree; FSDP2's shards have no replica, so the planted shard is no rank divergence (its
    collectives agree within their group, its reduce-scatter is per rank): only another run can tell."""
    ddp, fsdp2 = runs
    res = compare_ranks(ddp)
    assert res.exit_code == 0 and any(p.kind == "weight" and p.node == p.param for p in res.pairs)
    res = compare_ranks(fsdp2)
    assert res.exit_code == 0, [(p.node, p.reason) for p in res.errors][:3]
    assert not [p for p in res.pairs if p.kind == "weight" and p.node == p.param]   # no replica of any FSDP shard
    assert any(p.counted for p in res.pairs)                                           # the all-gathers
