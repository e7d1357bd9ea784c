"""No module outside a format's folder knows a framework's text conventions (read from the AST, not grepped).

A format's folder (debugger/formats/<fmt>/) turns its framework's files and text into records; the PyTorch
recorder (debugger/torch/) is the torch side itself. Everywhere else (the seam, the model, the engines, the
CLI, the web layer) sees fields only. The check reads every string constant and regex literal of the
Python modules there (docstrings excepted: they may describe a format) and the JavaScript of web/static.
"""
from __future__ import annotations

import ast
import os
import re

import importscan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each marker is a piece of one framework's text: finding it in a string means the code parses, builds or
# tests that text. A marker in double quotes must be the whole string. Why each belongs to its format:
MARKERS: dict[str, str] = {
    # MindSpore: graph files (.pb / .ir) and their stack text
    "In file": "MindSpore's stack frames in a graph's debug info ('# In file /x.py:12')",
    "Corresponding forward node candidate": "MindSpore's link from a backward node to its forward source",
    "Default/": "MindSpore's root scope of forward and optimizer nodes",
    "Gradients/": "MindSpore's root scope of backward nodes",
    "TupleGetItem": "a MindSpore IR primitive",
    "MakeTuple": "a MindSpore IR primitive",
    "UpdateState": "a MindSpore IR primitive",
    "ApplyMomentum": "a MindSpore optimizer kernel",
    "AllReduce": "a MindSpore communication kernel name",
    "Load-op": "MindSpore's op numbering of parameter loads",
    "-op\\d": "MindSpore's op numbering in node names (a regex on 'Conv2D-op12')",
    "ms_output_trace": "a MindSpore graph file name",
    "ms_version": "a field of MindSpore's dump configuration",
    "saved_data": "a field of MindSpore's dump configuration (tensor, statistic or full)",
    "rank_N": "MindSpore's rank folders",
    '"Depend"': "a MindSpore IR primitive (the whole string: 'Depend' is an English word too)",
    "execution_order": "MindSpore's folder of per-graph execution order files",
    "statistic.csv": "MindSpore's statistics-only dump file",
    # msprobe (MindStudio Probe)
    "dump.json": "msprobe's per-rank index of a step",
    "stack.json": "msprobe's stack file",
    "construct.json": "msprobe's module tree file",
    "dump_tensor_data": "msprobe's folder of tensor files",
    "parameters_grad": "msprobe's key of a module's weight gradients",
    "Functional.": "msprobe's prefix of torch.nn.functional calls",
    "Module.": "msprobe's prefix of module calls",
    "Tensor.add_": "an msprobe API record name",
    # PyTorch
    "site-packages": "a test that a stack frame is the framework's, by its install path",
    "torch/": "a test that a stack frame is torch's own, by its path",
    "aten::": "torch's operator namespace",
    "_rebuild_tensor": "torch's pickle of a tensor",
}

# Python's own install layout (site-packages, dist-packages) belongs to no framework: the seam's
# formats/frames.py names it once for every format, which add what they know of their framework.
_PYTHON_LAYOUT: dict[str, set[str]] = {os.path.join("debugger", "formats", "frames.py"): {"site-packages"}}

# Offenders allowed until the work that removes them lands: empty since issue 21 (structured stack frames
# and module paths from the readers). The test fails on an entry that no longer offends, so it only shrinks.
_PENDING: dict[str, set[str]] = {
}


def _owns_framework_text(rel: str) -> bool:
    """A format's own folder, or the recorder: the places allowed to know a framework's text."""
    parts = rel.split(os.sep)
    in_format_folder = parts[:2] == ["debugger", "formats"] and len(parts) > 3
    return in_format_folder or parts[:2] == ["debugger", "torch"]


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (of the module, a class or a function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def python_strings(path: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant of a Python file but its docstrings; f-strings give their parts."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    skip = _docstrings(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


_JS_STRING = re.compile(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\]|\\.)*`|/(?:[^/\\\n*]|\\.)+/[gimsuy]*""")


def js_strings(path: str) -> list[tuple[int, str]]:
    """(line, text) of every string, template and regex literal of a JavaScript file (comments dropped)."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), f.read(), flags=re.S)
    text = re.sub(r"(?m)(^|\s)//.*$", r"\1", text)
    out = []
    for m in _JS_STRING.finditer(text):
        literal = m.group()
        inner = literal[1:-1] if literal[0] in "'\"`" else literal      # a regex keeps its slashes and flags
        out.append((text.count("\n", 0, m.start()) + 1, inner))
    return out


def offenders(root: str) -> dict[str, dict[str, list[int]]]:
    """For each file outside the formats' folders and the recorder: marker -> lines of strings holding it."""
    found: dict[str, dict[str, list[int]]] = {}
    files = [m.path for m in importscan.modules(root)]
    static = os.path.join(root, "web", "static")
    files += [os.path.relpath(os.path.join(d, n), root) for d, _, ns in os.walk(static) for n in ns if n.endswith(".js")]
    for rel in sorted(files):
        if _owns_framework_text(rel):
            continue
        path = os.path.join(root, rel)
        strings = python_strings(path) if rel.endswith(".py") else js_strings(path)
        for line, text in strings:
            for marker in MARKERS:
                whole = marker.startswith('"') and marker.endswith('"')
                if (text == marker[1:-1]) if whole else (marker in text):
                    found.setdefault(rel, {}).setdefault(marker, []).append(line)
    return found


def test_no_framework_text_outside_the_formats():
    bad = [f"{rel}:{lines[0]} holds {marker!r}: {MARKERS[marker]}"
           for rel, hits in offenders(ROOT).items() for marker, lines in hits.items()
           if marker not in _PENDING.get(rel, set()) | _PYTHON_LAYOUT.get(rel, set())]
    assert not bad, "framework text outside its format's folder:\n" + "\n".join(bad)


def test_pending_offenders_still_offend():
    """An entry of _PENDING that no longer offends is removed, so the allowance cannot outlive its reason."""
    hits = offenders(ROOT)
    stale = [f"{rel}: {m!r}" for rel, ms in _PENDING.items() for m in sorted(ms) if m not in hits.get(rel, {})]
    assert not stale, "no longer offending, remove from _PENDING:\n" + "\n".join(stale)


def test_the_check_finds_a_planted_marker(tmp_path):
    """A model module parsing MindSpore stack text is caught; a format folder, the recorder and docstrings are not."""
    planted = {
        "debugger/model.py": '"""Reads \'# In file x.py:3\' lines."""\nimport re\nFRAME = re.compile(r"# In file (.*)")\n',
        "debugger/formats/mindspore/reader.py": 'FRAME = "# In file "\n',
        "debugger/torch/stacks.py": 'SITE = "site-packages"\n',
        "web/__init__.py": "",
        "web/static/js/view.js": "// Default/ in a comment\nconst root = 'Default/';\nconst re1 = /aten::\\w+/;\n"
                                 "const op = 'Depend', text = 'Depends on';\n",
    }
    for rel, text in planted.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert offenders(str(tmp_path)) == {"debugger/model.py": {"In file": [3]},
                                        os.path.join("web", "static", "js", "view.js"): {"Default/": [2], "aten::": [3],
                                                                                        '"Depend"': [4]}}
