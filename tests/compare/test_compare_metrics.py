"""Pair metrics against hand-computed values, the NaN/shape/dtype rules, chunking and the grades."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from debugger.compare.cachecodec import cache_names, cached_outcome, outcome_to_extras
from debugger.compare.grades import ERROR, PASS, WARNING, GradeThresholds, grade
from debugger.compare.outcome import Metrics, Outcome
from debugger.compare.values import compare_arrays, compare_sources
from debugger.formats.npy import NpyTensor
from debugger.stats.core import CHUNK

F32 = np.float32
EPS32 = float(np.finfo(np.float32).eps)


def compare_files(path_a: str, path_b: str, fast: bool = True) -> Outcome:
    """compare_sources on two .npy files."""
    return compare_sources(*(NpyTensor(p, os.path.getsize(p), os.stat(p).st_mtime_ns) for p in (path_a, path_b)), fast)


def files(tmp_path, a, b, fortran_a: bool = False):
    pa, pb = str(tmp_path / "a.npy"), str(tmp_path / "b.npy")
    np.save(pa, np.asfortranarray(a) if fortran_a else a)
    np.save(pb, b)
    return pa, pb


def test_hand_computed_metrics(tmp_path):
    a = np.array([1, 2, 3, 4], F32)
    b = np.array([1, 2, 3, 5], F32)
    o = compare_files(*files(tmp_path, a, b))
    m = o.metrics
    assert m.cosine == pytest.approx(34 / math.sqrt(30 * 39), abs=1e-12)   # 1+4+9+20 over |a||b|
    assert m.max_abs_err == 1.0
    assert m.max_rel_err == pytest.approx(0.2)                              # |4-5| / |5|
    assert m.euclidean == 1.0
    assert m.one_thousandth == 0.75 and m.five_thousandths == 0.75
    assert not o.identical
    assert compare_arrays(a, b).metrics == m


def test_zero_baseline_uses_the_dtype_epsilon(tmp_path):
    a = np.array([0, 1e-3, 2], F32)
    b = np.array([0, 0, 2], F32)
    m = compare_files(*files(tmp_path, a, b)).metrics
    assert m.max_rel_err == pytest.approx(float(F32(1e-3)) / EPS32)         # x vs 0 -> |x| / eps(float32)
    assert m.one_thousandth == pytest.approx(2 / 3)                         # 0 vs 0 agrees; 2 vs 2 agrees
    assert m.max_abs_err == pytest.approx(1e-3)
    assert m.euclidean == pytest.approx(1e-3)
    assert m.cosine == pytest.approx(4 / (math.sqrt(4 + float(F32(1e-3)) ** 2) * 2), abs=1e-12)


def test_ratios_count_relative_errors_below_the_bounds():
    b = np.full(10, 100.0, F32)
    a = b.copy()
    a[:2] += 0.2    # rel 0.002: not < 0.001, but < 0.005
    a[2:3] += 0.6   # rel 0.006: neither
    m = compare_arrays(a, b).metrics
    assert m.one_thousandth == pytest.approx(0.7)
    assert m.five_thousandths == pytest.approx(0.9)
    assert m.max_rel_err == pytest.approx(0.006, rel=1e-4)


def test_zero_vectors():
    z = np.zeros(5, F32)
    assert compare_arrays(z, z).metrics.cosine == 1.0
    o = compare_arrays(np.ones(5, F32), z)
    assert o.metrics.cosine == 0.0
    assert grade(o, GradeThresholds())[0] == ERROR


def test_nan_on_one_side_only_is_an_error_and_the_rest_is_measured():
    a = np.array([1, 2, np.nan, 4], F32)
    b = np.array([1, 2, 3, 4], F32)
    o = compare_arrays(a, b)
    assert (o.only_a, o.only_b) == (1, 0)
    assert o.metrics.max_abs_err == 0.0 and o.metrics.cosine == 1.0       # over the 3 finite-on-both elements
    g, reason = grade(o, GradeThresholds())
    assert g == ERROR and reason == "NaN/Inf on a only (1 element)"
    assert grade(compare_arrays(b, a), GradeThresholds()) == (ERROR, "NaN/Inf on b only (1 element)")


def test_the_same_nan_and_inf_on_both_sides_are_left_out():
    a = np.array([1, np.nan, np.inf, 4], F32)
    o = compare_arrays(a, a.copy())
    assert o.nonfinite_both == 2 and o.identical
    assert grade(o, GradeThresholds()) == (PASS, "identical (2 NaN/Inf on both sides)")
    b = a.copy()
    b[2] = -np.inf
    o = compare_arrays(a, b)
    assert o.nonfinite_differ == 1
    assert grade(o, GradeThresholds())[1] == "different NaN/Inf on the two sides (1 element)"


def test_overflowing_float32_squares_fall_back_to_float64():
    a = np.array([3e38, 1.0], F32)
    b = np.array([3e38, 2.0], F32)
    o = compare_arrays(a, b)
    assert o.metrics.max_abs_err == 1.0 and o.metrics.finite
    assert o.only_a == 0 and o.only_b == 0


def test_shape_mismatch(tmp_path):
    o = compare_files(*files(tmp_path, np.zeros((2, 3), F32), np.zeros((3, 2), F32)))
    assert o.metrics is None
    assert grade(o, GradeThresholds()) == (ERROR, "shape (2, 3) vs (3, 2)")


def test_dtype_mismatch_is_an_error_with_metrics(tmp_path):
    a = np.arange(6, dtype=F32)
    o = compare_files(*files(tmp_path, a, a.astype(np.float64)))
    assert o.metrics.max_abs_err == 0.0 and o.metrics.cosine == 1.0
    assert grade(o, GradeThresholds()) == (ERROR, "dtype float32 vs float64")


def test_integer_bool_and_float16_tensors():
    i = np.array([1, 2, 3], np.int64)
    assert compare_arrays(i, i + np.array([0, 0, 1])).metrics.max_abs_err == 1.0
    t = np.array([True, False, True])
    o = compare_arrays(t, ~t)
    assert o.metrics.max_abs_err == 1.0 and grade(o, GradeThresholds())[0] == ERROR
    h = np.array([1, 0, 2], np.float16)
    m = compare_arrays(h + np.float16(1), h).metrics
    assert m.max_rel_err == pytest.approx(1 / float(np.finfo(np.float16).eps))   # 1 vs 0 in float16


def test_many_chunks_agree_with_a_float64_reference(tmp_path):
    rng = np.random.default_rng(0)
    n = 2 * CHUNK + 12345 * 8
    b = rng.standard_normal(n).astype(F32)
    a = (b + rng.standard_normal(n).astype(F32) * 1e-3).astype(F32)
    b[::1000] = 0
    m = compare_files(*files(tmp_path, a.reshape(-1, 8), b.reshape(-1, 8))).metrics
    x, y = a.astype(np.float64), b.astype(np.float64)
    rel = np.abs(x - y) / np.where(y == 0, EPS32, np.abs(y))
    assert m.cosine == pytest.approx(x @ y / np.linalg.norm(x) / np.linalg.norm(y), abs=1e-8)
    assert m.max_abs_err == pytest.approx(np.abs(x - y).max(), rel=1e-6)
    assert m.max_rel_err == pytest.approx(rel.max(), rel=1e-5)
    assert m.euclidean == pytest.approx(np.linalg.norm(x - y), rel=1e-5)
    assert m.one_thousandth == pytest.approx((rel < 1e-3).mean(), abs=1e-5)
    assert m.five_thousandths == pytest.approx((rel < 5e-3).mean(), abs=1e-5)


def test_identical_chunks_shortcut_gives_the_full_result(tmp_path):
    rng = np.random.default_rng(1)
    b = rng.standard_normal(3 * CHUNK).astype(F32)
    a = b.copy()
    a[CHUNK + 7] += 0.5     # one chunk differs, two are byte-identical
    pa, pb = files(tmp_path, a, b)
    fast, full = compare_files(pa, pb, fast=True), compare_files(pa, pb, fast=False)
    assert fast.metrics.max_abs_err == full.metrics.max_abs_err == pytest.approx(0.5)
    assert fast.metrics.cosine == pytest.approx(full.metrics.cosine, abs=1e-12)
    assert fast.metrics.one_thousandth == full.metrics.one_thousandth == pytest.approx(1 - 1 / (3 * CHUNK))
    same = compare_files(pb, pb, fast=True)
    assert same.identical and same.metrics == Metrics(1.0, 0.0, 0.0, 0.0, 1.0, 1.0)


def test_fortran_and_c_order_files_pair_elements_logically(tmp_path):
    a = np.arange(12, dtype=F32).reshape(3, 4)
    o = compare_files(*files(tmp_path, a, a.copy(), fortran_a=True))
    assert o.metrics.max_abs_err == 0.0 and o.metrics.cosine == 1.0


def test_truncated_file_is_an_error(tmp_path):
    pa, pb = files(tmp_path, np.zeros(100, F32), np.zeros(100, F32))
    with open(pa, "r+b") as f:
        f.truncate(os.path.getsize(pa) - 40)
    o = compare_files(pa, pb)
    g, reason = grade(o, GradeThresholds())
    assert g == ERROR and "truncated" in reason and pa in reason


def _o(cos: float, mx: float, ratio: float = 1.0) -> Outcome:
    return Outcome(Metrics(cos, mx, 0.0, mx, ratio, ratio), dtype_a="float32", dtype_b="float32")


@pytest.mark.parametrize("cos,mx,ratio,want", [
    (0.9999999, 5e-5, 1.0, PASS),          # rounding noise
    (0.995, 1e-2, 1.0, WARNING),           # cos < 0.999; not an error as cos >= 0.99
    (0.98, 2e-3, 1.0, ERROR),              # cos < 0.99 and max_abs_err > 0.001
    (0.98, 5e-4, 1.0, WARNING),            # cos < 0.99 but max_abs_err <= 0.001
    (0.85, 1e-6, 1.0, ERROR),              # cos < 0.9 whatever max_abs_err
    (1.0, 1.5, 1.0, ERROR),                # max_abs_err > 1
    (1.0, 0.5, 1.0, WARNING),              # one corrupted element: cos ~1, max_abs_err > 1e-4
    (1.0, 5e-5, 0.99, WARNING),            # 1 % of the elements off by >= 0.1 %
])
def test_default_grades(cos, mx, ratio, want):
    assert grade(_o(cos, mx, ratio), GradeThresholds())[0] == want


def test_grade_reasons_name_the_rule():
    assert grade(_o(0.98, 2e-3), GradeThresholds())[1] == "cosine 0.98 < 0.99 and max_abs_err 0.002 > 0.001"
    assert grade(_o(0.995, 1e-5), GradeThresholds())[1] == "cosine 0.995 < 0.999"
    assert grade(_o(1.0, 0.0), GradeThresholds()) == (PASS, "within thresholds")


def test_threshold_overrides():
    th = GradeThresholds.parse("cos_warn=0.9, abs_warn=1,ratio_warn=0")
    assert (th.cos_warn, th.abs_warn, th.ratio_warn, th.cos_error) == (0.9, 1.0, 0.0, 0.99)
    assert grade(_o(0.995, 1e-2), th)[0] == PASS
    assert GradeThresholds.parse(None) == GradeThresholds()
    for bad in ("foo=1", "cos_warn=x", "cos_warn", "abs_fail=inf"):
        with pytest.raises(ValueError):
            GradeThresholds.parse(bad)


def test_cache_records_round_trip():
    o = compare_arrays(np.array([1, np.nan, 3], F32), np.array([1, 2, 3.5], F32))
    store = dict(cache_names(("a", "b"), outcome_to_extras(o)))
    back = cached_outcome(store.get, ("a", "b"))
    assert back.metrics == o.metrics and back.only_a == 1 and back.identical == o.identical
    assert cached_outcome({}.get, ("a", "b")) is None
    assert outcome_to_extras(Outcome(error="x")) is None


def test_small_files_compared_whole_equal_the_chunked_pass(tmp_path, monkeypatch):
    """Small files are compared from one read of each (TensorSource.whole); the outcome is the chunked pass's,
    Fortran order, NaN on both sides and a shape mismatch included."""
    import debugger.formats.npy as npy_mod

    rng = np.random.default_rng(3)
    base = rng.standard_normal((40, 30)).astype(F32)
    base[2, 3] = np.nan
    cases = [(base + F32(1e-3), base, False), (base, base, True), (base[:, :20], base, False),
             (base.astype(np.float64), base, True)]
    whole, chunked = [], []
    for a, b, fortran in cases:
        pa, pb = files(tmp_path, a, b, fortran_a=fortran)
        whole.append(compare_files(pa, pb))
        monkeypatch.setattr(npy_mod, "READ_LIMIT", 0)       # every file read in chunks
        chunked.append(compare_files(pa, pb))
        monkeypatch.undo()
    assert whole == chunked
    assert whole[1].identical and whole[1].nonfinite_both == 1 and whole[2].shape_mismatch


def test_a_side_b_shared_by_consecutive_pairs_is_read_once(tmp_path):
    """compare_many (what a worker runs): every rank against one base tensor reads the base once for the run
    of pairs that share it; the outcomes are compare_sources' one by one, an unreadable base an error each."""
    from debugger.compare.values import compare_many

    reads: list[str] = []

    class CountedNpy(NpyTensor):
        def whole(self):
            reads.append(self.path)
            return super().whole()

    def tensor(name, values, cls=NpyTensor):
        p = str(tmp_path / f"{name}.npy")
        np.save(p, values)
        return cls(p, os.path.getsize(p), os.stat(p).st_mtime_ns)

    b = tensor("b", np.arange(12, dtype=F32), CountedNpy)
    sides_a = [tensor(f"a{i}", np.arange(12, dtype=F32) + F32(i * 0.5)) for i in range(5)]
    got = compare_many([(a, b) for a in sides_a])
    assert got == [compare_sources(a, b) for a in sides_a]
    assert reads.count(b.path) == 1 + len(sides_a)       # once for the run, once per compare_sources above
    gone = CountedNpy(str(tmp_path / "absent.npy"), 48, 0)
    errors = compare_many([(a, gone) for a in sides_a[:2]])
    assert all(o.error and "absent.npy" in o.error for o in errors) and reads.count(gone.path) == 1
