"""Execution-order csv files: kernel order within a graph, and the iterations a graph ran."""
from __future__ import annotations

from ...errors import CorruptFileError
from ..files import is_number, read_text


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
        first = line.split(",")[0].strip()
        if is_number(first):
            out.append(int(first))
        elif i != 0:  # the first line may be a header
            raise CorruptFileError(path, f"line {i + 1}: {line[:40]!r} is not an iteration number")
    return out


def _lines(path: str) -> list[str]:
    return [ln.strip() for ln in read_text(path, "csv").splitlines()]
