"""`--source-root` and $TDBG_SOURCE_ROOTS: recorded training-machine paths mapped to this machine,
for the CLI (`tdbg code`, `tdbg node`) and the library, never outside the allowed folders."""
from __future__ import annotations

import os
from typing import Any

import pytest

from clirun import run_cli
from debugger.model.sourceroots import SourceRoots, parse_entries

MATMUL = "fc1-Dense/MatMul-op0"


@pytest.fixture
def moved(make_dump: Any, tmp_path: Any) -> tuple[str, str, str]:
    """(dump, recorded script path, checkout folder): trained at ci/job, the script now in checkout/."""
    trained = tmp_path / "ci" / "job" / "src" / "train.py"
    root = make_dump(user_file=str(trained))
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    os.replace(trained, checkout / "src" / "train.py")
    return root, str(trained), str(checkout)


def test_code_shows_where_a_recorded_file_was_found(moved: tuple[str, str, str]) -> None:
    root, trained, checkout = moved
    plain = run_cli("code", root, "train.py:16", "--json")
    assert plain.code == 0 and plain.json["found"] == {trained: None}
    r = run_cli("code", root, "train.py:16", "--source-root", checkout)
    assert r.code == 0 and f"found at {os.path.join(checkout, 'src', 'train.py')}" in r.out
    j = run_cli("code", root, "train.py:16", "--json", "--source-root", f"{os.path.dirname(os.path.dirname(trained))}={checkout}")
    assert j.json["found"] == {trained: os.path.join(checkout, "src", "train.py")}


def test_node_stack_frames_carry_the_found_file(moved: tuple[str, str, str], monkeypatch: Any) -> None:
    root, trained, checkout = moved
    monkeypatch.setenv("TDBG_SOURCE_ROOTS", checkout)
    r = run_cli("node", root, MATMUL, "--json")
    user = [f for f in r.json["nodes"][0]["stack"] if f["file"] == trained]
    assert user and all(f["found"] == os.path.join(checkout, "src", "train.py") for f in user)
    assert "(found at " in run_cli("node", root, MATMUL).out


def test_the_sample_finds_its_own_script_from_any_checkout(sample_root: str) -> None:
    r = run_cli("code", os.path.join(sample_root, "single"), "make_sample.py:200", "--json", "--source-root", sample_root)
    assert list(r.json["found"].values()) == [os.path.realpath(os.path.join(sample_root, "make_sample.py"))]


def test_a_bad_mapping_is_usage(sample_root: str) -> None:
    r = run_cli("code", os.path.join(sample_root, "single"), "make_sample.py:200", "--source-root", "=x")
    assert r.code == 2 and "OLD=NEW" in r.err


def test_longest_suffix_wins_and_links_cannot_leave_the_roots(tmp_path: Any) -> None:
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    for d in (a / "pkg", b, out):
        d.mkdir(parents=True)
    (a / "pkg" / "m.py").write_text("deep\n")
    (b / "m.py").write_text("shallow\n")
    (out / "s.py").write_text("secret\n")
    os.symlink(out / "s.py", b / "s.py")
    roots = SourceRoots([], [str(b), str(a)])
    assert roots.read("/train/pkg/m.py")["text"] == "deep\n"       # 2 components beat 1
    assert roots.read("/elsewhere/m.py")["text"] == "shallow\n"    # a tie: the first root
    assert roots.read("/x/s.py")["exists"] is False
    assert roots.read("/x/../../out/s.py")["exists"] is False
    assert parse_entries(["/old=/new", str(a)]) == (["/new", str(a)], [("/old", "/new")])


def test_the_command_line_follows_a_dump_that_travelled_with_its_tree(tmp_path):
    """Recorded under /gone/job/, the dump now at tmp/job/runs/r1: the command line finds tmp/job/src/train.py
    (the recorded path re-rooted at the folder named 'job' above the dump); the server never reads above
    the folder it serves."""
    dump = tmp_path / "job" / "runs" / "r1"
    dump.mkdir(parents=True)
    (tmp_path / "job" / "src").mkdir()
    (tmp_path / "job" / "src" / "train.py").write_text("x = 1\n")
    recorded = "/gone/job/src/train.py"
    hit = SourceRoots([str(dump)], trust_recorded=True).find(recorded)
    assert hit is not None and hit.path == os.path.realpath(tmp_path / "job" / "src" / "train.py")
    assert SourceRoots([str(dump)]).find(recorded) is None
    assert SourceRoots([str(dump)], trust_recorded=True).find("/gone/other/src/train.py") is None
