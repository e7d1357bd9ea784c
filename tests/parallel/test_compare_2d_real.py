"""compare on a real 2-D recording (FSDP2 over "dp" x tensor parallel over "tp", 4 gloo ranks, statistics
only): its ranks agree where they must and no shard is compared with another; against one process its
logical tensors, combined from the shards' statistics, agree."""
from __future__ import annotations

import pytest

from clirun import run_cli
from debugger import open_dump
from debugger.compare import compare_ranks
from debugger.compare.logical_runs import compare_logical
from realruns import record


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[str, str]:
    d = str(tmp_path_factory.mktemp("2d"))
    return record(d, "single"), record(d, "2d")


def test_2d_ranks_never_compare_two_shards(runs):
    _, mesh2d = runs
    res = compare_ranks(mesh2d)
    assert res.exit_code == 0, [(p.node, p.a.rank, p.b.rank, p.reason) for p in res.errors][:5]
    layouts = {r.rank: r.info.layout for r in open_dump(mesh2d).ranks}
    for p in res.pairs:
        if p.param and p.node == p.param:
            a, b = layouts[p.a.rank].params[p.param], layouts[p.b.rank].params[p.param]
            assert a.key() == b.key(), (p.node, p.a.rank, p.b.rank)


def test_2d_against_one_process_from_statistics(runs):
    single, mesh2d = runs
    res = compare_logical(mesh2d, single)
    assert res.exit_code == 0 and res.first_divergence is None
    assert len(res.pairs) == 2 * 61        # 12 weights, 12 gradients, 36 Adam states, the loss; 2 iterations
    # equal digests (Adam's step) or statistics within float32's reduction-order noise
    assert all(p.outcome.identical or p.outcome.stat_diff[3] < 1e-5 for p in res.pairs)
    assert sum(p.outcome.stat_diff is not None for p in res.pairs) > 80
    cli = run_cli("compare", mesh2d, single, "--no-cache")
    assert cli.code == 0 and "Compared the logical tensors" in cli.out
