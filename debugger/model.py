"""Dump > Rank > Graph > Node, and TensorRef: thin handles built from the reader's records."""
from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections import defaultdict
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .errors import QueryError
from .formats import find_dump_roots as _find_roots
from .formats import open_source
from .formats.base import DumpSource, RankInfo, RankReader, TensorHeader, TensorSource
from .formats.records import IterationFacts
from .graph import Graph
from .selection import ranges_text
from .source import SourceIndex

if TYPE_CHECKING:   # numpy loads with the first tensor's values, not with the dump
    import numpy as np


@dataclass(slots=True)
class TensorRef:
    """One dumped tensor: what it belongs to, and its source; values are read on demand."""

    rank: int
    graph_id: int
    iteration: int
    node: str                 # full name in the graph (the format's own name when unmatched)
    op_type: str
    io: str                   # "input" | "output"
    slot: int
    source: TensorSource
    kind: str = "other"
    param: str | None = None
    file_dtype: str | None = None   # dtype name the listing gives without reading the data
    matched: bool = True

    @property
    def key(self) -> tuple[str, str, int]:
        """(node, io, slot): the same tensor across iterations and ranks."""
        return (self.node, self.io, self.slot)

    @property
    def location(self) -> str:
        """Where the data lives, for messages."""
        return self.source.location

    @property
    def size(self) -> int:
        """Bytes the tensor takes in the dump."""
        return self.source.stored_bytes

    @property
    def identity(self) -> str:
        """Changes whenever the tensor's data does: the key of every cache."""
        return self.source.identity

    @property
    def header(self) -> TensorHeader:
        """dtype and shape, without reading values."""
        return self.source.header()

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape, without reading values."""
        return self.header.shape

    @property
    def dtype(self) -> np.dtype:
        """dtype, without reading values."""
        return self.header.dtype

    @property
    def has_values(self) -> bool:
        """Whether the dump stores the values (not only statistics)."""
        return self.source.has_values

    def value(self, mmap: bool = True) -> np.ndarray:
        """The values, memory-mapped where the format allows."""
        return self.source.array(mmap=mmap)

    def __getitem__(self, index: Any) -> np.ndarray:
        import numpy as np

        return np.asarray(self.value()[index])


class Rank:
    """One rank of a dump: metadata, graphs, iterations and the tensor index, from its reader."""

    def __init__(self, reader: RankReader, graph_cache: "GraphCache | None" = None) -> None:
        self.reader = reader
        self.rank = reader.rank
        self.path = reader.path
        self.warnings = reader.warnings     # one list: the reader's problems and the model's
        self._graph_cache = graph_cache or GraphCache()
        self._lock = threading.Lock()
        self._graphs: dict[int, Graph] | None = None
        self._index: dict[tuple[int, int], list[TensorRef]] | None = None
        self._maps: dict[tuple[int, int], dict[tuple[str, str, int], TensorRef]] = {}
        self._node_its: dict[int, dict[str, list[int]]] = {}
        self._info: RankInfo | None = None

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
    def index(self) -> dict[tuple[int, int], list[TensorRef]]:
        """(graph_id, iteration) -> tensors, one per (node, io, slot), in execution order."""
        if self._index is None:
            graphs = self.graphs
            with self._lock:
                if self._index is None:
                    self._index = self._build_index(graphs)
        return self._index

    def tensors(self, graph_id: int | None = None, iteration: int | None = None) -> list[TensorRef]:
        """Tensors of one graph and/or iteration (all when None)."""
        out: list[TensorRef] = []
        for (g, it), refs in sorted(self.index.items()):
            if (graph_id is None or g == graph_id) and (iteration is None or it == iteration):
                out.extend(refs)
        return out

    def layer_nodes(self, attribute: str) -> list[tuple[int, str]]:
        """(graph, node) of the layer a model assigns as ``self.<attribute>``: its parameters, its forward
        nodes and its parameters' gradients and optimizer state."""
        return [(gid, n) for gid, g in self.graphs.items() for n in _layer_nodes(g, attribute)]

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
            hints = ({n: (a.get("kind", "other"), a.get("param")) for n, a in graph.nx.nodes(data=True)}
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
            for n, a in g.nx.nodes(data=True):
                if a.get("is_parameter"):
                    out.setdefault(n, a["kind"])
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
            hits.extend((gid, n) for n in g.nx.nodes if n.endswith("/" + name))
        return hits


_NO_HINTS = ("other", None)


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


class Dump:
    """A dump root and its ranks."""

    def __init__(self, source: DumpSource) -> None:
        self.root = source.root
        self.format = source.format
        cache = GraphCache()
        self._ranks: dict[int, Rank] = {r.rank: Rank(r, cache) for r in source.ranks}
        self.warnings: list[str] = list(source.warnings)
        self._source: SourceIndex | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Dump({self.root!r}, ranks={self.rank_ids})"

    @property
    def rank_ids(self) -> list[int]:
        """Rank numbers, sorted."""
        return sorted(self._ranks)

    @property
    def ranks(self) -> list[Rank]:
        """Ranks, sorted by number."""
        return [self._ranks[r] for r in self.rank_ids]

    def rank(self, rank: int) -> Rank:
        """One rank (QueryError when absent)."""
        try:
            return self._ranks[rank]
        except KeyError:
            raise QueryError(self.root, f"no rank {rank} (ranks: {self.rank_ids})") from None

    def holds(self, path: str) -> bool:
        """Whether ``path`` lies inside the dump (its root or a rank's folder), links resolved."""
        real = os.path.realpath(path)
        for top in [self.root] + [r.path for r in self.ranks]:
            root = os.path.realpath(top)
            if real == root or real.startswith(root + os.sep):
                return True
        return False

    def fingerprint(self, ranks: Iterable[int] | None = None) -> str:
        """A digest of every file's name, size and mtime under the given ranks (stat only)."""
        h = hashlib.blake2b(digest_size=16)
        for r in sorted(ranks if ranks is not None else self.rank_ids):
            rank = self.rank(r)
            h.update(f"R{r}{rank.path}{rank.reader.fingerprint()}".encode("utf-8", "surrogateescape"))
        return h.hexdigest()

    def all_warnings(self) -> list[str]:
        """Warnings of the dump and of every rank (loads graphs and indexes)."""
        out = list(self.warnings)
        for r in self.ranks:
            r.index  # noqa: B018 - building the index is what produces its warnings
            out.extend(r.warnings)
        return out

    @property
    def source_index(self) -> SourceIndex:
        """Frames -> nodes over every graph of every rank that has distinct graphs."""
        with self._lock:
            if self._source is None:
                idx = SourceIndex()
                seen: set[int] = set()
                for r in self.ranks:
                    for gid, g in r.graphs.items():
                        if id(g) in seen:
                            continue
                        seen.add(id(g))
                        for n in g.nx.nodes:
                            frames = g.stack(n)
                            if frames:
                                idx.add(gid, n, frames, g.node(n).is_backward)
                self._source = idx
            return self._source

    def nodes_at(self, file_suffix: str, line: int,
                 statement: "Callable[[str, int], Sequence[int]] | None" = None,
                 attribute: "Callable[[str, int], str | None] | None" = None) -> list[dict]:
        """Every (rank, graph, node) created by ``file_suffix:line``, forward and backward (``statement``:
        see :meth:`debugger.source.SourceIndex.nodes_at`). ``attribute(path, line)`` names the layer a
        line defines (``self.fc3 = nn.Dense(...)``): with no recorded node, that layer's nodes are
        returned, marked ``"direction": "definition"``."""
        hits = self.source_index.nodes_at(file_suffix, line, statement)
        if not hits and attribute is not None:
            return self._defined_by(file_suffix, line, attribute)
        out = []
        for r in self.ranks:
            graphs = r.graphs
            for path, h in hits:
                g = graphs.get(h.graph_id)
                if g is None or h.node not in g:
                    continue
                n = g.node(h.node)
                out.append({"rank": r.rank, "graph": h.graph_id, "node": h.node, "op_type": n.op_type,
                            "kind": n.kind, "direction": h.direction, "file": path})
        return out


    def _defined_by(self, file_suffix: str, line: int, attribute: "Callable[[str, int], str | None]") -> list[dict]:
        """The nodes of the layer assigned at ``file_suffix:line``: scope component ``<name>-<Class>``, or
        parameters ``<name>.*`` (a layer's definition makes no node of its own, its calls do)."""
        out = []
        for path in self.source_index.files(file_suffix):
            name = attribute(path, line)
            if not name:
                continue
            for r in self.ranks:
                for gid, n in r.layer_nodes(name):
                    a = r.graphs[gid].nx.nodes[n]
                    out.append({"rank": r.rank, "graph": gid, "node": n, "op_type": a.get("op_type", ""),
                                "kind": a.get("kind", "other"), "direction": "definition", "file": path})
        return out


def _slot_hints(graph: Graph) -> dict[tuple[str, int], tuple[str, str | None]]:
    """(node, output slot) -> (kind, param) for the outputs whose kind is their own, not their node's."""
    return {(n, slot): (o.kind, o.param) for n, a in graph.nx.nodes(data=True)
            for slot, o in enumerate(a.get("outputs") or ()) if getattr(o, "kind", None)}


def _layer_nodes(g: Graph, name: str) -> list[str]:
    """A layer's nodes: its parameters (``name.*``), the forward kernels in its scope (``.../name-Class``),
    and the gradients and optimizer state of its parameters, by graph evidence (backward kernels can
    carry another layer's scope, so their scope says nothing)."""
    params, in_scope, of_param = _layer_index(g)
    mine = params.get(name, set())
    found = set(mine) | in_scope.get(name, set())
    for p in mine:
        found |= of_param.get(p, set())
    return [n for n in g.nx.nodes if n in found]    # graph order


_LAYER_INDEX: "weakref.WeakKeyDictionary[Graph, tuple]" = weakref.WeakKeyDictionary()


def _layer_index(g: Graph) -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, set[str]]]:
    """Built once per graph (a source file's every layer line asks): attribute -> its parameters,
    attribute -> forward nodes under a ``<attribute>-<Class>`` scope, parameter -> nodes that carry it."""
    idx = _LAYER_INDEX.get(g)
    if idx is not None:
        return idx
    params: dict[str, set[str]] = defaultdict(set)
    in_scope: dict[str, set[str]] = defaultdict(set)
    of_param: dict[str, set[str]] = defaultdict(set)
    for n, a in g.nx.nodes(data=True):
        if a.get("is_parameter"):
            parts = n.split(".")
            for i in range(1, len(parts)):          # fc2.weight -> fc2; layers.3.w -> layers, layers.3
                params[".".join(parts[:i])].add(n)
        if a.get("is_routing"):
            continue
        if a.get("param"):
            of_param[a["param"]].add(n)
        if not a.get("is_backward"):
            for part in (a.get("scope") or "").split("/"):
                if "-" in part:
                    in_scope[part.split("-", 1)[0]].add(n)
    idx = _LAYER_INDEX[g] = (dict(params), dict(in_scope), dict(of_param))
    return idx


def find_dump_roots(path: str) -> list[str]:
    """Dump roots at ``path``: itself, the dump it is a rank of, or dump roots below it."""
    return [root for root, _ in _find_roots(path)]


def open_dump(path: str) -> Dump:
    """Open one dump: a dump root or one of its ranks, in any format tdbg reads."""
    return Dump(open_source(path))


def open_dumps(path: str) -> list[Dump]:
    """Open every dump found at ``path``."""
    roots = _find_roots(path)
    if len(roots) == 1:   # the path may be one rank of the dump: open only that rank
        return [Dump(roots[0][1].open(roots[0][0], os.path.abspath(path)))]
    return [Dump(fmt.open(root, root)) for root, fmt in roots]
