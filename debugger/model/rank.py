"""Rank: one rank of a dump (its graphs, iterations and tensor index); GraphCache shares equal graphs."""
from __future__ import annotations

import threading
from collections import defaultdict
from operator import itemgetter
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from ..errors import QueryError
from ..formats.base import RankInfo, RankReader
from ..formats.records import IterationFacts, Kind
from ..common.selection import ranges_text
from .graph import Graph
from .layers import layer_nodes
from .tensors import TensorRef

if TYPE_CHECKING:
    from ..formats.base import SeriesSource
    from ..formats.parallel import RankLayout
    from .shards import ShardIndex


class Rank:
    """One rank of a dump: metadata, graphs, iterations and the tensor index, from its reader."""

    def __init__(self, reader: RankReader, graph_cache: "GraphCache | None" = None,
                 shards: "Callable[[], ShardIndex] | None" = None) -> None:
        self.reader = reader
        self.rank = reader.rank
        self.path = reader.path
        self.warnings = reader.warnings     # one list: the reader's problems and the model's
        self._graph_cache = graph_cache or GraphCache()
        self._lock = threading.Lock()
        self._graphs: dict[int, Graph] | None = None
        self._index: dict[tuple[int, int], list[TensorRef]] | None = None
        self._local: dict[tuple[int, int], list[TensorRef]] | None = None
        self._shards = shards     # the dump's index of shards (None: the rank is read alone)
        self._maps: dict[tuple[int, int], dict[tuple[str, str, int], TensorRef]] = {}
        self._node_its: dict[int, dict[str, list[int]]] = {}
        self._info: RankInfo | None = None
        self._from_iterations: "tuple[list[int], SeriesSource | None] | None" = None
        self.indexed = False      # the index was built once: its warnings are known (it may be released since)

    def __repr__(self) -> str:
        return f"Rank({self.rank}, {self.path!r})"

    @property
    def info(self) -> RankInfo:
        """What the rank says about itself (framework, version, device, what was saved)."""
        if self._info is None:
            self._info = self.reader.info()
        return self._info

    @property
    def graph_ids(self) -> list[int]:
        """Ids of every graph this rank has a graph or tensors for."""
        return self.reader.graph_ids()

    @property
    def graphs(self) -> dict[int, Graph]:
        """Graphs by id, read on first use."""
        with self._lock:
            if self._graphs is None:
                self._graphs = self._load_graphs()
            return self._graphs

    def graph(self, graph_id: int) -> Graph:
        """One graph (QueryError when the rank has none with that id)."""
        try:
            return self.graphs[graph_id]
        except KeyError:
            # a graph id the rank knows of (its tensors) whose file could not be read: say which and why
            why = (f"; it could not be read: {'; '.join(self.warnings[:3])}"
                   if graph_id in self.graph_ids and self.warnings else "")
            raise QueryError(self.path, f"no graph {graph_id} (graphs: {sorted(self.graphs)}){why}") from None

    def _load_graphs(self) -> dict[int, Graph]:
        out: dict[int, Graph] = {}
        for gid in self.graph_ids:
            graph = self._graph_cache.load(self.reader, gid)
            if graph is not None:
                out[gid] = graph
        return out

    def graph_level(self, graph_id: int) -> str:
        """How finely a graph was recorded (formats.records.LEVELS), without building the graph."""
        graphs = self._graphs
        if graphs is not None and graph_id in graphs:
            return graphs[graph_id].level
        return self.reader.graph_level(graph_id)

    # -- iterations ---------------------------------------------------------------------------
    def iterations(self, graph_id: int | None = None) -> list[int]:
        """Iterations with dumped tensors (of one graph, or of any)."""
        if graph_id is not None:
            return self.reader.iterations(graph_id)
        return sorted({it for gid in self.graph_ids for it in self.reader.iterations(gid)})

    def run_history(self, graph_id: int) -> list[int]:
        """Iterations in which a graph ran: those the format recorded, and every dumped one."""
        return sorted(set(self.reader.run_history(graph_id)) | set(self.reader.iterations(graph_id)))

    def iteration_facts(self, iteration: int) -> IterationFacts | None:
        """What the run recorded about an iteration beyond its tensors (optimizer steps that did not
        run, a loss scaler's check); None when the format records nothing."""
        return self.reader.iteration_facts(iteration)

    def previous_iteration(self, graph_id: int, iteration: int) -> int | None:
        """The nearest earlier run of the graph (the run history holds every dumped iteration too)."""
        return max((i for i in self.run_history(graph_id) if i < iteration), default=None)

    # -- tensors ------------------------------------------------------------------------------
    @property
    def series(self) -> "SeriesSource | None":
        """The rank's per-step statistics series: the one it recorded, else its recorded iterations read as
        one when they are every step or most (stepseries.reads_as_series; ``origin`` "iterations"), else None."""
        recorded = self.reader.series()
        return recorded if recorded is not None else self._iteration_series()

    def _iteration_series(self) -> "SeriesSource | None":
        """The series read from the iterations, kept while they stay the same (a running job's grow)."""
        from .stepseries import iteration_series   # numpy: not loaded by opening a dump (a cached re-scan)

        its = self.iterations()
        with self._lock:
            if self._from_iterations is None or self._from_iterations[0] != its:
                self._from_iterations = (its, iteration_series(self, its))
            return self._from_iterations[1]

    @property
    def layout(self) -> "RankLayout | None":
        """The rank's place in a parallel job (meshes, its shard of each parameter), None when unknown."""
        return self.info.layout

    @property
    def index(self) -> dict[tuple[int, int], list[TensorRef]]:
        """(graph_id, iteration) -> tensors, one per (node, io, slot), in execution order. A part of a
        sharded parameter (its weight, gradient, optimizer state) is the logical tensor, assembled from
        every rank's part (TensorRef.is_logical; the rank's own part is TensorRef.shard)."""
        if self._index is None:
            local = self.local_index
            layout = self.layout if self._shards is not None else None
            index = local if layout is None else self._logical_index(local, layout)
            with self._lock:
                if self._index is None:
                    self._index = index
        return self._index

    @property
    def local_index(self) -> dict[tuple[int, int], list[TensorRef]]:
        """:attr:`index` as the rank stored it: each tensor the rank's own, shards as shards."""
        if self._local is None:
            graphs = self.graphs
            with self._lock:
                if self._local is None:
                    self._local = self._build_index(graphs)
                    self.indexed = True
        return self._local

    def adopt_warnings(self, found: list[str]) -> None:
        """Take the warnings a worker's copy of this rank found building its index, as if built here."""
        self.warnings.extend(found)
        self.indexed = True

    def release(self) -> None:
        """Forget the tensor index and the reader's listing (built again on next use; graphs stay, shared
        in the dump's graph cache): a command going through many ranks holds a few at a time."""
        with self._lock:
            self._index = self._local = None
            self._maps = {}
            self._node_its = {}
        self.reader.release()

    def _logical_index(self, local: dict[tuple[int, int], list[TensorRef]],
                       layout: "RankLayout") -> dict[tuple[int, int], list[TensorRef]]:
        """The local index with every shard of a logical tensor replaced by the whole (its part kept)."""
        from .logical import Piece     # numpy: only for a dump with a parallel layout
        from .shards import shard_of
        assert self._shards is not None
        shards = self._shards()
        out: dict[tuple[int, int], list[TensorRef]] = {}
        for (gid, it), refs in local.items():
            new = []
            for ref in refs:
                shard = shard_of(ref, layout)
                if shard is not None:
                    whole = shards.source(gid, it, self.rank, ref.key)
                    ref = replace(ref, source=whole if whole is not None else ref.source,
                                  shard=Piece(self.rank, ref.source, shard))
                new.append(ref)
            out[(gid, it)] = new
        return out

    def tensors(self, graph_id: int | None = None, iteration: int | None = None,
                local: bool = False) -> list[TensorRef]:
        """Tensors of one graph and/or iteration (all when None); ``local``: as the rank stored them (a
        shard as the shard, not as its logical tensor)."""
        out: list[TensorRef] = []
        for (g, it), refs in sorted((self.local_index if local else self.index).items()):
            if (graph_id is None or g == graph_id) and (iteration is None or it == iteration):
                out.extend(refs)
        return out

    def layer_nodes(self, attribute: str) -> list[tuple[int, str]]:
        """(graph, node) of the layer a model assigns as ``self.<attribute>``: its parameters, its forward
        nodes and its parameters' gradients and optimizer state."""
        return [(gid, n) for gid, g in self.graphs.items() for n in layer_nodes(g, attribute)]

    def node_iterations(self, graph_id: int, node: str) -> list[int]:
        """Iterations in which any tensor of ``node`` was dumped."""
        with self._lock:
            by_node = self._node_its.get(graph_id)
        if by_node is None:
            by_node = {}
            for it in self.iterations(graph_id):
                for t in self.index.get((graph_id, it), ()):
                    its = by_node.setdefault(t.node, [])
                    if not its or its[-1] != it:
                        its.append(it)
            with self._lock:
                self._node_its[graph_id] = by_node
        return list(by_node.get(node, ()))

    def node_runs(self, graph_id: int, node: str) -> dict[int, int]:
        """{iteration: graph} in which ``node`` was dumped, over the whole run: ``graph_id``'s iterations
        first, then another graph's where it holds a node of that name (a PyTorch run's first step is a
        graph of its own, and its nodes keep their names); ascending."""
        ran = {it: graph_id for it in self.node_iterations(graph_id, node)}
        for g in self.graph_ids:
            for it in self.node_iterations(g, node) if g != graph_id else ():
                ran.setdefault(it, g)
        return dict(sorted(ran.items()))

    def tensor(self, graph_id: int, iteration: int, node: str, io: str = "output", slot: int = 0) -> TensorRef:
        """One tensor (QueryError when absent)."""
        t = self.tensor_map(graph_id, iteration).get((node, io, slot))
        if t is None:
            if iteration not in self.iterations(graph_id):
                raise QueryError(self.path, f"no iteration {iteration} in graph {graph_id} "
                                 f"(iterations: {ranges_text(self.iterations(graph_id))})")
            raise QueryError(self.path, f"no tensor {node} {io} {slot} in graph {graph_id} iteration {iteration}")
        return t

    def tensor_map(self, graph_id: int, iteration: int) -> dict[tuple[str, str, int], TensorRef]:
        """Tensors of one iteration keyed by (node, io, slot) (built once per iteration)."""
        k = (graph_id, iteration)
        m = self._maps.get(k)
        if m is None:
            m = self._maps[k] = {t.key: t for t in self.index.get(k, ())}
        return m

    def _build_index(self, graphs: dict[int, Graph]) -> dict[tuple[int, int], list[TensorRef]]:
        out: dict[tuple[int, int], list[TensorRef]] = {}
        unmatched: dict[int, set[str]] = defaultdict(set)
        matched: dict[tuple[int, int], int] = {}
        rank = self.rank
        for gid in self.graph_ids:
            graph = graphs.get(gid)
            record = graph.record if graph is not None else None
            order = graph.execution_index if graph is not None else {}
            last = len(order)
            # (kind, param) per node, read once per graph, not once per tensor of every iteration
            hints = ({n.name: (n.kind, n.param) for n in graph.nodes()}
                     if graph is not None else {})
            slot_hints = _slot_hints(graph) if graph is not None else {}
            for it in self.reader.iterations(gid):
                keyed = []
                n_matched = 0
                for rec in self.reader.tensors(gid, it, record):
                    node = rec.node
                    if rec.matched:
                        kind, param = ((rec.io == "output" and slot_hints.get((node, rec.slot)))
                                       or hints.get(node) or _NO_HINTS)
                        n_matched += 1
                    else:
                        kind, param = _NO_HINTS
                        unmatched[gid].add(node)
                    keyed.append(((order.get(node, last), node, rec.io != "input", rec.slot),
                                  TensorRef(rank, gid, it, node, rec.op_type, rec.io, rec.slot, rec.source,
                                            kind, param, rec.dtype_name, rec.matched)))
                keyed.sort(key=itemgetter(0))
                out[(gid, it)] = [ref for _, ref in keyed]
                matched[(gid, it)] = n_matched
        for gid, unknown in sorted(unmatched.items()):
            if gid in graphs:
                shown = ", ".join(sorted(unknown)[:3])
                self.warnings.append(
                    f"{self.path}: {len(unknown)} tensor file op name(s) of graph {gid} match no graph node "
                    f"(kept under their file names): {shown}{' ...' if len(unknown) > 3 else ''}")
        if not self.info.iterations_vary:
            self._check_complete(out, matched)
        return out

    def _check_complete(self, index: dict[tuple[int, int], list[TensorRef]],
                        matched: dict[tuple[int, int], int]) -> None:
        by_graph: dict[int, list[tuple[int, int]]] = defaultdict(list)
        # Count tensors of graph nodes: a stray file in one iteration must not make the others look short.
        has_graph = {gid for (gid, it) in index if matched[(gid, it)]}
        for (gid, it), refs in index.items():
            by_graph[gid].append((it, matched[(gid, it)] if gid in has_graph else len(refs)))
        for gid, counts in by_graph.items():
            full = max(c for _, c in counts)
            for it, c in sorted(counts):
                if c < full:
                    self.warnings.append(
                        f"{self.path}: graph {gid} iteration {it} has {c} of {full} tensors; it is "
                        "incomplete or still being written")

    # -- summaries ----------------------------------------------------------------------------
    def kind_counts(self) -> dict[str, int]:
        """Node counts by kind over all graphs."""
        out: dict[str, int] = {}
        for g in self.graphs.values():
            for k, v in g.kind_counts().items():
                out[k] = out.get(k, 0) + v
        return out

    def gradient_params(self) -> set[str]:
        """The weights whose gradient some graph of the rank holds (:meth:`Graph.gradient_params`)."""
        return {p for g in self.graphs.values() for p in g.gradient_params()}

    def tensor_bytes(self) -> int:
        """Total bytes of tensor data (from listings)."""
        return self.reader.tensor_bytes()

    def tensor_file_count(self) -> int:
        """Number of tensor entries the dump lists (before de-duplication)."""
        return self.reader.tensor_file_count()

    def parameters(self) -> list[tuple[str, str]]:
        """(parameter name, kind) of every parameter node, by name."""
        out: dict[str, str] = {}
        for g in self.graphs.values():
            for n in g.nodes():
                if n.is_parameter:
                    out.setdefault(n.name, n.kind)
        return sorted(out.items())

    def alias_resolver(self, graph_id: int) -> "Callable[[str], str | None]":
        """A function from another spelling of a node name (the format's) to the full name in a graph."""
        graph = self.graphs.get(graph_id)
        return lambda name: self.reader.node_alias(graph.record, name) if graph is not None else None

    def find_node(self, name: str) -> list[tuple[int, str]]:
        """(graph_id, full name) of nodes called ``name``: exact, then by the format's spelling, then suffix."""
        hits = [(gid, name) for gid, g in self.graphs.items() if name in g]
        if hits:
            return hits
        for gid, g in self.graphs.items():
            full = self.reader.node_alias(g.record, name)
            if full and full in g:
                hits.append((gid, full))
        if hits:
            return hits
        for gid, g in self.graphs.items():
            hits.extend((gid, n) for n in g if n.endswith("/" + name))
        return hits


_NO_HINTS = (Kind.OTHER, None)


class GraphCache:
    """Builds each distinct graph once: the ranks of a data-parallel job share graphs."""

    def __init__(self) -> None:
        self._graphs: dict[str, Graph] = {}
        self._lock = threading.Lock()

    def load(self, reader: RankReader, graph_id: int) -> Graph | None:
        """The graph of one rank (shared with the ranks whose graph has the same content key)."""
        key = reader.graph_key(graph_id)
        if key is not None:
            with self._lock:
                if key in self._graphs:
                    return self._graphs[key]
        record = reader.read_graph(graph_id)
        if record is None:
            return None
        graph = Graph(record)
        if key is not None:
            with self._lock:
                graph = self._graphs.setdefault(key, graph)
        return graph


def _slot_hints(graph: Graph) -> dict[tuple[str, int], tuple[str, str | None]]:
    """(node, output slot) -> (kind, param) for the outputs whose kind is their own, not their node's."""
    return {(n.name, slot): (o.kind, o.param) for n in graph.nodes()
            for slot, o in enumerate(n.record.outputs) if o.kind}
