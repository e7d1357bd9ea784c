"""A tdbg-h5 dump copied in part is read for what it holds and says what it lacks: without its marker
(``tdbg_dump.json``) it is still tdbg-h5 (its rank folders' ``rank.json`` say so), never an empty MindSpore
dump; without a graph file, the iterations that hold that graph's tensors are named in a warning (their
nodes, kinds and order are unknown: watchpoints do not check them) in ``info``, ``scan`` and their JSON."""
from __future__ import annotations

import json
import os
import shutil

from clirun import run_cli

from debugger.model import open_dump

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dumps_sample", "torch_single")


def _copy(tmp_path) -> str:
    dst = str(tmp_path / "d")
    shutil.copytree(SAMPLE, dst)
    return dst


def test_dump_without_its_marker_is_read_as_tdbg_h5(tmp_path) -> None:
    root = _copy(tmp_path)
    os.remove(os.path.join(root, "tdbg_dump.json"))
    dump, whole = open_dump(root), open_dump(SAMPLE)
    assert dump.format == "tdbg-h5"
    assert dump.rank(0).iterations() == whole.rank(0).iterations() == list(range(8))
    assert dump.rank(0).tensor_map(0, 0).keys() == whole.rank(0).tensor_map(0, 0).keys()
    r = run_cli("info", root, "--json")
    assert r.code == 0
    warnings = json.loads(r.out)["warnings"]
    assert any(w.startswith(os.path.join(root, "tdbg_dump.json") + ": missing") for w in warnings)
    assert open_dump(os.path.join(root, "rank_0")).format == "tdbg-h5"      # one rank folder named


def test_a_wrong_marker_is_still_refused(tmp_path) -> None:
    root = _copy(tmp_path)
    with open(os.path.join(root, "tdbg_dump.json"), "w") as f:
        json.dump({"format": "something-else", "version": 2}, f)
    r = run_cli("info", root)
    assert r.code == 2 and "tdbg_dump.json" in r.err


def test_missing_graph_file_names_the_iterations_it_leaves_unread(tmp_path) -> None:
    root = _copy(tmp_path)
    graph = os.path.join(root, "rank_0", "graph_1.h5")
    held = open_dump(SAMPLE).rank(0).iterations(1)
    os.remove(graph)
    expected = f"{graph}: missing, but iteration(s) {held[0]}-{held[-1]} hold tensors of graph 1"
    info = json.loads(run_cli("info", root, "--json").out)
    assert any(w.startswith(expected) for w in info["warnings"])
    scan = run_cli("scan", root, "--json", "--no-cache")
    assert any(w.startswith(expected) for w in json.loads(scan.out)["warnings"])
