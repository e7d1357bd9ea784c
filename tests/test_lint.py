"""The linter and the type checker pass, at the level pyproject.toml sets ([tool.ruff], [tool.mypy]): run as CI
runs the suite, each in a process of its own."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool(module: str, *args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    if shutil.which(module) is None and subprocess.run([sys.executable, "-c", f"import {module}"],
                                                       capture_output=True).returncode:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_ruff_passes():
    done = _tool("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]


def test_mypy_passes(tmp_path: Any):
    done = _tool("mypy", "--cache-dir", str(tmp_path / "mypy-cache"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]


def test_the_checks_can_fail(tmp_path: Any):
    """A planted unused import and a planted type error are reported (by the same configuration)."""
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    for folder in ("debugger", "web"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "debugger" / "bad.py").write_text("import os\n\n\ndef f() -> int:\n    return 'one'\n")
    lint = _tool("ruff", "check", "--no-cache", ".", cwd=str(tmp_path))
    assert lint.returncode == 1 and "F401" in lint.stdout, lint.stdout
    types = _tool("mypy", "--cache-dir", str(tmp_path / "mypy-cache"), cwd=str(tmp_path))
    assert types.returncode == 1 and "debugger/bad.py:5: error: Incompatible return value" in types.stdout, types.stdout
