"""One computation graph: the reader's node records in graph order, networkx for the topology only,
and one cache of facts derived from the graph."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

from ..formats.records import GraphRecord, Kind, NodeRecord, OutputType, StackFrame
from .source import user_first

T = TypeVar("T")


@dataclass(frozen=True)
class Node:
    """A typed view of one graph node: its reader's record, and what the graph knows around it."""

    graph: "Graph"
    name: str

    @property
    def record(self) -> NodeRecord:
        """The record the reader gave (every field a format fills, new ones included)."""
        return self.graph.record_of(self.name)

    @property
    def op_type(self) -> str:
        """The operator, e.g. ``Conv2D``."""
        return self.record.op_type

    @property
    def scope(self) -> str:
        """The scope path the node lives in."""
        return self.record.scope

    @property
    def module(self) -> str:
        """Dotted path of the layer/module the node runs in ("" when unknown)."""
        return self.record.module

    @property
    def kind(self) -> Kind:
        """What the node's value is (:class:`~debugger.formats.records.Kind`)."""
        return self.record.kind

    @property
    def activation(self) -> str:
        """The activation function the node applies as a layer ("relu", "tanh" ...; "" for none)."""
        return self.record.activation

    @property
    def param(self) -> str | None:
        """The weight a weight, gradient or optimizer state belongs to."""
        return self.record.param

    @property
    def inputs(self) -> list[tuple[str, str]]:
        """Input (source name, "data"|"control") pairs in slot order."""
        return list(self.record.inputs)

    @property
    def outputs(self) -> list[OutputType]:
        """Output dtypes and shapes."""
        return list(self.record.outputs)

    @property
    def consumers(self) -> list[str]:
        """Nodes that read this node's outputs."""
        return sorted(self.graph.successors(self.name))

    @property
    def is_parameter(self) -> bool:
        """Whether the node is a parameter or another leaf input of the graph."""
        return self.record.is_parameter

    @property
    def is_constant(self) -> bool:
        """Whether the node is a constant."""
        return self.record.is_constant

    @property
    def has_default(self) -> bool:
        """A parameter that holds a value of its own (weights, state)."""
        return self.record.has_default

    @property
    def is_routing(self) -> bool:
        """Whether the node only routes values (no computation of its own)."""
        return self.record.is_routing

    @property
    def is_collective(self) -> bool:
        """Whether the node exchanges values between ranks."""
        return self.record.is_collective

    @property
    def is_backward(self) -> bool:
        """Whether the node belongs to the backward pass."""
        return self.record.is_backward

    @property
    def per_rank(self) -> bool:
        """Whether its outputs differ between data-parallel ranks by design."""
        return self.record.per_rank

    @property
    def input_roles(self) -> tuple[str, ...]:
        """For an optimizer update kernel, each input's role (weight, gradient, state, hyper); else ()."""
        return tuple(self.record.input_roles)

    @property
    def value_inputs(self) -> tuple[str, ...]:
        """Per input slot, the node whose value arrives there (through routing nodes)."""
        return self.graph.value_inputs(self.name)

    @property
    def item(self) -> int | None:
        """Which element of its input's tuple a node passes on, when the graph says."""
        return self.record.item

    @property
    def instance_name(self) -> str:
        """The format's instance name of the node ("" when none)."""
        return self.record.instance_name

    @property
    def base_name(self) -> str:
        """The name without the numbers that change between runs."""
        return self.record.base_name or self.name

    @property
    def execution_index(self) -> int | None:
        """Position in the graph's execution order, None when not a kernel that ran."""
        return self.graph.execution_index.get(self.name)

    @property
    def stack(self) -> tuple[StackFrame, ...]:
        """Source frames, innermost first."""
        return self.record.stack

    @property
    def stack_user_first(self) -> list[StackFrame]:
        """Source frames with the user's own code first."""
        return user_first(self.record.stack)


