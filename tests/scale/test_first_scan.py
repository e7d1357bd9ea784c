"""What makes a first scan cheap keeps its results exact: packed worker results, one-read small files,
and the warnings a cached re-scan reports without loading the dump again."""
from __future__ import annotations

import glob
import math
import os
from typing import Any

import numpy as np

from clirun import run_cli
from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.formats.npy import NpyTensor
from debugger.stats.core import CHUNK, Stats, stats_of_chunks
from debugger.watch import preset, scan
from debugger.watch.batch import PackedStats
from debugger.watch.compute import FileResult


def _same(a: Stats | None, b: Stats | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
               for x, y in zip(a.to_dict().values(), b.to_dict().values()))


def test_packed_results_unpack_exactly() -> None:
    rows = [FileResult(Stats(5, 1, 0, 2, 1, 1, 0, -0.0, 1e308, 0.1 + 0.2, 7.0, float("nan"), 2 ** 0.5)),
            FileResult(Stats(3, 3, 0, 0, 0, 0, 0, None, None, None, None, None, None)),
            FileResult(error="/x.npy: truncated"),
            FileResult(None, {(0.0, 1.0): 4}),
            FileResult(Stats(2 ** 52 + 1, 0, 0, 0, 0, 2 ** 52 + 1, 0, 1.0, 1.0, 1.0, 1.0, 0.0, 3.0), {(1.0, 2.0): 9})]
    back = PackedStats.pack(rows).unpack()
    for a, b in zip(rows, back):
        assert _same(a.stats, b.stats) and a.ranges == b.ranges and a.error == b.error and a.units == b.units
    assert isinstance(back[4].stats.count, int) and back[1].stats.min is None   # type: ignore[union-attr]


def test_one_read_chunks_equal_numpys_own_values(tmp_path: Any) -> None:
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((33, 17)).astype(np.float32), np.asfortranarray(rng.standard_normal((40, 9))),
              np.array([1.0, np.nan, np.inf], np.float16), np.zeros((0, 4), np.float32), rng.integers(0, 9, 1000),
              rng.standard_normal(3 * CHUNK + 5).astype(np.float32)]
    for i, a in enumerate(arrays):
        p = str(tmp_path / f"{i}.npy")
        np.save(p, a)
        st = os.stat(p)
        parts = list(NpyTensor(p, st.st_size, st.st_mtime_ns).chunks(CHUNK))
        got = np.concatenate(parts) if parts else np.zeros(0, a.dtype)
        assert got.dtype == a.dtype and np.array_equal(got, np.load(p).reshape(-1, order="C"), equal_nan=True)
        assert all(len(c) <= CHUNK for c in parts)
        flat = np.load(p).reshape(-1, order="C")
        want = stats_of_chunks([flat[j:j + CHUNK] for j in range(0, flat.size, CHUNK)])[0]
        assert _same(stats_of_chunks(iter(parts))[0], want)


def test_a_truncated_small_file_is_named(tmp_path: Any) -> None:
    p = str(tmp_path / "t.npy")
    np.save(p, np.ones(1000, np.float32))
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 40)
    st = os.stat(p)
    try:
        list(NpyTensor(p, st.st_size, st.st_mtime_ns).chunks(CHUNK))
    except Exception as exc:   # noqa: BLE001 - the message is what is checked
        assert p in str(exc) and "truncated" in str(exc)
    else:
        raise AssertionError("a truncated file was read")


def test_a_cached_rescan_reports_the_first_scans_warnings(make_dump: Any, tmp_path: Any) -> None:
    dump = make_dump(ranks=2)
    it_dir = sorted(glob.glob(os.path.join(dump, "rank_1", "*", "0", "1")))[0]
    open(os.path.join(it_dir, "not_a_tensor_name.npy"), "wb").close()   # a listing warning
    cache = str(tmp_path / "cache")
    first = run_cli("scan", "--json", "--cache-dir", cache, dump)
    again = run_cli("scan", "--json", "--cache-dir", cache, dump)
    assert first.json["warnings"] and any("not_a_tensor_name" in w for w in first.json["warnings"])
    assert again.json == first.json and again.err == first.err
    d = open_dump(dump)
    stored = scan(d, preset("recommended"), cache=StatsCache.for_dump(d.root, cache))
    assert stored.rank_warnings is not None and all(r._index is None for r in d.ranks)   # answered without an index
