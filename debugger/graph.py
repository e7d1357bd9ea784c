"""One computation graph: a networkx DiGraph with kinds, scopes, execution order and stacks."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx

from .formats.records import GraphRecord, OutputType
from .kinds import FRAMEWORK_OPS, classify, is_backward
from .source import Frame, parse_stack, user_first

_OP_NUMBER_RE = re.compile(r"-op(\d+)$")


@dataclass(frozen=True)
class Node:
    """A handle on one graph node; every field is read from the graph."""

    graph: "Graph"
    name: str

    @property
    def _a(self) -> dict:
        return self.graph.nx.nodes[self.name]

    @property
    def op_type(self) -> str:
        """The operator, e.g. ``Conv2D``."""
        return self._a.get("op_type", "")

    @property
    def scope(self) -> str:
        """The scope path the node lives in."""
        return self._a.get("scope", "")

    @property
    def kind(self) -> str:
        """One of :data:`debugger.kinds.KINDS`."""
        return self._a.get("kind", "other")

    @property
    def param(self) -> str | None:
        """The weight a weight, gradient or optimizer state belongs to."""
        return self._a.get("param")

    @property
    def inputs(self) -> list[tuple[str, str]]:
        """Input (source name, "data"|"control") pairs in slot order."""
        return list(self._a.get("inputs", ()))

    @property
    def outputs(self) -> list[OutputType]:
        """Output dtypes and shapes."""
        return list(self._a.get("outputs", ()))

    @property
    def consumers(self) -> list[str]:
        """Nodes that read this node's outputs."""
        return sorted(self.graph.nx.successors(self.name))

    @property
    def is_framework_op(self) -> bool:
        """Load, Depend, MakeTuple and the like: routing, not computation."""
        return self.op_type in FRAMEWORK_OPS

    @property
    def is_backward(self) -> bool:
        """Whether the node belongs to the backward pass."""
        return is_backward(self.name)

    @property
    def execution_index(self) -> int | None:
        """Position in the graph's execution order, None when not a kernel that ran."""
        return self.graph.execution_index.get(self.name)

    @property
    def stack(self) -> list[Frame]:
        """Source frames, innermost first."""
        return self.graph.stack(self.name)

    @property
    def stack_user_first(self) -> list[Frame]:
        """Source frames with the user's own code first."""
        return user_first(self.stack)


class Graph:
    """A graph of one rank, built from a :class:`GraphRecord`."""

    def __init__(self, record: GraphRecord, execution_order: list[str] | None = None) -> None:
        self.graph_id = record.graph_id
        self.name = record.name
        self.source_file = record.source_file
        self.outputs = list(record.outputs)
        import networkx as nx  # ~0.1 s to import: only when a graph is read

        g = nx.DiGraph()
        for n in record.nodes:
            g.add_node(n.name, op_type=n.op_type, scope=n.scope, inputs=list(n.inputs),
                       outputs=list(n.outputs), source=n.source,
                       source_outermost_first=n.source_outermost_first,
                       is_parameter=n.is_parameter, is_constant=n.is_constant,
                       instance_name=n.instance_name)
        for n in record.nodes:
            for slot, (src, edge) in enumerate(n.inputs):
                if src and src in g:
                    g.add_edge(src, n.name, slot=slot, edge=edge)
        classify(g, self.outputs)
        self.nx = g
        self.execution_order = [k for k in (execution_order or []) if k in g] or [
            n.name for n in record.nodes
            if not n.is_parameter and not n.is_constant and n.op_type not in FRAMEWORK_OPS]
        self.execution_index = {k: i for i, k in enumerate(self.execution_order)}
        self._stacks: dict[str, list[Frame]] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.nx

    def __len__(self) -> int:
        return self.nx.number_of_nodes()

    def node(self, name: str) -> Node:
        """The node called ``name`` (KeyError when absent)."""
        if name not in self.nx:
            raise KeyError(name)
        return Node(self, name)

    def nodes(self, kind: str | None = None) -> Iterator[Node]:
        """Every node, optionally of one kind."""
        for n, a in self.nx.nodes(data=True):
            if kind is None or a.get("kind") == kind:
                yield Node(self, n)

    def stack(self, name: str) -> list[Frame]:
        """Parsed source frames of a node, innermost first (parsed once, on demand)."""
        if name not in self._stacks:
            a = self.nx.nodes[name]
            self._stacks[name] = parse_stack(a.get("source", ""), a.get("source_outermost_first", False))
        return self._stacks[name]

    def kind_counts(self) -> dict[str, int]:
        """Node counts by kind."""
        out: dict[str, int] = {}
        for _, a in self.nx.nodes(data=True):
            out[a["kind"]] = out.get(a["kind"], 0) + 1
        return out

    @cached_property
    def file_keys(self) -> dict[str, str]:
        """How tensor files spell node names, mapped to full names.

        2.3+ writes the full scope with '/' as '_'; <= 2.2 the short name; parameters
        with '.' as '_'. All spellings are keys; ambiguous short names keep the first.
        """
        keys: dict[str, str] = {}
        for n, a in self.nx.nodes(data=True):
            if a.get("is_constant"):
                continue
            if a.get("is_parameter"):
                keys.setdefault(n.replace(".", "_").replace("/", "_"), n)
                keys.setdefault(n, n)
                continue
            keys.setdefault(n.replace("/", "_"), n)
            keys.setdefault(n.rsplit("/", 1)[-1], n)
        return keys

    def leftover_key(self, name: str) -> tuple[str, str] | None:
        """(scope spelled as in files, op type) of a kernel, used to pair renumbered ops."""
        a = self.nx.nodes.get(name)
        if a is None or a.get("is_parameter") or a.get("is_constant"):
            return None
        return (name.rsplit("/", 1)[0].replace("/", "_") if "/" in name else "", a.get("op_type", ""))


def op_number(name: str) -> int:
    """The N of a trailing ``-opN`` (-1 when absent)."""
    m = _OP_NUMBER_RE.search(name)
    return int(m.group(1)) if m else -1
