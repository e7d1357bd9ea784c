"""list_folders and hash_tree: the stats shared with forked children give exactly the serial answer,
and a child that fails or dies only costs time (its part is stated again, never left out)."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from typing import Any

import pytest

from debugger.formats import files
from debugger.formats.files import FORKS, hash_tree, list_folders

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or not sys.platform.startswith("linux"),
                                reason="forked stats are Linux-only")


def _tree(root: str, folders: int = 6, per_folder: int = 600) -> str:
    """A tree of several thousand files, with a nested folder, links and a FIFO among them."""
    for f in range(folders):
        d = os.path.join(root, "net", f"{f:02d}")
        os.makedirs(d)
        for i in range(per_folder):
            with open(os.path.join(d, f"t{i:04d}.npy"), "wb") as fh:
                fh.write(b"x" * (i % 7))
    os.makedirs(os.path.join(root, "net", "00", "inner", "deeper"))
    with open(os.path.join(root, "net", "00", "inner", "deeper", "z.bin"), "wb") as fh:
        fh.write(b"zz")
    os.symlink(os.path.join(root, "net", "01", "t0001.npy"), os.path.join(root, "net", "02", "link_to_file"))
    os.symlink(os.path.join(root, "net", "01"), os.path.join(root, "net", "02", "link_to_folder"))
    os.symlink(os.path.join(root, "absent"), os.path.join(root, "net", "02", "dangling"))
    os.mkfifo(os.path.join(root, "net", f"{folders - 1:02d}", "fifo"))
    with open(os.path.join(root, "net", "01", os.fsdecode(b"undecodable-\xff.npy")), "wb") as fh:
        fh.write(b"u")   # a name that is no UTF-8: surrogate-escaped, it must cross the pipe intact
    return root


def _fp(root: str, workers: int | None) -> str:
    h = hashlib.blake2b(digest_size=16)
    hash_tree(h, root, workers=workers)
    return h.hexdigest()


def _folders(root: str) -> list[str]:
    return sorted(os.path.join(d, n) for d, names, _ in os.walk(root) for n in names) + [root]


# Run in a fresh process: the suite's own process may hold threads (a test's server), where
# list_folders rightly never forks, and these tests are about the forked path.
_FRESH = """
import hashlib, json, os, sys
from debugger.formats.files import FORKS, hash_tree, list_folders
root, faults = sys.argv[1], sys.argv[2:]
def fp(w):
    h = hashlib.blake2b(digest_size=16)
    hash_tree(h, root, workers=w)
    return h.hexdigest()
paths = sorted(os.path.join(d, n) for d, names, _ in os.walk(root) for n in names) + [root]
serial = list_folders(paths, workers=1)
out = {"fp": [fp(w) for w in (1, 2, 3, None)], "same": list_folders(paths, workers=3) == serial}
out["reported"] = FORKS.reported
for fault in faults:
    failed, reported = FORKS.failed, FORKS.reported
    if fault == "raw-thread":   # an OS thread threading does not count, as a native library's would be
        import _thread
        lock = _thread.allocate_lock()
        lock.acquire()
        _thread.start_new_thread(lock.acquire, ())
        out[fault] = [list_folders(paths, workers=3) == serial, FORKS.reported - reported + FORKS.failed - failed]
        continue
    out[fault] = [list_folders(paths, workers=3, child_fault=fault) == serial, FORKS.failed - failed]
    h = hashlib.blake2b(digest_size=16)
    hash_tree(h, root, workers=2, child_fault=fault)
    out[fault].append(h.hexdigest())
