"""compare on real FSDP2 recordings of a plain MLP (2 gloo ranks, statistics, 2 Adam steps, each Linear its own
unit): what holds no value is never a divergence, a planted shard is named where it happened, and --ranks
checks the all-gathered parameters every rank must hold alike (issue 37, item 5)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from clirun import run_cli
from debugger.compare import compare_ranks, compare_runs
from debugger.compare.grades import ERROR
from realruns import record

MLP = ("--net", "mlp")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """Two healthy runs of the same seeds, rank 1's shard of 0.weight planted after step 1, and rank 1's
    all-gather of step 1 corrupted; recorded side by side."""
    d = str(tmp_path_factory.mktemp("fsdp2mlp"))
    jobs = {"healthy": dict(name="a"), "again": dict(name="b"), "planted": dict(plant="0.weight@1:1"),
            "corrupted": dict(extra=MLP + ("--corrupt-gather", "1:1"))}
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {k: pool.submit(record, d, "fsdp2", **{"extra": MLP, **kw}) for k, kw in jobs.items()}
        return {k: f.result() for k, f in futures.items()}


def test_healthy_runs_of_one_seed_compare_clean(runs):
    """Uninitialised memory (the all-gather buffer beyond this rank's chunk, copy-out targets read before they
    are written) is not compared: two healthy runs agree everywhere."""
    res = compare_runs(runs["again"], runs["healthy"])
    assert res.exit_code == 0, [(p.iteration, p.node, p.reason) for p in res.errors][:4]
    assert res.first_divergence is None and len(res.pairs) > 100
    assert not [p for p in res.pairs if "all_gather_copy_in" in p.node and p.io == "output"]


def test_a_planted_shard_is_the_first_divergence(runs):
    res = compare_runs(runs["planted"], runs["healthy"])
    f = res.first_divergence
    assert (f.iteration, f.node, f.kind, f.a.rank) == (1, "0.weight", "weight", 1)
    assert not [p for p in res.pairs if p.grade == ERROR and p.iteration == 0]
    assert run_cli("compare", runs["planted"], runs["healthy"], "--no-cache").code == 1


def test_ranks_compare_the_gathered_parameters(runs):
    """Every unit's parameters, all-gathered, are equal on every rank, in the forward and the backward."""
    res = compare_ranks(runs["healthy"])
    assert res.exit_code == 0, [(p.iteration, p.node, p.reason) for p in res.errors][:4]
    gathered = {(p.iteration, p.param) for p in res.pairs if p.counted and p.kind == "weight" and p.node != p.param}
    assert gathered == {(it, n) for it in (0, 1) for n in ("0.weight", "0.bias", "2.weight", "2.bias")}
    assert all(p.grade != ERROR for p in res.pairs)
    cli = run_cli("compare", runs["healthy"], "--ranks", "--no-cache", "--json")
    assert cli.code == 0 and cli.json["summary"]["pairs"] > 0


def test_ranks_name_a_corrupted_gathered_parameter(runs):
    res = compare_ranks(runs["corrupted"])
    assert res.exit_code == 1
    f = res.first_divergence
    assert (f.iteration, f.param, f.kind, f.a.rank, f.b.rank) == (1, "0.weight", "weight", 1, 0)
    assert {p.param for p in res.errors} == {"0.weight"}
    cli = run_cli("compare", runs["corrupted"], "--ranks", "--no-cache")
    assert cli.code == 1 and "(weight, 0.weight, " in cli.out


def test_a_shard_planted_before_its_all_gather_agrees_across_ranks(runs):
    """Every rank gathers the same planted shard: no rank comparison can tell, only another run."""
    assert compare_ranks(runs["planted"]).exit_code == 0


def test_all_gathers_are_not_per_rank():
    """c10d's allgather_ and _allgather_base_ give every rank the same result; reduce-scatter does not."""
    import torch
    import torch.distributed  # noqa: F401 - registers the c10d operators
    from debugger.torch.capture import op_hints
    assert not op_hints(torch.ops.c10d._allgather_base_.default)[3]
    assert not op_hints(torch.ops.c10d.allgather_.default)[3]
    assert op_hints(torch.ops.c10d._reduce_scatter_base_.default)[3]
