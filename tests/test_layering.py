"""The data flows one way, as debugger/common/layers.py declares it, read from every import of debugger/ and web/ (AST).

Module-level and function-local imports both count: a local import is a dependency that waits for a call.
Also: debugger/ never imports Flask, and web/ never reads dump files itself.
"""
from __future__ import annotations

import os
import subprocess
import sys

import importscan
from debugger.common.layers import LAYERS, MODEL_ORDER, Layer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def layer_of(module: importscan.Module, layers: tuple[Layer, ...] = LAYERS) -> tuple[Layer, str] | None:
    """The layer covering ``module`` and its unit inside it (a format folder for ``.*`` entries), None if none."""
    best: tuple[int, Layer, str] | None = None
    for layer in layers:
        for name in layer.exact:
            if module.name == name:
                return layer, name
        for prefix in layer.prefixes:
            unit = _unit(module, prefix)
            if unit is not None and (best is None or len(unit) > best[0]):
                best = (len(unit), layer, unit)
    return (best[1], best[2]) if best else None


def _unit(module: importscan.Module, prefix: str) -> str | None:
    """The part of ``module`` that ``prefix`` covers, or None: ``a.*`` covers each package folder under ``a``."""
    if prefix.endswith(".*"):
        parts, base = module.name.split("."), prefix[:-2].split(".")
        folder = parts[:len(base) + 1]
        deep_enough = parts[:len(base)] == base and len(parts) > len(base)
        is_folder = deep_enough and (len(parts) > len(base) + 1 or module.is_package)
        return ".".join(folder) if is_folder else None
    return prefix if module.name == prefix or module.name.startswith(prefix + ".") else None


def violations(root: str, layers: tuple[Layer, ...] = LAYERS) -> tuple[list[str], list[str]]:
    """Imports the table forbids ("path:line imports X (layer L may not import layer M)"), and modules it lacks."""
    mods = importscan.modules(root)
    known = {m.name: m for m in mods}
    bad: dict[tuple[str, int, str], str] = {}     # one line per statement and problem: its most specific target
    unplaced = []
    for module in mods:
        placed = layer_of(module, layers)
        if placed is None:
            unplaced.append(f"{module.path} ({module.name}) is in no layer of debugger/common/layers.py")
            continue
        for imp in importscan.imports(root, module):
            target = importscan.resolve(imp.target, known)
            if target is None or imp.type_only:
                continue
            problem = _forbidden(placed, target, layers)
            key = (module.path, imp.line, problem or "")
            if problem and len(target.name) > len(bad.get(key, "")):
                bad[key] = target.name
    return [f"{path}:{line} imports {name} ({problem})" for (path, line, problem), name in sorted(bad.items())], unplaced


def _forbidden(placed: tuple[Layer, str], target: importscan.Module, layers: tuple[Layer, ...]) -> str | None:
    layer, unit = placed
    other = layer_of(target, layers)
    if other is None:
        return None       # reported as unplaced on its own
    other_layer, other_unit = other
    if other_layer is layer:
        siblings = unit != other_unit and any(p.endswith(".*") for p in layer.prefixes)
        return f"{unit} may not import its sibling {other_unit}" if siblings else None
    allowed = other_layer.name in layer.may_import or any(
        target.name == m or target.name.startswith(m + ".") for m in layer.may_import)
    return None if allowed else f"layer {layer.name} may not import layer {other_layer.name}"


def test_every_import_follows_the_layer_table():
    bad, _ = violations(ROOT)
    assert not bad, "\n".join(bad)


def test_every_module_is_placed_in_a_layer():
    _, unplaced = violations(ROOT)
    assert not unplaced, "\n".join(unplaced)


