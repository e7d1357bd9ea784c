"""The shards of a parallel job, dump-wide: which ranks' tensors are parts of one logical tensor.

A rank whose :attr:`~debugger.formats.base.RankInfo.layout` gives a parameter a
:class:`~debugger.formats.parallel.ShardRecord` holds its weight, its gradient and its optimizer
state of the shard's local shape as a part of the logical (full) tensor. :class:`ShardIndex` finds,
per (graph, iteration), the parts of each logical tensor on every rank: the tensors of the same key
(node, io, slot) on the ranks that shard that parameter. The model reads the whole tensor through a
:class:`~debugger.model.logical.LogicalSource` built from them; nothing outside the model knows shards.

A tensor whose parts do not cover the logical tensor (a rank's dump missing, a damaged layout) stays
the rank's own shard, and the dump says so once in a warning.
"""
from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Iterable, Protocol

from ..formats.parallel import RankLayout, ShardRecord
from ..formats.records import Kind
from ..selection import ranges_text
from .logical import LogicalSource, Piece, distinct_pieces

if TYPE_CHECKING:
    from .tensors import TensorRef

# the kinds a parameter's ShardRecord applies to (the weight, its gradient, its optimizer state); a tuple,
# compared with ==: a kind may come as the plain word
SHARDED_KINDS = (Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE)

Key = tuple[str, str, int]          # (node, io, slot)
LocalIndex = dict[tuple[int, int], list["TensorRef"]]


def shard_of(ref: "TensorRef", layout: RankLayout | None) -> ShardRecord | None:
    """The ShardRecord that ``ref`` (one rank's tensor) is a part under: a weight, gradient or optimizer
    state of a parameter the layout shards, stored in the shard's local shape (a scalar ``step`` is not)."""
    if layout is None or ref.param is None or ref.kind not in SHARDED_KINDS:
        return None
    shard = layout.params.get(ref.param)
    if shard is None:
        return None
    try:
        shape = ref.shape
    except Exception:     # an unreadable header is reported when the tensor is read, as any other's
        return None
    return shard if tuple(shape) == shard.local_shape else None


def covers(pieces: Iterable[Piece]) -> bool:
    """Whether the parts hold every element of the logical tensor once (replicas read once; a set of
    partial sums over the same indices counts once)."""
    parts = distinct_pieces(list(pieces))
    if not parts:
        return False
    seen: set[tuple] = set()
    total = 0
    for p in parts:
        if p.shard.key() in seen:
            continue
        seen.add(p.shard.key())
        total += p.shard.local_size
    return total == math.prod(parts[0].shard.shape)


class RankLike(Protocol):
    """What the index reads of a rank (debugger.model.rank.Rank)."""

    rank: int

    @property
    def layout(self) -> RankLayout | None: ...

    @property
    def local_index(self) -> LocalIndex: ...


class ShardIndex:
    """Per (graph, iteration): the logical tensor behind each sharded tensor of every rank, built on first
    use from the ranks' own (local) tensors. Ranks without a layout take no part. Problems (parts that do
    not make up a whole) are appended to ``warnings``."""

    def __init__(self, ranks: Iterable[RankLike], warnings: list[str] | None = None) -> None:
        self._all = list(ranks)
        self._ranks: list[RankLike] | None = None
        self._sources: dict[tuple[int, int], tuple[dict[Key, list[Piece]], dict[Key, LogicalSource]]] = {}
        self._lock = threading.Lock()
        self.warnings = warnings if warnings is not None else []
        self._incomplete: set[str] = set()     # tensors already warned about

    def sources(self, graph_id: int, iteration: int) -> dict[Key, LogicalSource]:
        """(node, io, slot) -> the logical tensor of that key, for every sharded tensor of the iteration."""
        return self._built(graph_id, iteration)[1]

    def parts(self, graph_id: int, iteration: int) -> dict[Key, list[Piece]]:
        """(node, io, slot) -> every rank's part under a ShardRecord, by rank: also replicas of a parameter
        replicated on every mesh dimension, and parts that do not make up a whole."""
        return self._built(graph_id, iteration)[0]

    def _built(self, graph_id: int, iteration: int) -> tuple[dict[Key, list[Piece]], dict[Key, LogicalSource]]:
        k = (graph_id, iteration)
        with self._lock:
            if self._ranks is None:
                self._ranks = [r for r in self._all if r.layout is not None]
            got = self._sources.get(k)
            if got is None:
                parts = self._collect(graph_id, iteration)
                got = self._sources[k] = (parts, self._logical(parts))
            return got

    def _collect(self, graph_id: int, iteration: int) -> dict[Key, list[Piece]]:
        parts: dict[Key, list[Piece]] = {}
        for r in self._ranks or ():
            layout = r.layout
            for ref in r.local_index.get((graph_id, iteration), ()):
                shard = shard_of(ref, layout)
                if shard is not None:
                    parts.setdefault(ref.key, []).append(Piece(r.rank, ref.source, shard))
        return parts

    def _logical(self, parts: dict[Key, list[Piece]]) -> dict[Key, LogicalSource]:
        out = {}
        for key, pieces in parts.items():
            if all(p.shard.covers_whole() for p in pieces):
                continue           # replicas only (Replicate on every mesh dimension): each rank's is whole
            # the parts must be of one logical tensor (one logical shape) and make it up
            if len({p.shard.shape for p in pieces}) == 1 and covers(pieces):
                out[key] = LogicalSource(key[0], pieces)
            else:
                self._note_incomplete(key, pieces)
        return out

    def _note_incomplete(self, key: Key, pieces: list[Piece]) -> None:
        if key[0] in self._incomplete:
            return
        self._incomplete.add(key[0])
        ranks = sorted(p.rank for p in pieces)
        self.warnings.append(
            f"{key[0]}: the shards dumped on rank(s) {ranges_text(ranks)} do not make up its logical tensor "
            f"(of shape {tuple(pieces[0].shard.shape)}): read as each rank's own shard")