class Graph:
    """A graph of one rank: owns its reader's node records (in graph order); networkx holds the edges."""

    def __init__(self, record: GraphRecord) -> None:
        self.record = record
        self.graph_id = record.graph_id
        self.name = record.name
        self.source_file = record.source_file
        self.outputs = list(record.outputs)
        self.level = record.level       # formats.records.LEVELS: how finely the run was recorded
        self.compiled = record.compiled  # operators of a compiled program (decomposed, fused)
        import networkx  # ~0.1 s to import: only when a graph is read

        # a name read twice keeps its first place and its last record, as the graph always did
        self._records: dict[str, NodeRecord] = {}
        for n in record.nodes:
            self._records[n.name] = n
        topo = networkx.DiGraph()
        topo.add_nodes_from(self._records)
        for n in record.nodes:
            for slot, (src, edge) in enumerate(n.inputs):
                if src and src in self._records:
                    topo.add_edge(src, n.name, slot=slot, edge=edge)
        self._topo = topo
        self.execution_order = [k for k in record.execution_order if k in self._records] or [
            n.name for n in record.nodes if not n.is_parameter and not n.is_constant and not n.is_routing]
        self.execution_index = {k: i for i, k in enumerate(self.execution_order)}
        self._derived: dict[Any, Any] = {}
        self._derived_lock = threading.RLock()

    def __contains__(self, name: object) -> bool:
        return name in self._records

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def names(self) -> list[str]:
        """Node names in graph order."""
        return list(self._records)

    def get(self, name: str) -> Node | None:
        """The node called ``name``, None when absent."""
        return Node(self, name) if name in self._records else None

    def node(self, name: str) -> Node:
        """The node called ``name`` (KeyError when absent)."""
        if name not in self._records:
            raise KeyError(name)
        return Node(self, name)

    def nodes(self, kind: str | None = None) -> Iterator[Node]:
        """Every node in graph order, optionally of one kind."""
        for n, rec in self._records.items():
            if kind is None or rec.kind == kind:
                yield Node(self, n)

    def record_of(self, name: str) -> NodeRecord:
        """The reader's record of a node (KeyError when absent)."""
        return self._records[name]

    def successors(self, name: str) -> list[str]:
        """Nodes with an edge from ``name`` (those that read it)."""
        return list(self._topo.successors(name))

    def predecessors(self, name: str) -> list[str]:
        """Nodes with an edge to ``name`` (those it reads)."""
        return list(self._topo.predecessors(name))

    def in_edges(self, name: str) -> list[tuple[str, int, str]]:
        """(source, slot, "data"|"control") of every edge into ``name``."""
        return [(src, a["slot"], a["edge"]) for src, _, a in self._topo.in_edges(name, data=True)]

    def stack(self, name: str) -> tuple[StackFrame, ...]:
        """Source frames of a node, innermost first."""
        return self._records[name].stack

    def kind_counts(self) -> dict[str, int]:
        """Node counts by kind."""
        out: dict[str, int] = {}
        for rec in self._records.values():
            k = str(rec.kind)    # a Kind is its word
            out[k] = out.get(k, 0) + 1
        return out

    def gradient_params(self) -> set[str]:
        """The weights whose gradient the graph holds: a gradient node's, or an output slot's (a fused backward
        kernel, such as BatchNorm's, makes the gradients of several weights, each an output of its own)."""
        out = {rec.param for rec in self._records.values() if rec.kind == Kind.GRADIENT and rec.param}
        for rec in self._records.values():
            out.update(o.param for o in rec.outputs if o.kind == Kind.GRADIENT and o.param)
        return out

    def value_source(self, name: str) -> str:
        """The node that made the value ``name`` passes on (itself unless it only routes a value)."""
        rec = self._records.get(name)
        if rec is None or not rec.is_routing:
            return name
        vi = rec.value_inputs
        return vi[0] if vi and vi[0] else name

    def value_inputs(self, name: str) -> tuple[str, ...]:
        """Per input slot of ``name``, the node whose value arrives there (through routing nodes)."""
        rec = self._records[name]
        if rec.value_inputs or rec.is_routing:
            return tuple(rec.value_inputs)
        return tuple(src for src, _ in rec.inputs)

    def derived(self, key: Any, build: Callable[["Graph"], T]) -> T:
        """The one cache of facts derived from this graph: ``build(self)`` runs once per ``key``."""
        with self._derived_lock:     # re-entrant: one derived fact may be built from another
            if key not in self._derived:
                self._derived[key] = build(self)
            return self._derived[key]  # type: ignore[no-any-return]
