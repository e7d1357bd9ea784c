import os
import warnings
from typing import Any

import numpy as np

from debugger.stats.cache import ExtraKey, StatsCache, default_cache_dir
from debugger.stats.core import tensor_stats


def test_cache_roundtrip_survives_reopening(tmp_path):
    c = StatsCache(str(tmp_path / "c"))
    s = tensor_stats(np.arange(6, dtype=np.float32))
    c.put("a|24|1", s)
    c.put_extra(ExtraKey("a|24|1", "range", (0, 1)), 3)
    c.flush()
    again = StatsCache(str(tmp_path / "c"))
    assert again.get("a|24|1") == s
    assert again.get_extra(ExtraKey("a|24|1", "range", (0, 1))) == 3.0
    assert again.get_extra(ExtraKey("a|24|1", "range", (0, 2))) is None     # other arguments: another number
    assert ExtraKey.of_pair("a", "b", "excess", 0.01).text() == "a>b|excess|0.01"
    assert again.get("a|24|2") is None  # another identity (the file changed): a miss


def test_cache_appends_without_losing_entries(tmp_path):
    for i in range(3):
        c = StatsCache(str(tmp_path))
        c.put(f"f{i}", tensor_stats(np.full(3, i, dtype=np.float32)))
        c.flush()
    c = StatsCache(str(tmp_path))
    assert [c.get(f"f{i}").mean for i in range(3)] == [0.0, 1.0, 2.0]


def test_disabled_cache_remembers_nothing(tmp_path):
    c = StatsCache(str(tmp_path), enabled=False)
    c.put("x", tensor_stats(np.zeros(2)))
    c.flush()
    assert c.get("x") is None and not os.listdir(tmp_path)


def test_unwritable_cache_dir_warns_and_goes_on(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    c = StatsCache(str(blocker / "sub"))
    c.put("x", tensor_stats(np.zeros(2)))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        c.flush()
    assert any("not written" in str(x.message) for x in w)


def test_corrupt_cache_file_is_ignored(tmp_path):
    (tmp_path / "stats.h5").write_bytes(b"garbage" * 10)
    c = StatsCache(str(tmp_path))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert c.get("x") is None
    assert any("unreadable" in str(x.message) for x in w)
    c.put("x", tensor_stats(np.ones(2)))
    c.flush()  # a corrupt cache file is ours to replace
    assert StatsCache(str(tmp_path)).get("x").mean == 1.0


def test_default_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TDBG_CACHE_DIR", str(tmp_path / "t"))
    assert default_cache_dir() == str(tmp_path / "t")
    monkeypatch.delenv("TDBG_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == str(tmp_path / "x" / "tdbg")


def test_cache_file_is_named_after_the_dump_root(tmp_path):
    a = StatsCache.for_dump("/some/dump", str(tmp_path))
    b = StatsCache.for_dump("/other/dump", str(tmp_path))
    assert a.path != b.path and a.path.startswith(str(tmp_path))


def _write_many(directory: str, start: int, rounds: int, q: Any) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for r in range(rounds):
            c = StatsCache(directory, "shared")
            for i in range(50):
                c.put(f"k{start}-{r}-{i}", tensor_stats(np.arange(i + 1, dtype=np.float32)))
            c.flush()
    q.put([str(w.message) for w in caught])


def test_concurrent_writers_wait_for_each_other(tmp_path: Any) -> None:
    """Two processes flushing into one cache: both write everything; neither skips ("unable to lock")."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_write_many, args=(str(tmp_path), s, 8, q)) for s in (0, 1)]
    for p in procs:
        p.start()
    messages = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert messages == [[], []], messages
    c = StatsCache(str(tmp_path), "shared")
    assert all(c.get(f"k{s}-{r}-{i}") is not None for s in (0, 1) for r in range(8) for i in range(50))
