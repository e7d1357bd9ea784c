"""Comparing tensors that have statistics but no values (statistics-only dumps): graded by how far
the statistics both sides stored are apart, so the first divergence is still found."""
from __future__ import annotations

import os

import numpy as np

from clirun import run_cli
from debugger.compare.grades import ERROR, PASS, WARNING, GradeThresholds, grade
from debugger.compare.outcome import Outcome
from debugger.compare.statistics_only import compare_statistics
from debugger.stats.core import tensor_stats

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "dumps_sample", "msprobe")


def _graded(a: np.ndarray, b: np.ndarray) -> tuple[str, str]:
    out = Outcome()
    assert compare_statistics(vars(tensor_stats(a)), vars(tensor_stats(b)), out)
    return grade(out, GradeThresholds())


def test_statistics_only_runs_name_the_same_first_divergence_as_values(tmp_path):
    """The msprobe pair with one perturbed weight, converted to statistics only: the divergence is
    still the perturbed weight where the first forward op reads it."""
    stats = {}
    for side in ("baseline", "perturbed"):
        stats[side] = str(tmp_path / side)
        r = run_cli("convert", "--statistics", os.path.join(SAMPLES, f"pair_{side}"), stats[side])
        assert r.code == 0, r.err
    values = run_cli("compare", os.path.join(SAMPLES, "pair_perturbed"), os.path.join(SAMPLES, "pair_baseline"),
                     "--json", "--no-cache").json["first_divergence"]
    r = run_cli("compare", stats["perturbed"], stats["baseline"], "--json", "--no-cache")
    assert r.code == 1, r.err
    first = r.json["first_divergence"]
    assert (first["iteration"], first["node"], first["io"], first["slot"], first["param"]) == \
        (values["iteration"], values["node"], values["io"], values["slot"], values["param"]) == \
        (0, values["node"], "input", values["slot"], "block.0.weight")
    assert first["grade"] == ERROR and "from statistics" in first["reason"]
    same = run_cli("compare", stats["baseline"], stats["baseline"], "--json", "--no-cache")
    assert same.code == 0 and same.json["first_divergence"] is None
    # the statistics' bounds are thresholds like the others: loose enough, nothing is an error
    loose = run_cli("compare", stats["perturbed"], stats["baseline"], "--json", "--no-cache",
                    "--thresholds", "stat_error=10,stat_warn=10")
    assert loose.code == 0 and loose.json["summary"]["error"] == 0, loose.err


def test_rounding_noise_is_not_an_error_and_a_centred_mean_does_not_fool_it():
    rng = np.random.default_rng(0)
    w = rng.standard_normal(4096).astype(np.float32)
    w -= w.mean()                               # mean ~1e-9: relative to itself any change is huge
    noise = (w * (1 + rng.choice([-1, 1], w.size) * np.float32(6e-8))).astype(np.float32)
    assert _graded(w, noise)[0] in (PASS, WARNING)
    assert _graded(w, w.copy()) == (PASS, "statistics equal (values not stored: equal statistics do not prove equal values)")
    perturbed = w + 0.2 * w.std() * rng.standard_normal(w.size).astype(np.float32)
    g, reason = _graded(w, perturbed)
    assert g == ERROR and "statistics differ" in reason


def test_nan_on_one_side_only_is_an_error_from_statistics():
    a = np.ones(8, np.float32)
    b = a.copy()
    b[3] = np.nan
    g, reason = _graded(b, a)
    assert g == ERROR and "NaN/Inf on a only" in reason
