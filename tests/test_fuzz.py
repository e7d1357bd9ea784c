"""Hostile and broken dumps: every command on every mutant, in a child process that is bounded in
time and memory. Nothing may crash (exit 3 or a traceback), hang, blow up memory, or change the dump;
a refusal (exit 2) names the damaged path.

Each mutant is a copy of a small dump made by dumpmaker, damaged in one way the issue lists: links
to /dev/zero, FIFOs, Unicode digits in names, absurd JSON nesting, odd and lying .npy headers,
truncated and garbage files. (An unlistable folder cannot be made here: the tests run as root.)
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any, Callable

import numpy as np
import pytest
from treehash import tree_digest

import dumpmaker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT_S = 60          # every command of one mutant together
MEMORY_CAP = 3 << 30    # address space of the child (numpy and h5py reserve some; /dev/zero would take all)

# Runs every command in one child, so the interpreter starts once per mutant.
RUNNER = r"""
import io, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))
from debugger.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    results.append({"argv": argv, "code": code, "err": err.getvalue()[-2000:]})
print(json.dumps(results))
"""


def _commands(dump: str, out: str) -> list[list[str]]:
    return [["info", dump, "--json"], ["node", dump, "fc1.weight"], ["code", dump, "train_user.py:14"],
            ["scan", dump, "--no-cache", "--jobs", "1"], ["compare", dump, "--no-cache", "--jobs", "1"],
            ["convert", dump, out], ["graph", dump]]


def _npy_with_header(path: str, header: str, data: bytes = b"\0" * 16) -> None:
    text = header.encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + (len(text) + pad + 1).to_bytes(2, "little") + text + b" " * pad + b"\n" + data)


def _first(root: str, pred: Callable[[str], bool]) -> str:
    for d, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            if pred(os.path.join(d, f)):
                return os.path.join(d, f)
    raise AssertionError("no such file in the dump")


def _npy(root: str) -> str:
    return _first(root, lambda p: p.endswith(".output.0.DefaultFormat.Float32.npy") and "/0/1/" in p)


def _replace(path: str, make: Callable[[str], object]) -> str:
    """``path`` removed and made again by ``make`` (a link, a FIFO, a folder)."""
    os.remove(path)
    make(path)
    return path


def _link_to_dev_zero(path: str) -> None:
    os.symlink("/dev/zero", path)


def _replace_fifo(path: str) -> str:
    return _replace(path, os.mkfifo)


def _replace_dir(path: str) -> str:
    return _replace(path, os.mkdir)


def _rename(path: str, name: str) -> str:
    new = os.path.join(os.path.dirname(path), name)
    os.rename(path, new)
    return new


def _patch_all(path: str, old: bytes, new: bytes) -> str:
    with open(path, "rb") as f:
        data = f.read()
    assert old in data, (path, old)
    return _write(path, data.replace(old, new))


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


PB = "rank_0/graphs/ms_output_trace_code_graph_0.pb"
IR = "rank_0/graphs/ms_output_trace_code_graph_0.ir"
ORDER = "rank_0/execution_order/ms_execution_order_graph_0.csv"
CONFIG = "rank_0/.dump_metadata/config.json"
RUNS = "rank_0/execution_order/ms_global_execution_order_graph_0.csv"

# name -> damage(root) -> the damaged path (what a refusal must name)
MUTATIONS: dict[str, Callable[[str], str]] = {
    "pb_is_dev_zero": lambda r: _replace(os.path.join(r, PB), _link_to_dev_zero),
    "ir_and_pb_are_dev_zero": lambda r: (_replace(os.path.join(r, IR), _link_to_dev_zero),
                                         _replace(os.path.join(r, PB), _link_to_dev_zero))[1],
    "csv_is_dev_zero": lambda r: _replace(os.path.join(r, ORDER), _link_to_dev_zero),
    "config_is_dev_zero": lambda r: _replace(os.path.join(r, CONFIG), _link_to_dev_zero),
    "pb_is_fifo": lambda r: _replace_fifo(os.path.join(r, PB)),
    "npy_is_fifo": lambda r: _replace_fifo(_npy(r)),
    "npy_is_dev_zero": lambda r: _replace(_npy(r), _link_to_dev_zero),
    "iteration_dir_unicode_digit": lambda r: _rename(os.path.join(r, "rank_0", "Net", "0", "1"), "\u00b2"),
    "graph_dir_unicode_digit": lambda r: _rename(os.path.join(r, "rank_1", "Net", "0"), "\u0663"),
    "rank_dir_unicode_digit": lambda r: _rename(os.path.join(r, "rank_1"), "rank_\u00b2"),
    "slot_field_unicode_digit": lambda r: _rename(_npy(r), os.path.basename(_npy(r)).replace(
        ".output.0.", ".output.\u00b2.")),
    "timestamp_field_unicode_digit": lambda r: _rename(_npy(r), _unicode_timestamp(os.path.basename(_npy(r)))),
    "config_nested_json": lambda r: _write(os.path.join(r, CONFIG), b"[" * 200_000),
    "csv_garbage": lambda r: _write(os.path.join(r, ORDER), os.urandom(4096)),
    "pb_garbage": lambda r: _write(os.path.join(r, PB), b"\x0a\xff\xff\xff\xff" + os.urandom(64)),
    "ir_empty_pb_missing": lambda r: (os.remove(os.path.join(r, PB)), _write(os.path.join(r, IR), b""))[1],
    "npy_truncated": lambda r: _write(_npy(r), open(_npy(r), "rb").read()[:90]),
    "npy_not_npy": lambda r: _write(_npy(r), b"PK\x03\x04 not an npy file"),
    **{f"npy_dtype_{name}": (lambda descr: lambda r: (_npy_with_header(
        _npy(r), f"{{'descr': {descr}, 'fortran_order': False, 'shape': (2,), }}"), _npy(r))[1])(descr)
       for name, descr in (("void", "'|V2'"), ("bytes", "'|S4'"), ("unicode", "'<U1'"), ("datetime", "'<M8[s]'"),
                           ("structured", "[('a', '<f4'), ('b', '<i4')]"), ("object", "'|O'"))},
    "npy_negative_shape": lambda r: (_npy_with_header(_npy(r), "{'descr': '<f4', 'fortran_order': False, "
                                                                "'shape': (-1,), }"), _npy(r))[1],
    "npy_huge_shape": lambda r: (_npy_with_header(_npy(r), "{'descr': '<f4', 'fortran_order': False, "
                                                            "'shape': (1000000, 1000000), }"), _npy(r))[1],
    "npy_float_shape": lambda r: (_npy_with_header(_npy(r), "{'descr': '<f4', 'fortran_order': False, "
                                                             "'shape': (1.5, 2), }"), _npy(r))[1],
    "npy_header_not_a_dict": lambda r: (_npy_with_header(_npy(r), "__import__('os').system('false')"), _npy(r))[1],
    # found by a wider fuzz of this issue's classes
    "pb_is_directory": lambda r: _replace_dir(os.path.join(r, PB)),
    "config_is_directory": lambda r: _replace_dir(os.path.join(r, CONFIG)),
    "execution_order_dir_is_dev_zero": lambda r: (shutil.rmtree(os.path.dirname(os.path.join(r, ORDER))),
                                                  os.symlink("/dev/zero", os.path.dirname(os.path.join(r, ORDER))),
                                                  os.path.dirname(os.path.join(r, ORDER)))[2],
    "pb_invalid_utf8_strings": lambda r: _patch_all(os.path.join(r, PB), b"In file", b"In fi\xffe"),
    "iteration_dir_huge_number": lambda r: _rename(os.path.join(r, "rank_0", "Net", "0", "1"), "9" * 30),
    "run_history_huge_number": lambda r: _write(os.path.join(r, RUNS), b"0\n" + b"9" * 30 + b"\n"),
    "ir_deep_scope_pb_missing": lambda r: (os.remove(os.path.join(r, PB)), _patch_all(
        os.path.join(r, IR), b"(Default/network-WithLossCell/", b"(" + b"d/" * 20_000))[1],
    # the same classes on a tdbg-h5 dump (made by convert from the same base)
    "h5_iteration_name_unicode_digit": lambda r: _rename(os.path.join(r, "rank_0", "iteration_00000001.h5"),
                                                        "iteration_\u00b20000001.h5"),
    "h5_graph_name_huge_number": lambda r: _rename(os.path.join(r, "rank_1", "graph_0.h5"), f"graph_{'9' * 30}.h5"),
    "h5_marker_nested_json": lambda r: _write(os.path.join(r, "tdbg_dump.json"), b"[" * 200_000),
    "h5_rank_json_nested_json": lambda r: _write(os.path.join(r, "rank_0", "rank.json"), b"[" * 200_000),
    "h5_rank_json_is_dev_zero": lambda r: _replace(os.path.join(r, "rank_0", "rank.json"), _link_to_dev_zero),
    "h5_rank_json_is_fifo": lambda r: _replace_fifo(os.path.join(r, "rank_1", "rank.json")),
    "h5_iteration_is_fifo": lambda r: _replace_fifo(os.path.join(r, "rank_0", "iteration_00000001.h5")),
    "h5_graph_is_dev_zero": lambda r: _replace(os.path.join(r, "rank_0", "graph_0.h5"), _link_to_dev_zero),
    "h5_graph_truncated": lambda r: _write(os.path.join(r, "rank_1", "graph_0.h5"),
                                           open(os.path.join(r, "rank_1", "graph_0.h5"), "rb").read()[:3000]),
    "h5_iteration_garbage": lambda r: _write(os.path.join(r, "rank_1", "iteration_00000000.h5"),
                                             b"\x89HDF\r\n\x1a\n" + os.urandom(4096)),
}


def _unicode_timestamp(name: str) -> str:
    parts = name.split(".")
    ts = len(parts) - 5   # {op}.{name}.{task}.{stream}.{ts}.{io}.{slot}.{fmt}.{dtype}.npy
    parts[ts - 1] = "\u00b2" + parts[ts - 1][1:]
    return ".".join(parts)


@pytest.fixture(scope="module")
def base_dump(tmp_path_factory: Any) -> str:
    """A small 2-rank dump in MindSpore's layout: every mutant starts as a copy of it."""
    return dumpmaker.make_dump(str(tmp_path_factory.mktemp("fuzz") / "base"), ranks=2, iterations=2)


