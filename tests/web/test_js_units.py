"""The front end's unit tests (tests/web/js/*.test.mjs) run by ``node --test``, so that the one
pytest command runs them too; a failing JS test fails here with node's report."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JS_TESTS = os.path.join("tests", "web", "js")


def test_the_javascript_unit_tests_pass() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the JavaScript unit tests (node --test tests/web/js/) need Node 20")
    files = sorted(os.path.join(JS_TESTS, f) for f in os.listdir(os.path.join(ROOT, JS_TESTS)) if f.endswith(".test.mjs"))
    assert files, "no tests/web/js/*.test.mjs found"
    run = subprocess.run([node, "--test", *files], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"node --test failed:\n{run.stdout[-8000:]}\n{run.stderr[-2000:]}"
    assert "# fail 0" in run.stdout and "# pass 0" not in run.stdout, run.stdout[-2000:]
