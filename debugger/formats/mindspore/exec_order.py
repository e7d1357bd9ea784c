"""Execution-order csv files: kernel order within a graph, and the iterations a graph ran."""
from __future__ import annotations

from ...errors import CorruptFileError


def read_execution_order(path: str) -> list[str]:
    """Kernel full names in execution order (header line skipped)."""
    names = []
    for line in _lines(path):
        if line.startswith("NodeExecutionOrder") or not line:
            continue
        names.append(line.split(",")[-1].strip())
    return names


def read_run_history(path: str) -> list[int]:
    """Iterations in which the graph ran, in order, from ms_global_execution_order_graph_N.csv."""
    out = []
    for i, line in enumerate(_lines(path)):
        if not line:
            continue
        try:
            out.append(int(line.split(",")[0]))
        except ValueError:
            if i == 0:  # a header line
                continue
            raise CorruptFileError(path, f"line {i + 1}: {line[:40]!r} is not an iteration number") from None
    return out


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [ln.strip() for ln in f]
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc
