""""Nothing here" is said as loudly as "something wrong": requested iterations and ranks a dump lacks, a
comparison with no pair, a graph read from the .ir because its .pb is missing."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from clirun import run_cli

from debugger import open_dump
from debugger.common.selection import lacking, ranges_text


def _dumped(rank_dir: str) -> list[int]:
    """The iterations a MindSpore rank dumped, read from its folder names (rank_N/<net>/<graph>/<iteration>)."""
    nets = [os.path.join(rank_dir, n) for n in os.listdir(rank_dir) if n not in ("graphs", "execution_order") and not n.startswith(".")]
    return sorted({int(i) for net in nets for g in os.listdir(net) for i in os.listdir(os.path.join(net, g))})


@pytest.fixture
def single(sample_root: str) -> str:
    return os.path.join(sample_root, "single")


@pytest.fixture
def dp2(sample_root: str) -> str:
    return os.path.join(sample_root, "dp2")


# -- the wording ------------------------------------------------------------------------------------
def test_missing_numbers_are_named_as_compact_ranges() -> None:
    assert lacking("iterations", [*range(6, 10), *range(100, 121)], range(8)) == \
        "iterations 8-9, 100-120 requested but not in the dump (it has 0-7)"
    assert lacking("ranks", [1, 5], [0, 1], "it has ranks") == "rank 5 requested but not in the dump (it has ranks 0-1)"
    assert lacking("iterations", [3], []) == "iteration 3 requested but not in the dump (it has none)"
    assert lacking("iterations", [1, 2], [0, 1, 2]) is None
    assert ranges_text([0, 1, 2, 5, 7, 8], ", ") == "0-2, 5, 7-8"


# -- scan -------------------------------------------------------------------------------------------
def test_scan_warns_of_requested_iterations_the_dump_lacks(single: str) -> None:
    have = _dumped(os.path.join(single, "rank_0"))
    assert have == list(range(8))
    r = run_cli("scan", single, "--iterations", "6-9,100", "--no-cache", "--json")
    note = f"{os.path.abspath(single)}: iterations 8-9, 100 requested but not in the dump (it has 0-7)"
    assert r.code in (0, 1) and f"tdbg: warning: {note}" not in r.err   # --json: in the JSON, not twice
    assert r.json["iterations"] == [6, 7] and r.json["warnings"][0] == note
    text = run_cli("scan", single, "--iterations", "6-9,100", "--no-cache")
    assert f"tdbg: warning: {note}\n" in text.err and "iterations 6-7" in text.out


def test_scan_of_iterations_none_of_which_exist_is_exit_2(single: str) -> None:
    r = run_cli("scan", single, "--iterations", "100-120", "--no-cache")
    assert r.code == 2 and r.out == ""
    assert r.err == (f"tdbg: error: {os.path.abspath(single)}: nothing to read: iterations 100-120 requested but "
                     "not in the dump (it has 0-7)\n")


def test_scan_warns_of_requested_ranks_the_dump_lacks(dp2: str) -> None:
    assert sorted(os.listdir(dp2)) == ["rank_0", "rank_1"]
    r = run_cli("scan", dp2, "--ranks", "1,5-6", "--iterations", "0", "--no-cache", "--json")
    assert r.code in (0, 1) and r.json["ranks"] == [1]
    assert r.json["warnings"][0] == f"{os.path.abspath(dp2)}: ranks 5-6 requested but not in the dump (it has ranks 0-1)"
    # iterations are checked against the ranks selected: rank 1 dumped 0-2
    r = run_cli("scan", dp2, "--ranks", "1", "--iterations", "2-3", "--no-cache", "--json")
    assert r.json["iterations"] == [2]
    assert "iteration 3 requested but not in the dump (rank 1 has 0-2)" in r.json["warnings"][0]
    none = run_cli("scan", dp2, "--ranks", "5", "--no-cache")
    assert none.code == 2 and "nothing to read: rank 5 requested but not in the dump (it has ranks 0-1)" in none.err


# -- a real recording that captured nothing, and recordings with no iteration in common ---------------
_RECORD = textwrap.dedent("""
    import sys, torch
    from debugger.torch import Recorder
    for out, its, ops in zip(sys.argv[1::3], sys.argv[2::3], sys.argv[3::3]):   # ops: module glob
        for rank in (0, 1):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            with Recorder(out, model, opt, rank=rank, iterations=its, modules=None if ops == "-" else [ops]) as rec:
                for step in range(4):
                    loss = model(torch.randn(4, 8)).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    rec.step()
""")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: Any) -> dict[str, str]:
    """Two-rank PyTorch recordings of 4 training steps: iterations 100 (none ran: nothing captured),
    0-1, 2-3, and 0-1 of the ReLU module's tensors only (modules=["1"])."""
    pytest.importorskip("torch")
    base = tmp_path_factory.mktemp("recordings")
    script = base / "record.py"
    script.write_text(_RECORD)
    wanted = {"empty": ("100", "-"), "early": ("0-1", "-"), "late": ("2-3", "-"), "relu": ("0-1", "1")}
    out = {name: str(base / name) for name in wanted}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, str(script), *[x for name, (its, ops) in wanted.items() for x in (out[name], its, ops)]],
                   check=True, env=env, timeout=300)
    return out


def test_a_recording_that_captured_nothing_is_not_a_clean_scan(recordings: dict[str, str]) -> None:
    empty = recordings["empty"]
    d = open_dump(empty)
    assert d.rank_ids == [0, 1] and all(r.iterations() == [] for r in d.ranks)
    r = run_cli("scan", empty, "--no-cache")
    assert r.code == 2 and "No watchpoint hit" not in r.out
    assert f"{empty}: nothing scanned: ranks 0-1 dumped no iteration" in r.err


def test_compare_ranks_with_no_pair_is_not_no_divergence(recordings: dict[str, str]) -> None:
    empty = recordings["empty"]
    r = run_cli("compare", empty, "--ranks", "--no-cache")
    assert r.code == 2 and "No divergence" not in r.out
    assert "Nothing compared: rank 1 and base rank 0 dumped no iteration." in r.out
    assert r.err == f"tdbg: error: {empty}: nothing compared: rank 1 and base rank 0 dumped no iteration\n"
    single = run_cli("compare", os.path.join(empty, "rank_0"), "--ranks", "--no-cache")   # one rank of it
    assert single.code == 2 and "has only rank 0: comparing ranks needs two or more" in single.err
    j = run_cli("compare", empty, "--ranks", "--no-cache", "--json")
    assert j.code == 2 and j.json["summary"]["pairs"] == 0 and j.json["first_divergence"] is None
    assert j.json["summary"]["nothing_compared"] == "rank 1 and base rank 0 dumped no iteration"


def test_ranks_that_saved_no_tensor_that_must_agree_compare_nothing(recordings: dict[str, str]) -> None:
    relu = recordings["relu"]
    d = open_dump(relu)
    kinds = {t.kind for r in d.ranks for t in r.tensors()}
    # the ReLU's forward and backward tensors: each rank's own data, free to differ; no weight, no state
    assert "activation" in kinds and not kinds & {"weight", "optimizer_state"}
    saved = len(d.rank(1).tensors())
    why = ("iterations 0-1 hold no tensor that must agree across ranks (weights, optimizer state, "
           "collective outputs)")
    r = run_cli("compare", relu, "--ranks", "--no-cache", "--json")
    assert r.code == 2 and r.json["summary"]["pairs"] == 0 and r.json["summary"]["nothing_compared"] == why
    listed = run_cli("compare", relu, "--ranks", "--all-tensors", "--no-cache", "--json")
    assert listed.code == 2 and listed.json["summary"]["counted"] == 0 and listed.json["summary"]["pairs"] == saved
    assert listed.json["summary"]["nothing_compared"] == f"{why} ({saved} tensor(s) that may differ are listed)"


def test_two_runs_with_no_iteration_in_common_compare_nothing(recordings: dict[str, str]) -> None:
    early, late = recordings["early"], recordings["late"]
    assert [r.iterations() for r in open_dump(early).ranks] == [[0, 1], [0, 1]]
    assert [r.iterations() for r in open_dump(late).ranks] == [[2, 3], [2, 3]]
    r = run_cli("compare", early, late, "--no-cache", "--json")
    why = "no iteration was dumped on both sides (a has 0-1, b has 2-3, ranks 0-1)"
    assert r.code == 2 and r.json["summary"]["pairs"] == 0 and r.json["summary"]["nothing_compared"] == why
    assert f"nothing compared: {why}" in r.err
    # and where they do share iterations, the same two kinds of recording compare as usual
    both = run_cli("compare", early, early, "--no-cache", "--json")
    assert both.code == 0 and both.json["summary"]["pairs"] > 0 and both.json["summary"]["nothing_compared"] is None


# -- compare selections -------------------------------------------------------------------------------
def test_compare_ranks_warns_of_lacking_iterations_and_ranks(dp2: str) -> None:
    root = os.path.abspath(dp2)
    r = run_cli("compare", dp2, "--ranks", "--iterations", "0,100", "--rank", "1", "--rank", "4", "--no-cache", "--json")
    assert r.code == 0 and r.json["iterations"] == [0] and r.json["ranks"] == [1]
    assert r.json["warnings"][:2] == [f"{root}: rank 4 requested but not in the dump (it has ranks 0-1)",
                                      f"{root}: iteration 100 requested but not in the dump (ranks 0-1 have 0-2)"]
    text = run_cli("compare", dp2, "--ranks", "--iterations", "0,100", "--no-cache")
    assert "iteration 100 requested but not in the dump (it has 0-2)" in text.out   # under Warnings
    none = run_cli("compare", dp2, "--ranks", "--iterations", "100", "--no-cache")
    assert none.code == 2 and none.err == (f"tdbg: error: {root}: nothing to read: iteration 100 requested but not "
                                           "in the dump (it has 0-2)\n")


def test_compare_runs_checks_the_selection_against_each_dump(dp2: str, single: str) -> None:
    r = run_cli("compare", dp2, single, "--rank", "0", "--rank", "1", "--iterations", "2-5", "--no-cache", "--json")
    assert r.json["ranks"] == [0] and r.json["iterations"] == [2]
    ws = r.json["warnings"]
    assert f"{os.path.abspath(single)}: rank 1 requested but not in the dump (it has ranks 0)" in ws
    assert f"{os.path.abspath(dp2)}: iterations 3-5 requested but not in the dump (ranks 0-1 have 0-2)" not in ws
    assert f"{os.path.abspath(dp2)}: iterations 3-5 requested but not in the dump (rank 0 has 0-2)" in ws
    none = run_cli("compare", dp2, single, "--rank", "1", "--no-cache")
    assert none.code == 2 and "nothing to read: rank 1 requested but not in the dump" in none.err


# -- convert ------------------------------------------------------------------------------------------
def test_convert_names_what_the_dump_lacks_and_writes_nothing_for_none(single: str, tmp_path: Any) -> None:
    target = tmp_path / "none"
    r = run_cli("convert", single, str(target), "--iterations", "100")
    assert r.code == 2 and "nothing to read: iteration 100 requested but not in the dump (it has 0-7)" in r.err
    assert not target.exists()
    part = run_cli("convert", single, str(tmp_path / "part"), "--iterations", "6-9", "--statistics", "--json")
    assert part.code == 0 and part.json["iterations"] == [6, 7]
    note = f"{os.path.abspath(single)}: iterations 8-9 requested but not in the dump (it has 0-7)"
    assert part.json["warnings"][0] == note and f"tdbg: warning: {note}\n" in part.err


# -- MindSpore: the .ir read because the .pb is missing -------------------------------------------------
def test_a_graph_read_from_the_ir_because_the_pb_is_missing_is_a_warning(single: str, tmp_path: Any) -> None:
    copy = str(tmp_path / "single")
    shutil.copytree(single, copy)
    graphs = os.path.join(copy, "rank_0", "graphs")
    pb, ir = (os.path.join(graphs, f"ms_output_trace_code_graph_0.{ext}") for ext in ("pb", "ir"))
    os.remove(pb)
    full, text_only = open_dump(single).rank(0).graph(0), open_dump(copy).rank(0).graph(0)
    assert text_only.source_file == ir and len(text_only) < len(full)   # 82 of 89 nodes
    warning = f"{pb}: missing; graph 0 is read from {ir} instead, which can hold fewer nodes"
    info = run_cli("info", copy, "--json")
    assert info.code == 0 and info.json["warnings"] == [warning]
    scan = run_cli("scan", copy, "--iterations", "0", "--no-cache")
    assert f"tdbg: warning: {warning}\n" in scan.err
    assert run_cli("info", single, "--json").json["warnings"] == []   # both files there: nothing to say


def test_the_web_api_says_nothing_was_compared(recordings: dict[str, str], tmp_path: Any) -> None:
    create_app = pytest.importorskip("tdbg_web").create_app
    client = create_app(recordings["empty"], {"TESTING": True, "CACHE_DIR": str(tmp_path / "cache")}).test_client()
    got = client.get("/api/compare?base=0").get_json()
    assert got["result"]["summary"]["pairs"] == 0
    assert got["result"]["summary"]["nothing_compared"] == "rank 1 and base rank 0 dumped no iteration"
