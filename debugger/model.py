"""Dump > Rank > Graph > Node, and TensorRef: thin handles built from the reader's records."""
from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable

import numpy as np

from .errors import CorruptFileError, DumpError, QueryError
from .formats.mindspore import exec_order as eo
from .formats.mindspore.graph_ir import read_graph_ir
from .formats.mindspore.graph_pb import read_graph_pb
from .formats.mindspore.tree import RankListing, TensorFile, list_rank, read_metadata
from .graph import Graph, op_number
from .source import SourceIndex
from .formats.base import TensorHeader, TensorSource
from .formats.npy import NpyTensor

_SHORT_RE = re.compile(r"^(?P<scope>.*?)_?(?P<short>[^_]+-op\d+)$")


@dataclass
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
        return np.asarray(self.value()[index])


class Rank:
    """One rank of a dump: metadata, graphs, iterations and the tensor index."""

    def __init__(self, rank: int, path: str, graph_cache: "GraphCache | None" = None) -> None:
        self.rank = rank
        self.path = path
        self.warnings: list[str] = []
        self.config, self.dump_config = read_metadata(path, self.warnings)
        self._graph_cache = graph_cache or GraphCache()
        self._lock = threading.Lock()
        self._graphs: dict[int, Graph] | None = None
        self._index: dict[tuple[int, int], list[TensorRef]] | None = None
        self._maps: dict[tuple[int, int], dict[tuple[str, str, int], TensorRef]] = {}

    def __repr__(self) -> str:
        return f"Rank({self.rank}, {self.path!r})"

    @cached_property
    def listing(self) -> RankListing:
        """What the rank dir holds, listed on first use (directory listings only)."""
        try:
            lst = list_rank(self.rank, self.path)
        except DumpError as exc:
            self.warnings.append(str(exc))
            return RankListing(self.rank, self.path)
        self.warnings.extend(lst.warnings)
        return lst

    @property
    def nets(self) -> list[str]:
        """Net-name directories of the rank."""
        return self.listing.nets

    @property
    def ms_version(self) -> str | None:
        """MindSpore version from the metadata, when present."""
        return self.config.get("ms_version")

    @property
    def device_target(self) -> str | None:
        """Device target (CPU, GPU, Ascend) from the metadata."""
        return self.config.get("device_target")

    @property
    def graph_ids(self) -> list[int]:
        """Ids of every graph this rank has a graph file or a tensor dir for."""
        ids = set(self.listing.graph_pb) | set(self.listing.graph_ir) | {g for g, _ in self.listing.tensors}
        return sorted(ids)

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
            raise QueryError(self.path, f"no graph {graph_id} (graphs: {sorted(self.graphs)})") from None

    def _load_graphs(self) -> dict[int, Graph]:
        out: dict[int, Graph] = {}
        for gid in self.graph_ids:
            order: list[str] = []
            eo_path = self.listing.exec_order.get(gid)
            if eo_path:
                try:
                    order = eo.read_execution_order(eo_path)
                except DumpError as exc:
                    self.warnings.append(str(exc))
            graph = self._graph_cache.load(self.listing.graph_pb.get(gid), self.listing.graph_ir.get(gid),
                                           gid, order, self.warnings)
            if graph is None:
                has_tensors = any(g == gid for g, _ in self.listing.tensors)
                if has_tensors:
                    self.warnings.append(
                        f"{self.path}/graphs: no readable graph for graph {gid}; its tensors are listed "
                        "without kinds or source")
                continue
            out[gid] = graph
        return out

    # -- iterations ---------------------------------------------------------------------------
    def iterations(self, graph_id: int | None = None) -> list[int]:
        """Iterations with a tensor dir (of one graph, or of any)."""
        return sorted({it for g, it in self.listing.tensors if graph_id is None or g == graph_id})

    def run_history(self, graph_id: int) -> list[int]:
        """Iterations in which a graph ran (ms_global_execution_order), [] when unknown."""
        return self._run_histories.get(graph_id, [])

    @cached_property
    def _run_histories(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for gid, path in self.listing.run_history.items():
            try:
                out[gid] = eo.read_run_history(path)
            except DumpError as exc:
                self.warnings.append(str(exc))
        return out

    def previous_iteration(self, graph_id: int, iteration: int) -> int | None:
        """The nearest earlier run of the graph, from the run history, else the previous dump."""
        runs = [i for i in self._run_histories.get(graph_id, []) if i < iteration]
        if runs:
            return max(runs)
        dumped = [i for i in self.iterations(graph_id) if i < iteration]
        return max(dumped) if dumped else None

    # -- tensors ------------------------------------------------------------------------------
    @property
    def index(self) -> dict[tuple[int, int], list[TensorRef]]:
        """(graph_id, iteration) -> tensors, newest file per (node, io, slot)."""
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

    def tensor(self, graph_id: int, iteration: int, node: str, io: str = "output", slot: int = 0) -> TensorRef:
        """One tensor (QueryError when absent)."""
        for t in self.index.get((graph_id, iteration), ()):
            if t.node == node and t.io == io and t.slot == slot:
                return t
        raise QueryError(self.path, f"no tensor {node} {io} {slot} in graph {graph_id} iteration {iteration}")

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
        for (gid, it), files in sorted(self.listing.tensors.items()):
            graph = graphs.get(gid)
            names = _match_files(graph, files)
            newest: dict[tuple[str, str, int], tuple[int, TensorRef]] = {}
            for f in files:
                node = names.get(f.name.op_name, (None,))[0]
                matched = node is not None
                if node is None:
                    node = f.name.op_name
                    unmatched[gid].add(f.name.op_name)
                attrs = graph.nx.nodes[node] if graph is not None and node in graph.nx else {}
                ref = TensorRef(self.rank, gid, it, node, f.name.op_type, f.name.io, f.name.slot,
                                NpyTensor(f.path, f.size, f.mtime_ns), attrs.get("kind", "other"),
                                attrs.get("param"), f.name.dtype, matched)
                k = ref.key
                if k not in newest or f.name.timestamp > newest[k][0]:
                    newest[k] = (f.name.timestamp, ref)
            refs = [r for _, r in newest.values()]
            order = graph.execution_index if graph is not None else {}
            refs.sort(key=lambda r: (order.get(r.node, len(order)), r.node, r.io != "input", r.slot))
            out[(gid, it)] = refs
        for gid, unknown in sorted(unmatched.items()):
            if gid in graphs:
                shown = ", ".join(sorted(unknown)[:3])
                self.warnings.append(
                    f"{self.path}: {len(unknown)} tensor file op name(s) of graph {gid} match no graph node "
                    f"(kept under their file names): {shown}{' ...' if len(unknown) > 3 else ''}")
        self._check_complete(out)
        return out

    def _check_complete(self, index: dict[tuple[int, int], list[TensorRef]]) -> None:
        by_graph: dict[int, list[tuple[int, int]]] = defaultdict(list)
        # Count tensors of graph nodes: a stray file in one iteration must not make the others look short.
        has_graph = {gid for (gid, _), refs in index.items() if any(r.matched for r in refs)}
        for (gid, it), refs in index.items():
            by_graph[gid].append((it, sum(r.matched for r in refs) if gid in has_graph else len(refs)))
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
        """Total bytes of tensor files (from the listing)."""
        return sum(f.size for files in self.listing.tensors.values() for f in files)

    def tensor_file_count(self) -> int:
        """Number of tensor files (every file, before newest-timestamp de-duplication)."""
        return sum(len(files) for files in self.listing.tensors.values())

    def parameters(self) -> list[tuple[str, str]]:
        """(parameter name, kind) of every Parameter node, by name."""
        out: dict[str, str] = {}
        for g in self.graphs.values():
            for n, a in g.nx.nodes(data=True):
                if a.get("is_parameter"):
                    out.setdefault(n, a["kind"])
        return sorted(out.items())

    def find_node(self, name: str) -> list[tuple[int, str]]:
        """(graph_id, full name) of nodes called ``name``: exact, then by file spelling or suffix."""
        hits = [(gid, name) for gid, g in self.graphs.items() if name in g]
        if hits:
            return hits
        for gid, g in self.graphs.items():
            full = g.file_keys.get(name) or g.file_keys.get(name.replace("/", "_"))
            if full:
                hits.append((gid, full))
        if hits:
            return hits
        for gid, g in self.graphs.items():
            hits.extend((gid, n) for n in g.nx.nodes if n.endswith("/" + name))
        return hits


def _match_files(graph: Graph | None, files: Iterable[TensorFile]) -> dict[str, tuple[str]]:
    """File op name -> (graph full name,): direct spellings, then renumbered leftovers."""
    if graph is None:
        return {}
    keys = graph.file_keys
    out: dict[str, tuple[str]] = {}
    leftovers: dict[tuple[str, str], set[str]] = defaultdict(set)
    for f in files:
        op_name = f.name.op_name
        if op_name in out:
            continue
        full = keys.get(op_name)
        if full is not None:
            out[op_name] = (full,)
            continue
        m = _SHORT_RE.match(op_name)
        if m:
            leftovers[(m.group("scope"), f.name.op_type)].add(op_name)
    if not leftovers:
        return out
    # Graph and files can number the same op differently (the .pb says -op1, the files -op0):
    # pair the unmatched of one (scope, op type) in op-number order.
    used = {v[0] for v in out.values()}
    free: dict[tuple[str, str], list[str]] = defaultdict(list)
    for n in graph.nx.nodes:
        if n in used:
            continue
        k = graph.leftover_key(n)
        if k is not None and k in leftovers:
            free[k].append(n)
    for k, names in leftovers.items():
        cands = sorted(free.get(k, []), key=op_number)
        for op_name, full in zip(sorted(names, key=op_number), cands):
            out[op_name] = (full,)
    return out


class GraphCache:
    """Parses each distinct graph file once: the ranks of a data-parallel job share graphs."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[str, str], Graph] = {}
        self._lock = threading.Lock()

    def load(self, pb: str | None, ir: str | None, graph_id: int, order: list[str],
             warnings: list[str]) -> Graph | None:
        """A Graph from the .pb, falling back to the .ir; None (with a warning) when neither reads."""
        for path, reader in ((pb, read_graph_pb), (ir, read_graph_ir)):
            if not path:
                continue
            try:
                with open(path, "rb") as f:
                    digest = hashlib.blake2b(f.read(), digest_size=16).hexdigest()
            except OSError as exc:
                warnings.append(f"{path}: cannot read ({exc.strerror})")
                continue
            key = (digest, hashlib.blake2b("\n".join(order).encode(), digest_size=16).hexdigest())
            with self._lock:
                if key in self._graphs:
                    return self._graphs[key]
            try:
                record = reader(path, graph_id)
            except CorruptFileError as exc:
                fallback = "; using the .ir text instead" if reader is read_graph_pb and ir else ""
                warnings.append(f"{exc}{fallback}")
                continue
            graph = Graph(record, order)
            with self._lock:
                self._graphs[key] = graph
            return graph
        return None


class Dump:
    """A dump root and its ranks."""

    def __init__(self, root: str, rank_paths: list[tuple[int, str]]) -> None:
        self.root = root
        cache = GraphCache()
        self._ranks: dict[int, Rank] = {}
        self.warnings: list[str] = []
        for r, p in rank_paths:
            self._ranks[r] = Rank(r, p, cache)
        # In multi-rank CPU runs only rank_0 may have .dump_metadata: the others share it.
        donor = next((rk for rk in self._ranks.values() if rk.config), None)
        for rk in self._ranks.values():
            if donor is not None and not rk.config:
                rk.config, rk.dump_config = dict(donor.config), dict(donor.dump_config)
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

    def fingerprint(self, ranks: Iterable[int] | None = None) -> str:
        """A digest of every file's name, size and mtime under the given ranks (stat only)."""
        h = hashlib.blake2b(digest_size=16)
        for r in sorted(ranks if ranks is not None else self.rank_ids):
            rank = self.rank(r)
            h.update(f"R{r}{rank.path}".encode())
            _hash_tree(rank.path, h)
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

    def nodes_at(self, file_suffix: str, line: int) -> list[dict]:
        """Every (rank, graph, node) created by ``file_suffix:line``, forward and backward."""
        hits = self.source_index.nodes_at(file_suffix, line)
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


def _hash_tree(path: str, h: Any) -> None:
    parts: list[str] = []
    stack = [path]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        names = []
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
                continue
            try:
                st = e.stat()
            except OSError:
                continue
            names.append(f"{e.name}|{st.st_size}|{st.st_mtime_ns}")
        names.sort()
        parts.append(d + "\n" + "\n".join(names))
    parts.sort()
    h.update("\n".join(parts).encode("utf-8", "surrogateescape"))
