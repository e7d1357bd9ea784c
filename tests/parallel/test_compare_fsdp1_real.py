"""compare across layouts on real recordings: FSDP1 (use_orig_params, flat parameters cut unevenly over 2
gloo ranks) against one process, statistics only: logical tensors combined from the flat shards agree."""
from __future__ import annotations

import pytest

from clirun import run_cli
from debugger.compare.logical_runs import compare_logical
from realruns import record


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[str, str]:
    d = str(tmp_path_factory.mktemp("fsdp1"))
    return record(d, "single"), record(d, "fsdp1")


def test_fsdp1_against_one_process(runs):
    single, fsdp1 = runs
    res = compare_logical(fsdp1, single)
    assert res.exit_code == 0 and res.first_divergence is None
    assert len({p.param for p in res.pairs if p.kind == "weight"}) == 12 and not any(p.missing for p in res.pairs)
    assert all(p.outcome.identical or p.outcome.stat_diff[3] < 1e-5 for p in res.pairs)
    cli = run_cli("compare", fsdp1, single, "--no-cache", "--json")
    assert cli.code == 0 and cli.json["mode"] == "logical"
