"""Folders that cannot be listed (permissions) and names that only look like numbers.

The tests run as root, where ``chmod 000`` changes nothing, so listing is refused by replacing
``os.scandir`` and ``os.listdir`` for one folder: every command must go on or refuse, naming it.
"""
from __future__ import annotations

import io
import json
import os
from typing import Any, Callable

import pytest

import dumpmaker
from debugger.cli import main


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: Any) -> dict[str, str]:
    """A 2-rank MindSpore dump and the same converted to tdbg-h5."""
    from debugger.convert import convert
    from debugger.model import open_dump

    base = tmp_path_factory.mktemp("unlistable")
    ms = dumpmaker.make_dump(str(base / "ms"), ranks=2, iterations=2)
    convert(open_dump(ms), str(base / "h5"))
    return {"ms": ms, "h5": str(base / "h5")}


def _refusing(target: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def listing(p: Any = ".") -> Any:
        if not isinstance(p, int) and os.path.realpath(os.fsdecode(p)) == target:
            raise PermissionError(13, "Permission denied", os.fsdecode(p))
        return real(p)
    return listing


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(argv, out=out, err=err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("kind,rel", [
    ("ms", "."), ("ms", "rank_0"), ("ms", "rank_1/graphs"), ("ms", "rank_0/execution_order"), ("ms", "rank_0/Net"),
    ("ms", "rank_1/Net/0"), ("ms", "rank_0/Net/0/1"), ("ms", "rank_0/.dump_metadata"),
    ("h5", "."), ("h5", "rank_0"),
])
def test_an_unlistable_folder_is_named_never_a_crash(dumps: dict[str, str], tmp_path: Any,
                                                     monkeypatch: Any, kind: str, rel: str) -> None:
    dump = dumps[kind]
    target = os.path.realpath(os.path.join(dump, rel))
    monkeypatch.setattr(os, "scandir", _refusing(target, os.scandir))
    monkeypatch.setattr(os, "listdir", _refusing(target, os.listdir))
    named = []
    for argv in (["info", dump, "--json"], ["node", dump, "fc1.weight"], ["code", dump, "train_user.py:14"],
                 ["scan", dump, "--no-cache", "--jobs", "1", "--json"], ["compare", dump, "--no-cache", "--jobs", "1"],
                 ["convert", dump, str(tmp_path / f"out{len(named)}")], ["graph", dump]):
        code, out, err = _run(argv)
        assert code in (0, 1, 2), (argv, err)
        if code == 2:
            assert dump in err, (argv, err)
        named.append(target in err or (argv[0] in ("info", "scan") and code != 2
                                       and any(target in w for w in json.loads(out)["warnings"])))
    if rel != "rank_0/.dump_metadata":   # its files are opened by name: listing it is never needed
        assert all(named[i] for i in (0, 3)), named   # info and scan name the folder (error or warning)


def test_tdbg_h5_names_are_ascii_numbers(dumps: dict[str, str], tmp_path: Any) -> None:
    """iteration_²0000001.h5 is not iteration 20000001: it is skipped with a warning naming it."""
    import shutil

    dump = str(tmp_path / "h5")
    shutil.copytree(dumps["h5"], dump)
    bad = os.path.join(dump, "rank_0", "iteration_\u00b20000001.h5")
    os.rename(os.path.join(dump, "rank_0", "iteration_00000001.h5"), bad)
    code, out, _ = _run(["info", dump, "--json"])
    info = json.loads(out)
    assert code == 0 and any(w.startswith(bad) for w in info["warnings"]), info["warnings"]
    assert info["ranks"][0]["iterations"] == [0]