print(json.dumps(out))
"""


def _fresh(root: str, *faults: str) -> dict[str, Any]:
    """Fingerprints (workers 1, 2, 3, default) and listings of ``root`` in a new process without threads."""
    p = subprocess.run([sys.executable, "-c", _FRESH, root, *faults], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    out: dict[str, Any] = json.loads(p.stdout)
    return out


@needs_fork
def test_forked_and_serial_agree_on_samples_and_a_big_tree(tmp_path: Any, sample_root: str) -> None:
    big = _tree(str(tmp_path / "big"))
    for root in (os.path.join(sample_root, "single"), os.path.join(sample_root, "dp2"), big):
        got = _fresh(root)
        assert got["fp"] == [_fp(root, 1)] * 4 and got["same"]
        assert got["reported"] >= 3   # the children really stated and reported their parts
    listed = {f.path: f for f in list_folders(_folders(big), workers=1)}
    mixed = listed[os.path.join(big, "net", "02")]
    assert "link_to_folder" in mixed.names and "link_to_folder" not in mixed.folders   # never walked into
    assert mixed.stats[3 * mixed.names.index("dangling")] == -1                         # listed, not stated
    assert listed[os.path.join(big, "net", "00")].folders == ["inner"]
    assert len(listed[os.path.join(big, "net", "04")].names) == 600
    assert os.fsdecode(b"undecodable-\xff.npy") in listed[os.path.join(big, "net", "01")].names


@needs_fork
def test_fingerprint_changes_with_rewrite_add_remove_rename(tmp_path: Any) -> None:
    big = _tree(str(tmp_path / "big"), folders=4, per_folder=1000)
    seen = {_fp(big, 1)}
    assert _fresh(big)["fp"] == [_fp(big, 1)] * 4
    target = os.path.join(big, "net", "03", "t0500.npy")
    st = os.stat(target)
    with open(target, "r+b") as fh:   # the same size, other bytes, a new mtime
        fh.write(b"y" * st.st_size)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))

    def changed() -> None:
        serial = _fp(big, 1)
        assert _fresh(big)["fp"] == [serial] * 4 and serial not in seen
        seen.add(serial)

    changed()
    with open(os.path.join(big, "net", "01", "new.npy"), "wb") as fh:
        fh.write(b"n")
    changed()
    os.remove(os.path.join(big, "net", "02", "t0002.npy"))
    changed()
    os.rename(os.path.join(big, "net", "00", "t0003.npy"), os.path.join(big, "net", "00", "t9999.npy"))
    changed()


@needs_fork
def test_a_failing_child_costs_time_not_truth(tmp_path: Any) -> None:
    big = _tree(str(tmp_path / "big"), folders=4, per_folder=500)
    got = _fresh(big, "exit", "truncate", "kill")
    for fault in ("exit", "truncate", "kill"):
        # both children failed, both parts were stated by the parent instead: the serial listing, and
        # the serial fingerprint
        assert got[fault] == [True, 2, _fp(big, 1)], fault


@needs_fork
def test_no_fork_beside_a_thread_python_does_not_count(tmp_path: Any) -> None:
    big = _tree(str(tmp_path / "big"), folders=4, per_folder=200)
    assert _fresh(big, "raw-thread")["raw-thread"] == [True, 0]   # the same listing, and no child at all


@needs_fork
def test_no_fork_in_a_threaded_process_or_below_the_threshold(tmp_path: Any) -> None:
    big = _tree(str(tmp_path / "big"), folders=3, per_folder=300)
    paths = _folders(big)
    serial = list_folders(paths, workers=1)
    before = (FORKS.reported, FORKS.failed)
    assert list_folders(paths) == serial                       # ~900 files: under FORK_AT, serial
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert list_folders(paths, workers=2) == serial       # another thread: never fork, even when asked
        assert list_folders(paths, fork_at=0) == serial
    finally:
        stop.set()
        t.join()
    assert (FORKS.reported, FORKS.failed) == before
    assert list_folders(paths, fork_at=0) == serial             # threshold 0: forked where it is safe
    assert files.FORK_AT > 1000


def test_unlistable_and_absent_folders(tmp_path: Any) -> None:
    absent = str(tmp_path / "absent")
    a_file = str(tmp_path / "file")
    with open(a_file, "w") as fh:
        fh.write("x")
    for f in list_folders([absent, a_file], workers=1):
        assert f.error and f.names == [] and f.folders == [] and len(f.stats) == 0
    assert _fp(absent, 1) == hashlib.blake2b(digest_size=16).hexdigest()


def test_ranks_listed_together_are_the_ranks_listed_one_by_one(tmp_path: Any) -> None:
    """tree.list_ranks (one list_folders call for every rank's tensor folders, forked past a few thousand
    files) gives each rank the listing list_rank gives it alone, and a rank dir that cannot be listed is
    its error, in its place, while the others are listed."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import dumpmaker
    from debugger.errors import DumpError
    from debugger.formats.mindspore.tree import list_rank, list_ranks

    root = dumpmaker.make_dump(str(tmp_path / "d"), ranks=24, iterations=3)
    ranks = [(r, os.path.join(root, f"rank_{r}")) for r in range(24)] + [(99, str(tmp_path / "rank_99"))]
    together = list_ranks(ranks)
    assert isinstance(together[-1], DumpError) and str(tmp_path / "rank_99") in str(together[-1])
    alone = [list_rank(r, p) for r, p in ranks[:-1]]
    assert together[:-1] == alone and sum(len(f) for lst in alone for f in lst.tensors.values()) > 4096
