"""tdbg: an offline debugger for neural-network training dumps."""
from __future__ import annotations

from .errors import CorruptFileError, DumpError, NotADumpError, QueryError
from .graph import Graph, Node
from .kinds import KINDS
from .model import Dump, Rank, TensorRef, find_dump_roots, open_dump, open_dumps
from .cache import StatsCache
from .stats import Stats, tensor_stats

__all__ = [
    "CorruptFileError", "Dump", "DumpError", "Graph", "KINDS", "Node", "NotADumpError", "QueryError",
    "Rank", "Stats", "StatsCache", "TensorRef", "find_dump_roots", "open_dump", "open_dumps", "tensor_stats",
]
__version__ = "0.1.0"
