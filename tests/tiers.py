"""Test tiers declared in code (a pytest plugin, loaded by conftest.py).

- Markers by what a test needs, set at collection: ``browser`` (a test that drives Chromium: it takes the
  ``page`` or ``browser`` fixture), ``torch`` (its module imports torch or debugger.torch at the top, itself
  or through a helper module of tests/, or declares ``NEEDS = ("torch",)`` there: the processes it starts
  import it), ``dask`` (likewise ``distributed``) and ``slow`` (the folders
  and files that train real models, spawn ranks or processes: :data:`SLOW`). The fast tier is
  ``pytest -m "not slow and not browser"``.
- A test module whose top-level imports need an optional package that is not installed is left out of
  the collection and named once in the summary, never a collection error (``pip install -e .`` without
  the test extras runs every test that can run).
"""
from __future__ import annotations

import ast
import importlib.util
import os
from functools import lru_cache
from typing import Any

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
# optional packages a test module may import at its top (the core's dependencies are always there)
OPTIONAL = ("torch", "numba", "distributed", "dask", "playwright", "transformers", "lightning", "timm",
            "torchvision", "accelerate", "yaml",
            *filter(None, os.environ.get("TDBG_TIERS_OPTIONAL", "").split(",")))   # more, for the plugin's own test
# folders, files and tests (path::name prefixes) that train real models or start processes, ranks or servers,
# or build many ranks: the fast tier leaves them out
SLOW = ("recorder/", "parallel/", "scale/", "models/", "test_scan_follow.py", "test_mindcv.py", "test_packaging.py",
        "web/test_live_", "web/test_trends_live.py", "web/test_server_load.py", "web/test_triage_curves.py",
        "watch/test_spikes.py", "watch/test_torch_findings.py", "watch/test_series_conditions.py",
        "web/test_trends_iterations.py", "web/test_triage_verdict.py", "test_function_length.py",
        "test_fuzz.py", "test_info_many_ranks.py", "test_filenames_many.py", "test_nothing_here.py",
        # single tests of the hostile-input kind (seconds each; the many-rank ones take ten ranks through
        # TDBG_RANKS_AT_ONCE, debugger/common/settings.py, and are fast)
        "web/test_security.py::test_every_route_survives",
        "web/test_rank_api.py::test_twenty_ranks")
_left_out: list[tuple[str, list[str]]] = []
# test processes of `pytest -n auto` (pytest-xdist): one a core, at most this many, as many tests start
# processes of their own (ranks, a Dask cluster, Chromium, a training job to follow)
MAX_WORKERS = 4


@lru_cache(maxsize=None)
def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


@lru_cache(maxsize=None)
def needs(path: str) -> frozenset[str]:
    """The optional packages a module imports at its top, itself or through the helper modules of tests/."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError):
        return frozenset()
    out: set[str] = set(_declared(tree))
    for node in tree.body:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for name in names:
            top = name.split(".")[0]
            if name == "debugger.torch" or name.startswith("debugger.torch."):
                out.add("torch")
            elif top in OPTIONAL:
                out.add(top)
            else:
                out |= _helper_needs(path, top)
    return frozenset(out)


def _declared(tree: ast.Module) -> list[str]:
    """``NEEDS = ("torch", ...)`` at a module's top: what the processes it starts import (a training child)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "NEEDS" for t in node.targets):
            try:
                return [str(n) for n in ast.literal_eval(node.value)]
            except ValueError:
                return []
    return []


def _helper_needs(path: str, module: str) -> frozenset[str]:
    """What a helper module of tests/ (beside ``path``, or at the top of tests/) needs."""
    for folder in (os.path.dirname(path), TESTS):
        helper = os.path.join(folder, module + ".py")
        if os.path.isfile(helper) and helper != path:
            return needs(helper)
    return frozenset()


def pytest_ignore_collect(collection_path: Any, config: Any) -> bool | None:
    """Leave out a test module whose top-level imports need an optional package that is not installed."""
    name = os.path.basename(str(collection_path))
    if not (name.startswith("test_") and name.endswith(".py")):
        return None
    lacking = sorted(p for p in needs(str(collection_path)) if not _installed(p))
    if lacking:
        _left_out.append((os.path.relpath(str(collection_path), TESTS), lacking))
        return True
    return None


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Mark every test with the tiers it belongs to."""
    for item in items:
        path = str(item.fspath)
        rel = os.path.relpath(path, TESTS).replace(os.sep, "/")
        wanted = needs(path)
        if {"page", "browser"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
        if "torch" in wanted:
            item.add_marker(pytest.mark.torch)
        if {"distributed", "dask"} & wanted:
            item.add_marker(pytest.mark.dask)
        if any(f"{rel}::{item.name}".startswith(s) for s in SLOW):
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say which test modules were left out for a missing package (never silent). Under pytest-xdist the
    workers collect and this process does not: it finds them itself, the same way."""
    left_out = _left_out or _lacking_under(terminalreporter.config.args, str(terminalreporter.config.rootpath))
    if left_out:
        terminalreporter.write_line(f"{len(left_out)} test module(s) left out, an optional package missing:")
        for rel, lacking in sorted(left_out):
            terminalreporter.write_line(f"  {rel}: needs {', '.join(lacking)}")


def _lacking_under(args: list[str], root: str) -> list[tuple[str, list[str]]]:
    """The test modules under the command line's paths that need a package that is not installed."""
    found = set()
    for arg in args:
        path = os.path.join(root, arg.split("::")[0])
        files = [path] if os.path.isfile(path) else [os.path.join(d, n) for d, _, names in os.walk(path) for n in names]
        for f in files:
            name = os.path.basename(f)
            if name.startswith("test_") and name.endswith(".py"):
                lacking = sorted(p for p in needs(f) if not _installed(p))
                if lacking:
                    found.add((os.path.relpath(f, TESTS), tuple(lacking)))
    return [(rel, list(lacking)) for rel, lacking in found]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: Any) -> int:
    """``-n auto``: one test process a core, at most :data:`MAX_WORKERS` (a hook of pytest-xdist: without it
    installed, ``-n`` is no option and this is never called)."""
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))