@pytest.fixture(scope="module")
def h5_base_dump(base_dump: str, tmp_path_factory: Any) -> str:
    """The same dump converted to tdbg-h5: the h5_ mutants start from it."""
    from debugger.convert import convert
    from debugger.model import open_dump

    out = str(tmp_path_factory.mktemp("fuzz_h5") / "h5")
    convert(open_dump(base_dump), out)
    return out


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_command_survives_a_damaged_dump(base_dump: str, h5_base_dump: str, tmp_path: Any,
                                               name: str) -> None:
    dump = str(tmp_path / "dump")
    shutil.copytree(h5_base_dump if name.startswith("h5_") else base_dump, dump, symlinks=True)
    damaged = MUTATIONS[name](dump)
    before = tree_digest(dump) if "fifo" not in name and "dev_zero" not in name else _listing(dump)
    env = {**os.environ, "TDBG_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": ROOT}
    commands = _commands(dump, str(tmp_path / "converted"))
    try:
        p = subprocess.run([sys.executable, "-c", RUNNER.replace("CAP", str(MEMORY_CAP)), json.dumps(commands)],
                           capture_output=True, text=True, timeout=TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: the commands did not finish in {TIMEOUT_S} s (a hang)")
    assert p.returncode == 0, f"{name}: the child died: {p.stderr[-3000:]}"
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    for r in json.loads(p.stdout.strip().splitlines()[-1]):
        what = f"{name}: tdbg {' '.join(r['argv'])}"
        assert r["code"] in (0, 1, 2), f"{what} exited {r['code']}: {r['err']}"
        assert "Traceback" not in r["err"], f"{what}: {r['err']}"
        if r["code"] == 2:
            assert dump in r["err"] or os.path.realpath(dump) in r["err"], f"{what} names no path: {r['err']}"
    after = tree_digest(dump) if "fifo" not in name and "dev_zero" not in name else _listing(dump)
    assert after == before, f"{name}: the dump changed"
    assert os.path.lexists(damaged)


def _listing(root: str) -> list[tuple[str, int, int]]:
    """Names, modes and sizes (lstat): a dump holding FIFOs or /dev/zero links cannot be hashed by reading."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            st = os.lstat(os.path.join(d, f))
            out.append((os.path.relpath(os.path.join(d, f), root), st.st_mode, st.st_size))
    return out


def test_the_fuzz_covers_every_class_of_the_issue() -> None:
    classes = ("dev_zero", "fifo", "unicode_digit", "nested_json", "npy_dtype", "negative_shape", "huge_shape",
               "float_shape", "truncated", "garbage")
    assert all(any(c in m for m in MUTATIONS) for c in classes)
    assert np.dtype("<M8[s]").kind == "M"   # the datetime mutant is a real numpy dtype, not a typo
