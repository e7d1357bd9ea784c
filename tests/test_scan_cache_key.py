"""The key of a stored scan result: every file's name, size and mtime, taken in one stat per file.

A file rewritten in place (same name, same size, same inode) must make the next scan compute again;
an untouched dump must be answered from the stored result."""
from __future__ import annotations

import glob
import hashlib
import os
import time
from typing import Any

import numpy as np

from clirun import run_cli
from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.formats.files import hash_entries, hash_tree
from debugger.watch import preset, scan


def _rewrite_in_place(path: str, values: np.ndarray) -> None:
    """Overwrite the data of an .npy file where it lies (same inode, same size), in a later clock tick
    than its last write: within one tick no stat can tell the two writes apart."""
    before = os.stat(path)
    for _ in range(2000):
        with open(path, "r+b") as f:
            np.lib.format.read_magic(f)
            np.lib.format.read_array_header_1_0(f)
            f.write(values.astype(np.float32).tobytes())
        now = os.stat(path)
        if now.st_mtime_ns != before.st_mtime_ns:
            break
        time.sleep(0.001)
    assert (now.st_ino, now.st_size) == (before.st_ino, before.st_size) and now.st_mtime_ns != before.st_mtime_ns


def _weight_file(dump: str, it: int) -> str:
    found = glob.glob(os.path.join(dump, "rank_0", "Net", "0", str(it), "Parameter.fc1_weight.*.output.0.*npy"))
    assert len(found) == 1, found
    return found[0]


def _stored(cache: str) -> list[str]:
    return sorted(glob.glob(os.path.join(cache, "results", "*.json")))


def test_a_cached_rescan_answers_until_a_file_is_rewritten_in_place(make_dump: Any, tmp_path: Any) -> None:
    dump = make_dump(iterations=3)
    cache = str(tmp_path / "cache")
    argv = ("scan", "--json", "--watch", "weight_overflow", "--cache-dir", cache, dump)
    first = run_cli(*argv)
    assert first.code == 0 and len(_stored(cache)) == 1
    again = run_cli(*argv)
    assert again.json == first.json and len(_stored(cache)) == 1
    d = open_dump(dump)
    scan(d, preset("recommended"), cache=StatsCache.for_dump(d.root, cache))
    assert len(_stored(cache)) == 2
    d = open_dump(dump)
    scan(d, preset("recommended"), cache=StatsCache.for_dump(d.root, cache))
    assert all(r._index is None for r in d.ranks) and len(_stored(cache)) == 2   # answered from the stored result

    path = _weight_file(dump, 1)
    shape = np.load(path).shape
    _rewrite_in_place(path, np.full(shape, np.inf))
    changed = run_cli(*argv)
    assert changed.code == 1 and len(_stored(cache)) == 3
    assert [(h["iteration"], h["param"]) for h in changed.json["hits"]] == [(1, "fc1.weight")]
    d = open_dump(dump)
    scan(d, preset("recommended"), cache=StatsCache.for_dump(d.root, cache))
    assert any(r._index is not None for r in d.ranks)   # computed again


def _fp(dump: str) -> str:
    return open_dump(dump).fingerprint()


def test_the_fingerprint_changes_with_every_file_and_only_then(make_dump: Any, tmp_path: Any) -> None:
    dump = make_dump(iterations=2)
    base = _fp(dump)
    for p in glob.glob(os.path.join(dump, "**", "*.npy"), recursive=True):
        np.load(p)                                   # reading changes nothing
    assert _fp(dump) == base
    it_dir = os.path.dirname(_weight_file(dump, 1))
    extra = os.path.join(it_dir, "Add.extra-op0.0.0.1.output.0.DefaultFormat.Float32.npy")
    np.save(extra, np.zeros(3, np.float32))
    assert _fp(dump) not in (base,)
    os.remove(extra)
    assert _fp(dump) == base                         # the key is what the files are, not when it was taken
    w = _weight_file(dump, 0)
    os.rename(w, w + ".moved")
    assert _fp(dump) != base
    os.rename(w + ".moved", w)
    assert _fp(dump) == base
    graph = glob.glob(os.path.join(dump, "rank_0", "graphs", "*.pb"))[0]
    with open(graph, "ab") as f:
        f.write(b"\0")
    grown = _fp(dump)
    assert grown != base
    # a link to a file outside the dump stands for that file: rewriting it changes the key
    outside = str(tmp_path / "outside.npy")
    np.save(outside, np.zeros(4, np.float32))
    os.symlink(outside, os.path.join(it_dir, "Add.linked-op0.0.0.1.output.0.DefaultFormat.Float32.npy"))
    linked = _fp(dump)
    assert linked != grown
    _rewrite_in_place(outside, np.ones(4))
    assert _fp(dump) != linked


