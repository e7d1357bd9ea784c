import numpy as np
import pytest

from debugger.stats.core import (CHUNK, STAT_NAMES, Stats, compiled_kernel, compute_stats, histogram, quick_stats,
                           stats_in_threads, tensor_stats)


# the tests of the compiled kernel itself (numba is a test extra: without it they skip, named)
needs_numba = pytest.mark.skipif(compiled_kernel() is None, reason="numba is not installed (pip install -e '.[test]')")


@pytest.fixture(params=[False, True], ids=["numpy", "compiled"])
def compiled(request) -> bool:
    """Every statistic both ways: numpy's passes (scans) and the compiled one-pass kernel (the recorder)."""
    if request.param and compiled_kernel() is None:
        pytest.skip("numba is not installed: the compiled kernel (the recorder's) is a test extra")
    return request.param


def _reference(a: np.ndarray) -> dict:
    f = a[np.isfinite(a)].astype(np.float64)
    return {"min": f.min(), "max": f.max(), "mean": f.mean(), "abs_mean": np.abs(f).mean(),
            "std": f.std(ddof=1) if f.size > 1 else 0.0, "l2norm": np.linalg.norm(f)}


@pytest.mark.parametrize("n", [1, 7, CHUNK - 1, CHUNK, CHUNK + 123, 3 * CHUNK + 5])
def test_stats_match_numpy_across_chunk_boundaries(n, compiled):
    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n) * 3 + 1).astype(np.float32)
    s = tensor_stats(a, compiled=compiled)
    ref = _reference(a)
    assert s.count == n and s.nan == 0
    for k, v in ref.items():
        # float32 data is summed in float32 (SIMD lanes): ~1e-7 relative, as precise as the data
        assert getattr(s, k) == pytest.approx(v, rel=2e-6, abs=1e-12), k


def test_stats_count_nonfinite_zeros_and_signs(compiled):
    a = np.array([np.nan, np.inf, -np.inf, 0.0, 0.0, -2.0, 3.0], dtype=np.float32)
    s = tensor_stats(a, compiled=compiled)
    assert (s.nan, s.pos_inf, s.neg_inf, s.zeros, s.positives, s.negatives) == (1, 1, 1, 2, 1, 1)
    assert s.has_nonfinite and s.finite == 4
    assert (s.min, s.max, s.mean) == (-2.0, 3.0, 0.25)
    assert s.zero_percentage == pytest.approx(100 * 2 / 7)


def test_stats_of_all_nan_tensor_have_no_value_statistics(compiled):
    s = tensor_stats(np.full((3, 3), np.nan, dtype=np.float16), compiled=compiled)
    assert s.nan == 9 and s.min is None and s.mean is None and s.abs_mean is None


def test_stats_of_bool_int_and_scalar_tensors(compiled):
    assert tensor_stats(np.array([True, False, True]), compiled=compiled).mean == pytest.approx(2 / 3)
    assert tensor_stats(np.arange(5, dtype=np.int64), compiled=compiled).zeros == 1
    s = tensor_stats(np.array(4.0, dtype=np.float32), compiled=compiled)
    assert s.count == 1 and s.max == 4.0 and s.std == 0.0


def test_range_counts_are_inclusive_and_per_range():
    a = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0], dtype=np.float32)
    _, counts = compute_stats(a, ((-1.0, 0.0), (0.5, 1.0), (5.0, 6.0)))
    assert counts == {(-1.0, 0.0): 3, (0.5, 1.0): 2, (5.0, 6.0): 0}


def test_stats_roundtrip_through_dict():
    s = tensor_stats(np.arange(10, dtype=np.float32))
    assert Stats.from_dict(s.to_dict()) == s


def test_histogram_ignores_nonfinite_values():
    h = histogram(np.array([0.0, 1.0, np.nan, np.inf, 1.0]), bins=2)
    assert sum(h["counts"]) == 3 and h["edges"][0] == 0.0 and h["edges"][-1] == 1.0


@pytest.mark.parametrize("mean,std", [(0, 1), (1, 1), (-3, 2), (1, 0.01), (1, 1e-4), (100, 1), (1e4, 1)])
def test_float32_statistics_are_accurate_whatever_the_mean(mean, std, compiled):
    """Sums stay in float32 for speed; the spread must survive a mean far larger than it
    (a BatchNorm variance near 1, a weight near its initial value)."""
    a = (np.random.default_rng(0).standard_normal(700_000) * std + mean).astype(np.float32)
    b = a.astype(np.float64)
    st = tensor_stats(a, compiled=compiled)
    assert st.std == pytest.approx(b.std(ddof=1), rel=1e-5)
    assert st.mean == pytest.approx(b.mean(), rel=1e-6, abs=1e-7 * std)
    assert st.l2norm == pytest.approx(np.sqrt(np.dot(b, b)), rel=1e-6)
    assert st.abs_mean == pytest.approx(np.abs(b).mean(), rel=1e-6)
    assert (st.min, st.max) == (b.min(), b.max())


