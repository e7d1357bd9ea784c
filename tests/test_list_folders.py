"""list_folders and hash_tree: the stats shared with forked children give exactly the serial answer,
and a child that fails or dies only costs time (its part is stated again, never left out)."""
from __future__ import annotations

import hashlib
import os
import sys
import threading
from typing import Any

import pytest

from debugger.formats import files
from debugger.formats.files import FORKS, hash_tree, list_folders

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


@needs_fork
def test_forked_and_serial_agree_on_samples_and_a_big_tree(tmp_path: Any, sample_root: str) -> None:
    big = _tree(str(tmp_path / "big"))
    before = FORKS.reported
    for root in (os.path.join(sample_root, "single"), os.path.join(sample_root, "dp2"), big):
        serial = _fp(root, 1)
        assert _fp(root, 2) == serial and _fp(root, 3) == serial and _fp(root, None) == serial
        paths = _folders(root)
        assert list_folders(paths, workers=3) == list_folders(paths, workers=1)
    assert FORKS.reported - before >= 6   # the children really stated and reported their parts
    listed = {f.path: f for f in list_folders(_folders(big), workers=2)}
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
    assert _fp(big, 2) in seen
    target = os.path.join(big, "net", "03", "t0500.npy")
    st = os.stat(target)
    with open(target, "r+b") as fh:   # the same size, other bytes, a new mtime
        fh.write(b"y" * st.st_size)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))

    def changed() -> None:
        serial = _fp(big, 1)
        assert _fp(big, 2) == serial and serial not in seen
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
@pytest.mark.parametrize("fault", ["exit", "truncate", "kill"])
def test_a_failing_child_costs_time_not_truth(tmp_path: Any, fault: str) -> None:
    big = _tree(str(tmp_path / "big"), folders=4, per_folder=500)
    paths = _folders(big)
    serial = list_folders(paths, workers=1)
    failed = FORKS.failed
    assert list_folders(paths, workers=3, child_fault=fault) == serial
    assert FORKS.failed - failed == 2     # both children failed, and both parts were stated here instead


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
    assert list_folders(paths, fork_at=0) == serial             # no thread, threshold 0: forked where cores allow
    assert files.FORK_AT > 1000


def test_unlistable_and_absent_folders(tmp_path: Any) -> None:
    absent = str(tmp_path / "absent")
    a_file = str(tmp_path / "file")
    with open(a_file, "w") as fh:
        fh.write("x")
    for f in list_folders([absent, a_file], workers=1):
        assert f.error and f.names == [] and f.folders == [] and len(f.stats) == 0
    assert _fp(absent, 1) == hashlib.blake2b(digest_size=16).hexdigest()
