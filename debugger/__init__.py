"""tdbg: an offline debugger for neural-network training dumps.

The names below load on first use (PEP 562): ``from debugger import open_dump`` stays as it was, and a
command that only needs a stored result does not pay for numpy and the graph and statistics modules.
"""
from __future__ import annotations

from .lazy import lazy_names

__all__ = [
    "CorruptFileError", "Dump", "DumpError", "Graph", "KINDS", "Kind", "Node", "NotADumpError", "QueryError",
    "Rank", "Stats", "StatsCache", "TensorRef", "find_dump_roots", "open_dump", "open_dumps", "tensor_stats",
]
__version__ = "0.1.0"

_WHERE = {"CorruptFileError": "errors", "DumpError": "errors", "NotADumpError": "errors", "QueryError": "errors",
          "Graph": "model", "Node": "model", "KINDS": "formats.records", "Kind": "formats.records",
          "Dump": "model", "Rank": "model",
          "TensorRef": "model", "find_dump_roots": "model", "open_dump": "model", "open_dumps": "model",
          "StatsCache": "cache", "Stats": "stats", "tensor_stats": "stats"}

__getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
