"""One computation graph: a networkx DiGraph with kinds, scopes, execution order and stacks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .formats.records import GraphRecord, OutputType
from .source import Frame, parse_stack, user_first


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
    def activation(self) -> str:
        """The activation function the node applies as a layer ("relu", "tanh" ...; "" for none)."""
        return self._a.get("activation", "")

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
    def is_routing(self) -> bool:
        """Whether the node only routes values (no computation of its own)."""
        return bool(self._a.get("is_routing"))

    @property
    def is_collective(self) -> bool:
        """Whether the node exchanges values between ranks."""
        return bool(self._a.get("is_collective"))

    @property
    def is_backward(self) -> bool:
        """Whether the node belongs to the backward pass."""
        return bool(self._a.get("is_backward"))

    @property
    def input_roles(self) -> tuple[str, ...]:
        """For an optimizer update kernel, each input's role (weight, gradient, state, hyper); else ()."""
        return tuple(self._a.get("input_roles", ()))

    @property
    def base_name(self) -> str:
        """The name without the numbers that change between runs."""
        return self._a.get("base_name") or self.name

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
    """A graph of one rank, built from a :class:`GraphRecord` and the hints its reader gave."""

    def __init__(self, record: GraphRecord) -> None:
        self.record = record
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
                       is_parameter=n.is_parameter, is_constant=n.is_constant, has_default=n.has_default,
                       instance_name=n.instance_name, kind=n.kind, activation=n.activation, param=n.param,
                       is_backward=n.is_backward,
                       is_routing=n.is_routing, is_collective=n.is_collective, per_rank=n.per_rank, input_roles=n.input_roles,
                       value_inputs=n.value_inputs, base_name=n.base_name)
        for n in record.nodes:
            for slot, (src, edge) in enumerate(n.inputs):
                if src and src in g:
                    g.add_edge(src, n.name, slot=slot, edge=edge)
        self.nx = g
        self.execution_order = [k for k in record.execution_order if k in g] or [
            n.name for n in record.nodes if not n.is_parameter and not n.is_constant and not n.is_routing]
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

    def value_source(self, name: str) -> str:
        """The node that made the value ``name`` passes on (itself unless it only routes a value)."""
        a = self.nx.nodes.get(name)
        if a is None or not a.get("is_routing"):
            return name
        vi = a.get("value_inputs") or ()
        return vi[0] if vi and vi[0] else name

    def value_inputs(self, name: str) -> tuple[str, ...]:
        """Per input slot of ``name``, the node whose value arrives there (through routing nodes)."""
        a = self.nx.nodes[name]
        vi = a.get("value_inputs")
        if vi or a.get("is_routing"):
            return tuple(vi or ())
        return tuple(src for src, _ in a.get("inputs", ()))
