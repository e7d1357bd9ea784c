"""Plain records every reader returns; the model is built from these alone."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OutputType:
    """Type of one node output: a numpy dtype name (or MindSpore's word) and a shape."""

    dtype: str | None
    shape: tuple[int, ...] | None


@dataclass
class NodeRecord:
    """One graph node as a reader found it."""

    name: str                      # full name, the key used everywhere
    op_type: str
    scope: str
    inputs: list[tuple[str, str]] = field(default_factory=list)  # (source full name, "data"|"control")
    outputs: list[OutputType] = field(default_factory=list)
    source: str = ""               # raw stack text
    source_outermost_first: bool = False
    instance_name: str = ""
    is_parameter: bool = False
    is_constant: bool = False
    has_default: bool = False      # parameters: holds a value of its own (weights, state)


@dataclass
class GraphRecord:
    """One graph: its nodes in topological order and the names of its outputs."""

    graph_id: int
    name: str
    nodes: list[NodeRecord]
    outputs: list[str]
    source_file: str               # the file it was read from
