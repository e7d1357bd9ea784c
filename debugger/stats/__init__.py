"""Tensor statistics: one chunked pass per tensor (core.py), its compiled form (kernel.py, numba), and the cache
of statistics and results keyed by file identity (cache.py).

``debugger.stats.<name>`` is core.py's name, loaded on first use (PEP 562): the cache is imported by a cached
re-scan, which loads no numpy (tests/test_lazy_imports.py), so this package's own import must not either.
"""
from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    """A name of core.py (numpy is imported then)."""
    if name.startswith("__") or name in ("core", "kernel", "cache"):    # a submodule not imported yet
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    core = importlib.import_module(".core", __name__)   # not ``from . import core``: it asks this function first
    try:
        return getattr(core, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
