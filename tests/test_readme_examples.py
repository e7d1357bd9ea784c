"""The README's examples on the committed samples work from a checkout in any folder.

The samples' stacks record the folder they were made in (``/work/main/dumps_sample/make_sample.py``);
a clone elsewhere must still find its own copy of the file (``tdbg code`` on a line of ``__init__`` needs
the file's text), not depend on that folder existing, nor read it when it does.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest
from clirun import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_commands(readme: str) -> list[list[str]]:
    """The ``tdbg`` command lines of the README's "Using it" section that run on the committed samples."""
    section = readme.split("## Using it", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            words = shlex.split(line.split("#", 1)[0])
            if words[:1] == ["tdbg"] and any(w.startswith("dumps_sample") for w in words) and words[1] != "serve":
                commands.append(words[1:])
    return commands


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A checkout of this repository in another folder: README and the samples the examples use."""
    if not os.path.isdir(os.path.join(ROOT, ".git")) and not os.path.isfile(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    dest = str(tmp_path_factory.mktemp("elsewhere") / "checkout")
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", ROOT, dest], check=True)
    subprocess.run(["git", "-C", dest, "checkout", "-q", "HEAD", "--", "README.md", "dumps_sample/single",
                    "dumps_sample/dp2", "dumps_sample/torch_2d", "dumps_sample/torch_series",
                    "dumps_sample/make_sample.py"], check=True)
    return dest


def test_the_readme_examples_run_from_a_clone(clone: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(clone)
    monkeypatch.setenv("TDBG_CACHE_DIR", str(tmp_path / "cache"))
    with open("README.md", encoding="utf-8") as f:
        commands = readme_commands(f.read())
    assert {c[0] for c in commands} >= {"info", "node", "code", "scan", "compare", "convert", "graph", "spikes"}
    for args in commands:
        if args[0] == "convert":    # `convert DUMP OUT`: the README's OUT becomes a folder of this test's own
            args = [*args[:2], str(tmp_path / "out"), *args[3:]]
        r = run_cli(*args)
        assert r.code in (0, 1, 4) and "internal error" not in r.err, (args, r.code, r.err)   # 4: scan incomplete
        assert r.out.strip(), args


@pytest.mark.parametrize("line, listed", [(195, "definition ("), (200, "forward (")])
def test_tdbg_code_finds_the_clones_own_source(clone: str, monkeypatch, line: int, listed: str) -> None:
    """The README's ``tdbg code dumps_sample/single make_sample.py:195``: the layer fc3's nodes, read from the
    clone's make_sample.py whether or not the folder the sample was made in exists on this machine."""
    monkeypatch.chdir(clone)
    r = run_cli("code", "dumps_sample/single", f"make_sample.py:{line}", "--json")
    assert r.code == 0, r.err
    mine = os.path.realpath(os.path.join(clone, "dumps_sample", "make_sample.py"))
    assert list(r.json["found"].values()) == [mine]
    text = run_cli("code", "dumps_sample/single", f"make_sample.py:{line}").out
    assert f"found at {mine}" in text and listed in text
    if line == 195:
        assert {"fc3.weight", "fc3.bias"} <= {n["node"] for n in r.json["nodes"]}