@pytest.mark.parametrize("kind", ["relu", "negative", "mixed-chunks", "int-relu", "strictly-positive"])
def test_one_signed_chunks_count_signs_and_absolute_sums(kind, compiled):
    """Chunks of one sign take a shortcut for positives and |x|: counts and sums as a plain count."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal(3 * CHUNK + 11).astype(np.float32)
    if kind == "relu":
        a = np.maximum(a, 0)
    elif kind == "negative":
        a = -np.abs(a)
        a[::7] = 0
    elif kind == "mixed-chunks":
        a[:CHUNK] = np.abs(a[:CHUNK])                   # first chunk positive, the next one negative
        a[CHUNK:2 * CHUNK] = -np.abs(a[CHUNK:2 * CHUNK])
        a[5] = a[CHUNK + 5] = 0
    elif kind == "int-relu":
        a = np.maximum((a * 10).astype(np.int32), 0)
    else:
        a = np.abs(a) + 1e-3            # Adam's second moment, a softmax: no zero anywhere
        a[CHUNK + 3] = 0                # but one in the second chunk
    s = tensor_stats(a, compiled=compiled)
    assert (s.zeros, s.positives, s.negatives) == (np.count_nonzero(a == 0), np.count_nonzero(a > 0),
                                                   np.count_nonzero(a < 0))
    ref = _reference(a.astype(np.float64))
    for k in ("min", "max", "mean", "abs_mean", "std", "l2norm"):
        # float32 sums: a mean near 0 (chunks of opposite signs) is exact to ~1e-6 of mean |x|
        assert getattr(s, k) == pytest.approx(ref[k], rel=2e-6, abs=1e-6 * ref["abs_mean"]), k


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_kernel_is_one_exact_pass(dtype):
    """The kernel itself: float64 sums, exact counts, and min/max through integer keys of the bits
    (negative and positive zeros, subnormals and the largest values keep their order)."""
    info = np.finfo(dtype)
    big = info.max if dtype == np.float32 else 1e200     # float64: a square that overflows, sums that do not
    rng = np.random.default_rng(3)
    a = rng.standard_normal(100_003).astype(dtype)
    a[:8] = [0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal, big, -big / 2, 0.0, 1.0]
    kernel = compiled_kernel()
    assert kernel is not None
    s, sq, ab, zeros, positives, lo, hi = kernel(a, a.view(np.int32 if dtype == np.float32 else np.int64))
    b = a.astype(np.float64)
    assert (zeros, positives) == (np.count_nonzero(a == 0), np.count_nonzero(a > 0))
    assert (lo, hi) == (b.min(), b.max())
    assert s == pytest.approx(np.sum(b), rel=1e-12) and ab == pytest.approx(np.abs(b).sum(), rel=1e-12)
    if dtype == np.float32:
        assert sq == pytest.approx(np.dot(b, b), rel=1e-12)
    else:
        assert sq == np.inf                                # so stats.py falls back to numpy's passes
        np.testing.assert_equal(tensor_stats(a, compiled=True).to_dict(), tensor_stats(a).to_dict())


@needs_numba
def test_compiled_and_numpy_statistics_agree_on_every_kind_of_chunk():
    """Whatever path a chunk takes (kernel, or numpy for non-finite, strided, big-endian, far-from-zero
    means), both give the same statistics: counts exactly, values to float32 rounding."""
    rng = np.random.default_rng(4)
    base = rng.standard_normal(2 * CHUNK + 5).astype(np.float32)
    cases = [base, np.maximum(base, 0), base[::3], base.astype(">f4"), base + 1e4, base.astype(np.float16),
             np.where(base > 2, np.nan, base), (base * 100).astype(np.int64), np.zeros(10, np.float32)]
    for a in cases:
        want, got = tensor_stats(a), tensor_stats(a, compiled=True)
        for name in ("count", "nan", "pos_inf", "neg_inf", "zeros", "positives", "negatives", "min", "max"):
            assert getattr(got, name) == getattr(want, name), (a.dtype, name)
        for name in ("mean", "abs_mean", "std", "l2norm"):
            assert getattr(got, name) == pytest.approx(getattr(want, name), rel=1e-5, abs=1e-6), (a.dtype, name)


def _fresh_python(code: str, env: dict[str, str], cwd: str | None = None) -> list[str]:
    """What ``code`` prints, word by word, run by a fresh interpreter with ``env`` added to ours."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, cwd=cwd, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


