"""Tolerances follow the dtypes, on real recordings: one process in bfloat16 against float32 (statistics only)
is not divergent on bfloat16's rounding, but a planted +1.0 on a weight is."""
from __future__ import annotations

import pytest

from clirun import run_cli
from debugger.compare.logical_runs import compare_logical
from realruns import record


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[str, str, str]:
    d = str(tmp_path_factory.mktemp("dtype"))
    return (record(d, "single"), record(d, "single", dtype="bfloat16"),
            record(d, "single", dtype="bfloat16", plant="layers.0.up.weight@0:1"))


def test_bfloat16_rounding_is_no_divergence(runs):
    fp32, bf16, _ = runs
    res = compare_logical(bf16, fp32)
    assert res.exit_code == 0
    assert {p.precision for p in res.pairs} == {"bfloat16"}
    worst = max(p.outcome.stat_diff[3] for p in res.pairs if p.outcome.stat_diff is not None)
    assert 1e-3 < worst < 16 * 2 ** -8       # beyond float32's bound, within bfloat16's
    cli = run_cli("compare", bf16, fp32, "--logical", "--no-cache")
    assert cli.code == 0 and "graded at bfloat16 precision" in cli.out


def test_a_planted_weight_in_bfloat16_is_found(runs):
    fp32, _, planted = runs
    res = compare_logical(planted, fp32)
    f = res.first_divergence
    assert res.exit_code == 1 and (f.iteration, f.node, f.kind) == (1, "layers.0.up.weight", "weight")
