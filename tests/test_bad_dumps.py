"""Broken inputs from bad_dumps.json: the expected message for each, and not one byte of the dump changed."""
from __future__ import annotations

import glob
import json
import os
from typing import Any

import pytest

import debugger.errors as errors
from debugger.errors import CorruptFileError
from debugger import open_dump
from debugger.model import Dump
from treehash import tree_digest

with open(os.path.join(os.path.dirname(__file__), "bad_dumps.json"), encoding="utf-8") as _f:
    ROWS: list[dict[str, Any]] = json.load(_f)["rows"]


def _one(root: str, pattern: str) -> str:
    matches = sorted(glob.glob(os.path.join(root, pattern)))
    assert len(matches) == 1, f"{pattern} matches {len(matches)} files"
    return matches[0]


def apply_break(root: str, step: dict[str, Any]) -> None:
    """Apply one breaking step of a row to the dump at ``root``."""
    op = step["op"]
    if op == "delete":
        matches = glob.glob(os.path.join(root, step["path"]))
        assert matches, step
        for path in matches:
            os.remove(path)
    elif op == "write":
        path = os.path.join(root, step["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(bytes.fromhex(step["hex"]) if "hex" in step else step["text"].encode())
    elif op == "truncate":
        path = _one(root, step["path"])
        keep = step["keep"] if "keep" in step else int(os.path.getsize(path) * step["keep_fraction"])
        os.truncate(path, keep)
    elif op == "patch":
        with open(_one(root, step["path"]), "r+b") as f:
            f.seek(step["offset"])
            f.write(step["text"].encode("latin1"))
    elif op == "copy":
        with open(_one(root, step["from"]), "rb") as src, open(os.path.join(root, step["to"]), "wb") as dst:
            dst.write(src.read())
    elif op == "mkdir":
        os.makedirs(os.path.join(root, step["path"]))
    else:
        raise AssertionError(f"unknown step {op!r}")


def read_everything(dump: Dump) -> tuple[list[str], dict[str, str]]:
    """Touch all a user can reach (graphs, index, history, stacks, every value); warnings and read errors."""
    failures: dict[str, str] = {}
    for rank in dump.ranks:
        for gid in rank.graph_ids:
            for it in rank.iterations(gid):
                rank.previous_iteration(gid, it)
        for ref in rank.tensors():
            try:
                ref.value().sum()
            except CorruptFileError as exc:
                failures[ref.location] = str(exc)
    dump.source_index.all_files()
    return dump.all_warnings(), failures


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_bad_dump(row: dict[str, Any], make_dump, tmp_path) -> None:
    if row["dump"] is None:
        root = str(tmp_path / "dump")
        os.makedirs(root)
    else:
        opts = dict(row["dump"])
        if "layers" in opts:
            opts["layers"] = tuple(tuple(layer) for layer in opts["layers"])
        root = make_dump("dump", **opts)
    for step in row["break"]:
        apply_break(root, step)
    before = tree_digest(root)
    expect = row["expect"]

    def sub(text: str) -> str:
        return text.replace("{root}", root)

    target = os.path.join(root, row.get("open", ""))
    if "error" in expect:
        with pytest.raises(getattr(errors, expect["error"]["type"])) as e:
            open_dump(target.rstrip("/"))
        assert sub(expect["error"]["message"]) in str(e.value)
    else:
        dump = open_dump(target)
        warnings, failures = read_everything(dump)
        for text in expect.get("warnings", []):
            assert any(sub(text) in w for w in warnings), (text, warnings)
        for text in expect.get("absent", []):
            assert not any(sub(text) in w for w in warnings), (text, warnings)
        if expect.get("no_warnings"):
            assert warnings == []
        if "ranks" in expect:
            assert dump.rank_ids == expect["ranks"]
        rank = dump.rank(0)
        if "graph" in expect:
            g = rank.graph(0)
            assert g.source_file.endswith(expect["graph"]["source"]) and len(g) > 40
            counts = g.kind_counts()
            assert {k: counts.get(k, 0) for k in expect["graph"].get("kinds", {})} == expect["graph"].get("kinds", {})
        if expect.get("no_graph"):
            assert rank.graphs == {}
        if "tensors" in expect:
            refs = rank.tensors(0, expect["tensors"]["iteration"])
            assert len(refs) == expect["tensors"]["count"]
            if "unmatched" in expect["tensors"]:
                assert sorted(t.node for t in refs if not t.matched) == expect["tensors"]["unmatched"]
        broken = _one(root, expect["tensor_error"]["file"]) if "tensor_error" in expect else None
        assert list(failures) == ([broken] if broken else []), failures
        if broken:
            assert failures[broken].startswith(broken + ": ")
            assert expect["tensor_error"]["message"] in failures[broken]
    assert tree_digest(root) == before, "tdbg changed bytes inside the dump"


def test_bad_dumps_table_covers_the_required_cases() -> None:
    ids = {r["id"] for r in ROWS}
    assert {"not_a_dump", "empty_dir", "missing_pb_falls_back_to_ir", "corrupt_pb", "both_graph_files_missing",
            "truncated_npy", "corrupt_npy_header", "file_name_matching_no_grammar", "tensor_of_a_node_not_in_the_graph",
            "iteration_still_being_written", "bad_data_dump_json"} <= ids
    assert len(ids) == len(ROWS)


def _read_header(path: str) -> Any:
    from debugger.formats.npy import NpyTensor
    return NpyTensor(path, os.path.getsize(path)).header()


def test_a_broken_file_met_in_a_worker_process_is_the_same_error_in_the_parent(tmp_path: Any) -> None:
    """Commands past one chunk of ranks run in forked workers: an error raised there reaches the parent as
    the same exception, with its path and problem (DumpError pickles by its fields)."""
    from debugger.common.executors import local_workers

    path = str(tmp_path / "t.npy")
    with open(path, "wb") as f:
        f.write(b"\x00garbage" * 8)
    with pytest.raises(CorruptFileError) as here:
        _read_header(path)
    with local_workers(2) as pool, pytest.raises(CorruptFileError) as there:
        pool.submit(_read_header, path).result()
    assert (there.value.path, there.value.problem, str(there.value)) == \
        (here.value.path, here.value.problem, str(here.value)) and path in str(there.value)