def test_hash_tree_and_hash_entries_see_an_in_place_rewrite(tmp_path: Any) -> None:
    top = tmp_path / "top"
    (top / "a" / "b").mkdir(parents=True)
    f = str(top / "a" / "b" / "t.npy")
    np.save(f, np.zeros(8, np.float32))
    np.save(str(top / "u.npy"), np.zeros(2, np.float32))

    def tree() -> str:
        h = hashlib.blake2b(digest_size=16)
        hash_tree(h, str(top))
        return h.hexdigest()

    def entries(prefix: str = "", skip: frozenset[str] = frozenset()) -> str:
        h = hashlib.blake2b(digest_size=16)
        hash_entries(h, str(top / "a" / "b"), prefix, skip)
        return h.hexdigest()

    t0, e0 = tree(), entries()
    assert tree() == t0 and entries() == e0
    assert entries("x/") != e0 and entries(skip=frozenset({"t.npy"})) != e0
    _rewrite_in_place(f, np.ones(8))
    assert tree() != t0 and entries() != e0
    h = hashlib.blake2b(digest_size=16)
    hash_tree(h, str(tmp_path / "absent"))            # an absent or unlistable folder adds nothing
    assert h.hexdigest() == hashlib.blake2b(digest_size=16).hexdigest()


def test_without_folder_descriptors_listing_and_key_are_the_same(make_dump: Any, monkeypatch: Any) -> None:
    # where the platform cannot stat relative to a folder descriptor (Windows), every stat goes by full path
    import debugger.formats.files as files

    dump = make_dump(iterations=2)
    with_fd = open_dump(dump)
    assert files._DIR_FD
    monkeypatch.setattr(files, "_DIR_FD", False)
    by_path = open_dump(dump)
    assert by_path.fingerprint() == with_fd.fingerprint()
    a, b = with_fd.ranks[0].reader.listing, by_path.ranks[0].reader.listing
    assert a.tensors == b.tensors and a.warnings == b.warnings and sum(map(len, a.tensors.values())) > 50
    h1, h2 = hashlib.blake2b(), hashlib.blake2b()
    hash_entries(h1, os.path.join(dump, "rank_0", "graphs"))
    monkeypatch.setattr(files, "_DIR_FD", True)
    hash_entries(h2, os.path.join(dump, "rank_0", "graphs"))
    assert h1.hexdigest() == h2.hexdigest()


def test_a_stored_scan_is_not_the_answer_of_other_code(tmp_path: Any, sample_root: str) -> None:
    """A stored result is keyed by the code that computed it, not only by its version number: after an edited
    rule (a pulled checkout, an editable install, a fix at the same version) the scan computes again."""
    import shutil
    import subprocess
    import sys

    import debugger

    pkg = tmp_path / "pkg"
    shutil.copytree(os.path.dirname(debugger.__file__), pkg / "debugger",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # -S: no site hooks (an editable install's finder would import the checkout's debugger before the copy)
    import site

    path = os.pathsep.join([str(pkg), *site.getsitepackages(), site.getusersitepackages()])
    env = {**os.environ, "PYTHONPATH": path, "TDBG_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-S", "-m", "debugger.cli", "scan", os.path.join(sample_root, "torch_2d"), "--json"]
    where = subprocess.run([sys.executable, "-S", "-c", "import debugger; print(debugger.__file__)"], env=env,
                           capture_output=True, text=True, cwd=tmp_path)
    assert where.stdout.startswith(str(pkg)), where
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert "no previous iteration" in first.stdout, first.stderr
    history = pkg / "debugger" / "model" / "history.py"
    history.write_text(history.read_text().replace('"no previous iteration"', '"no earlier iteration"'))
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert "no earlier iteration" in second.stdout and "no previous iteration" not in second.stdout, second.stderr
