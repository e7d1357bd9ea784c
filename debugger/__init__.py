"""tdbg: an offline debugger for neural-network training dumps."""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from .stats.cache import StatsCache  # noqa: E402
from .errors import CorruptFileError, DumpError, NotADumpError, QueryError  # noqa: E402
from .formats.records import KINDS, Kind  # noqa: E402
from .model import Dump, Graph, Node, Rank, TensorRef, find_dump_roots, open_dump, open_dumps  # noqa: E402

__all__ = [
    "CorruptFileError", "Dump", "DumpError", "Graph", "KINDS", "Kind", "Node", "NotADumpError", "QueryError",
    "Rank", "Stats", "StatsCache", "TensorRef", "find_dump_roots", "open_dump", "open_dumps", "tensor_stats",
]


def __getattr__(name: str) -> Any:
    """``Stats`` and ``tensor_stats`` load numpy: imported on first use (PEP 562), so that ``import debugger``,
    the `tdbg` command and a cached re-scan (tests/test_lazy_imports.py) do not load it."""
    if name in ("Stats", "tensor_stats"):
        from . import stats   # the one lazy import of the package: numpy behind it

        return getattr(stats, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
