"""The test tiers (tests/tiers.py): markers by need and folder, and a module that needs a missing optional
package left out of the collection and named, never a collection error (a real pytest run in a child)."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from tiers import needs

HERE = os.path.dirname(os.path.abspath(__file__))


def _pytest(cwd: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def test_a_module_needs_what_it_and_its_helpers_import() -> None:
    assert needs(os.path.join(HERE, "recorder", "test_resume.py")) == {"torch"}          # import torch
    assert "torch" in needs(os.path.join(HERE, "web", "test_live_api.py"))           # followrun's NEEDS
    assert needs(os.path.join(HERE, "test_model.py")) == frozenset()


def test_markers_select_the_tiers() -> None:
    root = os.path.dirname(HERE)
    browser = _pytest(root, "--collect-only", "-m", "browser", "tests/web/test_ui_runs.py", "tests/test_model.py")
    assert "1/" in browser.stdout.splitlines()[-1] and "test_ui_runs.py::" in browser.stdout, browser.stdout[-800:]
    fast = _pytest(root, "--collect-only", "-m", "not slow and not browser", "tests/recorder/test_resume.py")
    assert "0/" in fast.stdout.splitlines()[-1] or "no tests collected" in fast.stdout, fast.stdout[-800:]


def test_a_module_needing_a_missing_package_is_left_out_and_named(tmp_path: Any) -> None:
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {HERE!r})\npytest_plugins = ['tiers']\n")
    (tmp_path / "test_needs_it.py").write_text("import tdbg_no_such_package\n\ndef test_x():\n    pass\n")
    (tmp_path / "test_plain.py").write_text("def test_y():\n    pass\n")
    done = _pytest(str(tmp_path), env={"TDBG_TIERS_OPTIONAL": "tdbg_no_such_package"})
    assert done.returncode == 0, done.stdout[-1500:]
    assert "1 passed" in done.stdout and "error" not in done.stdout.lower()
    assert "1 test module(s) left out, an optional package missing:" in done.stdout
    assert "test_needs_it.py: needs tdbg_no_such_package" in done.stdout
    spread = _pytest(str(tmp_path), "-n", "2", env={"TDBG_TIERS_OPTIONAL": "tdbg_no_such_package"})
    assert spread.returncode == 0 and "1 passed" in spread.stdout, spread.stdout[-1500:]   # pytest-xdist: the
    assert "test_needs_it.py: needs tdbg_no_such_package" in spread.stdout                # workers collect
    bare = _pytest(str(tmp_path))           # the same module, its package not declared optional: an error
    assert bare.returncode != 0 and "tdbg_no_such_package" in bare.stdout
