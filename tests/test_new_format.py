"""A new format touches its folder plus one line of the table: a copy of debugger/ with a toy format added
(tests/data/toyfmt/) opens a toy dump, reads its graph and values back, and `tdbg info` runs on it."""
from __future__ import annotations

import difflib
import json
import filecmp
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = "debugger/formats/__init__.py"
LINE = "FORMATS: tuple[Format, ...] = (TDBG_H5, MINDSPORE, MSPROBE)"

CHECK = """
import json, sys
import numpy as np
from debugger import open_dump
d = open_dump(sys.argv[1])
r = d.rank(0)
g = r.graphs[0]
t = {ref.node: ref for ref in r.tensor_map(0, 0).values()}
print(json.dumps({"format": d.format, "nodes": sorted(n.name for n in g.nodes()),
                  "kind": str(g.node("w").kind), "values": t["y"].source.array().tolist()}))
"""


def _add_toy_format(tmp_path) -> str:
    """A copy of the repository's debugger/ with the toy folder and one table line added; its parent folder."""
    copy = tmp_path / "repo"
    shutil.copytree(os.path.join(ROOT, "debugger"), copy / "debugger", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(ROOT, "tests", "data", "toyfmt"), copy / "debugger" / "formats" / "toyfmt",
                    ignore=shutil.ignore_patterns("__pycache__"))
    table = copy / TABLE
    text = table.read_text()
    assert text.count(LINE) == 1
    table.write_text(text.replace(LINE, LINE + "\nFORMATS = (*FORMATS, importlib.import_module('.toyfmt', __name__).FORMAT)"))
    return str(copy)


def _changes(a: str, b: str, rel: str = "") -> list[str]:
    """Files added, removed or changed between two trees (``__pycache__`` ignored)."""
    cmp = filecmp.dircmp(os.path.join(a, rel), os.path.join(b, rel), ignore=["__pycache__"])
    out = [os.path.join(rel, n) for n in cmp.left_only + cmp.right_only + cmp.diff_files]
    for sub in cmp.common_dirs:
        out += _changes(a, b, os.path.join(rel, sub))
    return out


def test_a_new_format_is_its_folder_plus_one_line(tmp_path):
    copy = _add_toy_format(tmp_path)
    assert sorted(_changes(ROOT, copy, "debugger")) == ["debugger/formats/__init__.py", "debugger/formats/toyfmt"]
    diff = [d for d in difflib.unified_diff(open(os.path.join(ROOT, TABLE)).read().splitlines(),
                                            open(os.path.join(copy, TABLE)).read().splitlines(), lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    assert len(diff) == 1 and diff[0].startswith("+FORMATS = ")

    dump = tmp_path / "toydump"
    dump.mkdir()
    (dump / "toy.json").write_text('{"nodes": [{"name": "w", "op": "Parameter", "kind": "weight"},'
                                   ' {"name": "y", "op": "Relu", "inputs": ["w"]}]}')
    np.save(dump / "y.npy", np.array([[1.5, 0.0], [2.0, 3.0]], dtype=np.float32))
    env = {**os.environ, "PYTHONPATH": copy}
    run = subprocess.run([sys.executable, "-c", CHECK, str(dump)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got == {"format": "toy", "nodes": ["w", "y"], "kind": "weight", "values": [[1.5, 0.0], [2.0, 3.0]]}
    info = subprocess.run([sys.executable, "-m", "debugger.cli", "info", str(dump)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert info.returncode == 0, info.stderr
    assert "toy" in info.stdout and "nodes" in info.stdout
