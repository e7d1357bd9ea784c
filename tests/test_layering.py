"""The data flows one way: debugger/ never imports Flask, web/ never reads dump files itself."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_library_and_cli_do_not_import_flask():
    code = ("import sys, debugger, debugger.cli, debugger.watch, debugger.compare, debugger.query; "
            "print('flask' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_web_layer_only_asks_the_library():
    for name in os.listdir(os.path.join(ROOT, "web")):
        if name.endswith(".py"):
            with open(os.path.join(ROOT, "web", name), encoding="utf-8") as f:
                text = f.read()
            for banned in ("np.load", "import numpy", "debugger.formats", "import h5py", " open(", "import pydot"):
                assert banned not in text, f"web/{name} uses {banned}"


def _imports(path: str) -> list[tuple[str, int]]:
    """Every imported module of a Python file, absolute (relative imports resolved against its package)."""
    import ast

    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    package = rel[:-1] if rel[-1] != "__init__" else rel[:-1]
    if rel[0] == "web":
        package = ["tdbg_web"] + package[1:]
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, node.lineno))
            out.extend((f"{mod}.{a.name}", node.lineno) for a in node.names)
    return out


def _python_files(*tops: str) -> list[str]:
    files = []
    for top in tops:
        for d, _, names in os.walk(os.path.join(ROOT, top)):
            files.extend(os.path.join(d, n) for n in names if n.endswith(".py"))
    return files


def test_nothing_outside_formats_imports_a_format():
    """A format lives in one folder under debugger/formats/: the rest of tdbg sees only the seam."""
    formats_dir = os.path.join(ROOT, "debugger", "formats")
    formats = [n for n in os.listdir(formats_dir)
               if n not in ("__init__.py", "__pycache__") and not n.startswith(("base", "records"))]
    assert "mindspore" in formats
    allowed = {"debugger.formats", "debugger.formats.base", "debugger.formats.records"}
    bad = []
    for path in _python_files("debugger", "web"):
        if path.startswith(formats_dir + os.sep):
            continue
        for mod, line in _imports(path):
            if mod.startswith("debugger.formats.") and not any(mod == a or mod.startswith(a + ".") for a in allowed):
                bad.append(f"{os.path.relpath(path, ROOT)}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def test_the_model_never_imports_upward():
    """files -> reader -> model -> engines -> CLI/web: a format imports neither the model nor an engine."""
    bad = []
    for path in _python_files(os.path.join("debugger", "formats")):
        for mod, line in _imports(path):
            if mod.split(".")[:2] in (["debugger", "model"], ["debugger", "graph"], ["debugger", "watch"],
                                      ["debugger", "compare"], ["debugger", "views"], ["debugger", "cli"]):
                bad.append(f"{os.path.relpath(path, ROOT)}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def test_no_framework_words_outside_the_formats():
    """MindSpore's and msprobe's conventions (op names, file names, op numbering) stay inside their readers."""
    words = ("ApplyMomentum", "ms_version", "saved_data", "Gradients/", "-op\\d", "rank_N", "ms_output_trace",
             "Load-op", "\"Depend\"", "AllReduce", "UpdateState", "MakeTuple", "TupleGetItem",
             # msprobe's files and op names
             "dump.json", "construct.json", "stack.json", "dump_tensor_data", "parameters_grad", "Functional.",
             "Tensor.add_", "_rebuild_tensor")
    bad = []
    for path in _python_files("debugger", "web") + [os.path.join(d, n) for d, _, ns in os.walk(os.path.join(ROOT, "web", "static"))
                                                      for n in ns if n.endswith(".js")]:
        if path.startswith(os.path.join(ROOT, "debugger", "formats") + os.sep):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        bad.extend(f"{os.path.relpath(path, ROOT)}: {w}" for w in words if w in text)
    assert not bad, "\n".join(bad)


def test_every_package_is_installed():
    """pyproject lists packages by name: a new sub-package left out installs broken (editable installs hide it)."""
    import pytest

    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {os.path.relpath(d, ROOT).replace(os.sep, ".") for d, _, names in os.walk(os.path.join(ROOT, "debugger"))
             if "__init__.py" in names}
    assert found <= listed, sorted(found - listed)
