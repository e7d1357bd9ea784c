"""Dump: a dump root and its ranks; opening dumps in any format tdbg reads."""
from __future__ import annotations

import hashlib
import os
import threading
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from ..errors import QueryError
from ..common.executors import forked
from ..formats import find_dump_roots as _find_roots
from ..formats import open_source
from ..formats.base import DumpSource
from .rank import GraphCache, Rank
from .source import SourceIndex

if TYPE_CHECKING:
    from .logical import Piece
    from .shards import ShardIndex


class Dump:
    """A dump root and its ranks."""

    def __init__(self, source: DumpSource, graphs: GraphCache | None = None) -> None:
        self.root = source.root
        self.format = source.format
        self._graphs = graphs or GraphCache()
        self._ranks: dict[int, Rank] = {r.rank: Rank(r, self._graphs, self.shard_index) for r in source.ranks}
        self.warnings: list[str] = list(source.warnings)
        self._list_together = source.list_together
        self._shards: "ShardIndex | None" = None
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

    def shard_index(self) -> "ShardIndex":
        """The logical tensors behind the shards of every rank with a parallel layout (built on first use,
        by a rank's index: a dump without layouts never builds it)."""
        with self._lock:
            if self._shards is None:
                from .shards import ShardIndex     # numpy: only for a dump with a parallel layout
                self._shards = ShardIndex(self.ranks, self.warnings)
            return self._shards

    def shard_pieces(self, graph_id: int, iteration: int, key: tuple[str, str, int],
                     rank: int | None = None) -> "list[Piece]":
        """Every rank's part of the tensor that ``rank`` (default: the lowest rank holding one) calls ``key`` =
        (node, io, slot), by rank, with its own (local) source and ShardRecord: the parts of a sharded
        parameter's weight, gradient or optimizer state, and the replicas of a replicated one. [] when no
        rank holds it under a parallel layout."""
        if not any(r.layout is not None for r in self.ranks):
            return []
        return self.shard_index().parts(graph_id, iteration, key, rank)

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
        return self._stamp(ranks)[0]

    def stamp(self) -> tuple[str, float | None]:
        """(fingerprint, when the files last changed: their newest mtime in seconds since the epoch, None
        where a rank's format does not say), in one look at the files."""
        return self._stamp(None)

    def _stamp(self, ranks: Iterable[int] | None) -> tuple[str, float | None]:
        h = hashlib.blake2b(digest_size=16)
        newest: list[float | None] = []
        for r in sorted(ranks if ranks is not None else self.rank_ids):
            rank = self.rank(r)
            fp, when = rank.reader.stamp()
            newest.append(when)
            h.update(f"R{r}{rank.path}{fp}".encode("utf-8", "surrogateescape"))
        known = [t for t in newest if t is not None]
        return h.hexdigest(), max(known) if known and len(known) == len(newest) else None

    def reopen(self, path: str | None = None) -> "Dump":
        """The dump as its files are now (a running job may have written more), opened at ``path`` (default:
        its root); graphs already parsed are kept, by their content's key, and not parsed again."""
        return Dump(open_source(path or self.root), self._graphs)

    def list_ranks(self, ranks: Iterable[int] | None = None) -> None:
        """List these ranks (default: all) now, in one go where the format shares that work between ranks
        (what a command about many ranks calls first: each rank would otherwise list itself on first use)."""
        if self._list_together is not None:
            chosen = self.ranks if ranks is None else [self.rank(r) for r in ranks]
            self._list_together([r.reader for r in chosen])

    def load_graphs(self, ranks: Iterable[int] | None = None) -> None:
        """Parse each distinct graph of these ranks (default: all) now, in this order, by the first rank that
        has it, as one process going through them would: workers forked afterwards share them, so what a
        graph says (its source file, its warnings) does not depend on which worker took which ranks."""
        for r in (self.ranks if ranks is None else [self.rank(r) for r in ranks]):
            r.graphs  # noqa: B018 - loading is the point

    def rank_chunks(self, ranks: Iterable[int] | None = None, size: int = 64) -> "Iterator[list[Rank]]":
        """These ranks (default: all) a chunk at a time, each chunk listed together (:meth:`list_ranks`) as it
        comes: a command going through many ranks holds one chunk (it may ``release`` each rank when done)."""
        ranks = self.ranks if ranks is None else [self.rank(r) for r in ranks]
        for at in range(0, len(ranks), size):
            chunk = ranks[at:at + size]
            self.list_ranks([r.rank for r in chunk])
            yield chunk

    def all_warnings(self, release: bool = False) -> list[str]:
        """Warnings of the dump and of every rank (loads graphs and indexes; ``release``: each rank's index
        forgotten once built, for a command that holds a few ranks at a time)."""
        todo = [r for r in self.ranks if not r.indexed]
        if not release:
            self.list_ranks([r.rank for r in todo])
        for r in todo:
            r.index  # noqa: B018 - building the index is what produces its warnings (and the shards')
            if release:
                r.release()
        out = list(self.warnings)
        for r in self.ranks:
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
                        for n in g:
                            frames = g.stack(n)
                            if frames:
                                idx.add(gid, n, frames, g.node(n).is_backward)
                self._source = idx
            return self._source

    def nodes_at(self, file_suffix: str, line: int,
                 statement: "Callable[[str, int], Sequence[int]] | None" = None,
                 attribute: "Callable[[str, int], str | None] | None" = None) -> list[dict]:
        """Every (rank, graph, node) created by ``file_suffix:line``, forward and backward (``statement``:
        see :meth:`debugger.model.source.SourceIndex.nodes_at`). ``attribute(path, line)`` names the layer a
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
        """The nodes of the layer assigned at ``file_suffix:line``: a part ``<name>`` of their module path, or
        parameters ``<name>.*`` (a layer's definition makes no node of its own, its calls do)."""
        out = []
        for path in self.source_index.files(file_suffix):
            name = attribute(path, line)
            if not name:
                continue
            for r in self.ranks:
                for gid, n in r.layer_nodes(name):
                    node = r.graphs[gid].node(n)
                    out.append({"rank": r.rank, "graph": gid, "node": n, "op_type": node.op_type,
                                "kind": node.kind, "direction": "definition", "file": path})
        return out


def find_dump_roots(path: str) -> list[str]:
    """Dump roots at ``path``: itself, the dump it is a rank of, or dump roots below it."""
    return [root for root, _ in _find_roots(path)]


def open_dump(path: str) -> Dump:
    """Open one dump: a dump root or one of its ranks, in any format tdbg reads."""
    return Dump(open_source(path))


def dump_at(root: str) -> Dump:
    """A worker's dump at ``root``: the one its parent shares (``shared_with_forks(dump=...)``), else opened here."""
    d = forked("dump")
    return d if d is not None and d.root == root else open_dump(root)


def open_dumps(path: str) -> list[Dump]:
    """Open every dump found at ``path``."""
    roots = _find_roots(path)
    if len(roots) == 1:   # the path may be one rank of the dump: open only that rank
        return [Dump(roots[0][1].open(roots[0][0], os.path.abspath(path)))]
    return [Dump(fmt.open(root, root)) for root, fmt in roots]


def shard_pieces(dump: Dump, graph_id: int, iteration: int, key: tuple[str, str, int],
                 rank: int | None = None) -> "list[Piece]":
    """Every rank's part of one tensor of a parallel job (:meth:`Dump.shard_pieces`)."""
    return dump.shard_pieces(graph_id, iteration, key, rank)
