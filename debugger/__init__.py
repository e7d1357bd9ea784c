"""tdbg: an offline debugger for neural-network training dumps.

The names below load on first use (PEP 562): ``from debugger import open_dump`` stays as it was, and a
command that only needs a stored result does not pay for numpy and the graph and statistics modules.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "CorruptFileError", "Dump", "DumpError", "Graph", "KINDS", "Node", "NotADumpError", "QueryError",
    "Rank", "Stats", "StatsCache", "TensorRef", "find_dump_roots", "open_dump", "open_dumps", "tensor_stats",
]
__version__ = "0.1.0"

_WHERE = {"CorruptFileError": "errors", "DumpError": "errors", "NotADumpError": "errors", "QueryError": "errors",
          "Graph": "graph", "Node": "graph", "KINDS": "kinds", "Dump": "model", "Rank": "model",
          "TensorRef": "model", "find_dump_roots": "model", "open_dump": "model", "open_dumps": "model",
          "StatsCache": "cache", "Stats": "stats", "tensor_stats": "stats"}


def __getattr__(name: str) -> Any:
    """One of :data:`__all__`, imported from its module on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The package's names, the lazy ones included."""
    return sorted([*globals(), *__all__])