def test_the_layer_check_catches_an_upward_import(tmp_path):
    """A planted model module importing the CLI, a format importing another, a new unplaced top module."""
    for rel, text in {"debugger/__init__.py": "", "debugger/formats/__init__.py": "",
                      "debugger/formats/records.py": "from ..errors import DumpError\n",
                      "debugger/errors.py": "", "debugger/cli.py": "",
                      "debugger/formats/alpha/__init__.py": "from ..beta import reader\n",
                      "debugger/formats/beta/__init__.py": "", "debugger/formats/beta/reader.py": "",
                      "debugger/model.py": "def f():\n    from .cli import main\n",
                      "debugger/newthing.py": "", "web/__init__.py": ""}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    bad, unplaced = violations(str(tmp_path))
    assert bad == [
        "debugger/formats/alpha/__init__.py:1 imports debugger.formats.beta.reader "
        "(debugger.formats.alpha may not import its sibling debugger.formats.beta)",
        "debugger/model.py:2 imports debugger.cli (layer model may not import layer cli)",
    ]
    assert unplaced == ["debugger/newthing.py (debugger.newthing) is in no layer of debugger/common/layers.py"]


def model_order_violations(root: str, order: tuple[str, ...] = MODEL_ORDER) -> list[str]:
    """Imports between debugger/model/ modules that go up or sideways in ``order``, and model modules it lacks."""
    mods = importscan.modules(root)
    known = {m.name: m for m in mods}
    rank = {f"debugger.model.{name}": i for i, name in enumerate(order)}
    bad = []
    for module in mods:
        if not module.name.startswith("debugger.model.") or module.is_package:
            continue
        if module.name not in rank:
            bad.append(f"{module.path} ({module.name}) is not in MODEL_ORDER of debugger/common/layers.py")
            continue
        for imp in importscan.imports(root, module):
            target = importscan.resolve(imp.target, known)
            if target is None or imp.type_only or target.name not in rank:
                continue
            if rank[target.name] >= rank[module.name]:
                bad.append(f"{module.path}:{imp.line} imports {target.name} (not below it in MODEL_ORDER)")
    return sorted(set(bad))      # ``from .x import y`` names both x and x.y


def test_the_model_package_follows_its_declared_order():
    bad = model_order_violations(ROOT)
    assert not bad, "\n".join(bad)


def test_the_model_order_check_catches_an_upward_import(tmp_path):
    """A planted graph module importing history (above it), and a model module the order does not name."""
    for rel, text in {"debugger/__init__.py": "", "debugger/model/__init__.py": "from .history import x\n",
                      "debugger/model/source.py": "", "debugger/model/history.py": "from .source import y\n",
                      "debugger/model/graph.py": "def f():\n    from .history import x\n",
                      "debugger/model/extra.py": ""}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert sorted(model_order_violations(str(tmp_path))) == [
        "debugger/model/extra.py (debugger.model.extra) is not in MODEL_ORDER of debugger/common/layers.py",
        "debugger/model/graph.py:2 imports debugger.model.history (not below it in MODEL_ORDER)",
    ]


def test_type_only_imports_are_not_dependencies(tmp_path):
    (tmp_path / "debugger").mkdir()
    (tmp_path / "debugger" / "errors.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .model import Dump\nfrom .cli import x\n")
    (tmp_path / "debugger" / "model.py").write_text("")
    (tmp_path / "debugger" / "cli.py").write_text("")
    bad, _ = violations(str(tmp_path))
    assert bad == ["debugger/errors.py:4 imports debugger.cli (layer base may not import layer cli)"]


def test_the_library_and_cli_do_not_import_flask():
    code = ("import sys, debugger, debugger.cli, debugger.watch, debugger.compare, debugger.query; "
            "print('flask' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.stdout.strip() == "False"


def test_the_web_layer_only_asks_the_library():
    checked = 0
    for folder, _, names in os.walk(os.path.join(ROOT, "web")):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                checked += 1
                for banned in ("np.load", "import numpy", "debugger.formats", "import h5py", " open(", "import pydot"):
                    assert banned not in text, f"{os.path.relpath(path, ROOT)} uses {banned}"
    assert checked >= 15      # the routes' folder too