_SAME_AS_NUMPY = ("import numpy as np; from debugger.stats.core import compiled_kernel, tensor_stats; "
                  "a = np.arange(-5, 5, dtype=np.float32); "
                  "print(compiled_kernel() is None, tensor_stats(a, compiled=True) == tensor_stats(a))")


def test_a_disabled_numba_jit_leaves_numpy_passes():
    """NUMBA_DISABLE_JIT would make the kernel a Python loop (about 1 us an element, minutes per
    training step): the statistics then take numpy's passes, and are the same."""
    assert _fresh_python(_SAME_AS_NUMPY, {"NUMBA_DISABLE_JIT": "1"}) == ["True", "True"]


@needs_numba
def test_kernel_compiles_where_numba_cannot_cache(tmp_path):
    """An install whose __pycache__ cannot be made, with no user cache folder either (a read-only
    install, no writable home): numba has nowhere to cache, and the kernel is compiled for this
    process alone, not dropped; nothing is written."""
    import os
    import shutil

    import debugger

    pkg = tmp_path / "debugger"
    shutil.copytree(os.path.dirname(debugger.__file__), pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "stats" / "__pycache__").write_bytes(b"")   # a file where numba would make its folder (beside kernel.py)
    (tmp_path / "no-cache-dir").write_bytes(b"")
    env = {"PYTHONPATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "no-cache-dir"), "HOME": str(tmp_path),
           "NUMBA_CACHE_DIR": ""}
    code = ("import numpy as np, debugger.stats as s; "
            "a = np.arange(-5, 5, dtype=np.float32); print(s.__file__, s.compiled_kernel() is not None, "
            "s.tensor_stats(a, compiled=True) == s.tensor_stats(a))")
    assert _fresh_python(code, env, cwd=str(tmp_path)) == [str(pkg / "stats" / "__init__.py"), "True", "True"]
    assert not list(tmp_path.rglob("*.nb*"))


def _row(st: Stats) -> tuple:
    return tuple(getattr(st, n) for n in STAT_NAMES)


@needs_numba
@pytest.mark.parametrize("a", [
    np.random.default_rng(1).standard_normal(5000).astype(np.float32),
    np.random.default_rng(2).standard_normal((30, 70)) + 1e4,        # mean far from the spread: centred pass
    np.array([3.5], np.float32), np.zeros(7, np.float32), np.array([1e30, -2e30], np.float32),
    np.arange(12.0).reshape(3, 4),
], ids=["f32", "f64-offset", "one", "zeros", "huge", "f64-2d"])
def test_quick_stats_are_tensor_stats_to_the_bit(a: np.ndarray) -> None:
    """The recorder's one-call path gives the very numbers of the compiled tensor_stats."""
    assert compiled_kernel() is not None
    assert quick_stats(a) == _row(tensor_stats(a, compiled=True))


@needs_numba
def test_quick_stats_leave_the_rest_to_tensor_stats() -> None:
    """A non-finite element, another dtype, a strided view or more than one chunk: None (the caller
    takes tensor_stats)."""
    f = np.ones(100, np.float32)
    f[3] = np.nan
    assert quick_stats(f) is None
    assert quick_stats(np.ones(10, np.float16)) is None
    assert quick_stats(np.ones((10, 10), np.float32)[:, ::2]) is None
    assert quick_stats(np.ones(CHUNK + 1, np.float32)) is None
    assert quick_stats(np.ones(0, np.float32)) is None


@needs_numba
def test_stats_in_threads_are_tensor_stats_to_the_bit() -> None:
    """Every other chunk read by a second thread, merged in chunk order: the very numbers, NaN and Inf
    counted."""
    from concurrent.futures import ThreadPoolExecutor

    a = np.random.default_rng(3).standard_normal(5 * CHUNK + 123).astype(np.float32)
    a[7], a[CHUNK + 1], a[3 * CHUNK] = np.nan, np.inf, -np.inf
    with ThreadPoolExecutor(1) as pool:
        assert _row(stats_in_threads(a, pool.submit)) == _row(tensor_stats(a, compiled=True))
