"""The shards of a parallel job, dump-wide: which ranks' tensors are parts of one logical tensor.

A rank whose :attr:`~debugger.formats.base.RankInfo.layout` gives a parameter a
:class:`~debugger.formats.parallel.ShardRecord` holds its weight, its gradient and its optimizer
state of the shard's local shape as a part of the logical (full) tensor. :class:`ShardIndex` finds,
per (graph, iteration), the parts of each logical tensor on every rank (a parameter's state by its
name, an operator's tensors by what they are and their place: see the class). The model reads the
whole tensor through a :class:`~debugger.model.logical.LogicalSource` built from them; nothing
outside the model knows shards.

A tensor whose parts do not cover the logical tensor (a rank's dump missing, a damaged layout) stays
the rank's own shard, and the dump says so once in a warning.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Protocol

from ..errors import DumpError
from ..formats.parallel import RankLayout, ShardRecord
from ..formats.records import Kind
from ..common.selection import ranges_text
from .logical import LogicalSource, Piece, distinct_pieces

if TYPE_CHECKING:
    from .graph import Graph
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
    except DumpError:     # an unreadable header is reported when the tensor is read, as any other's
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

    @property
    def graphs(self) -> Mapping[int, Graph]: ...


@dataclass
class _Iteration:
    """The parts of one (graph, iteration): groups of (rank, key, piece), and the logical tensors."""

    groups: list[list[tuple[int, Key, Piece]]] = field(default_factory=list)
    group_of: dict[tuple[int, Key], int] = field(default_factory=dict)       # (rank, key) -> group
    logical: dict[int, LogicalSource] = field(default_factory=dict)         # group -> the whole


class ShardIndex:
    """Per (graph, iteration): the logical tensor behind each sharded tensor of every rank, built on first
    use from the ranks' own (local) tensors. Ranks without a layout take no part. Problems (parts that do
    not make up a whole) are appended to ``warnings``.

    A parameter's state (weight, optimizer state: graph parameters) is matched across ranks by its node
    name; an operator's tensors by what they are (parameter, kind, operator type, io, slot) and their
    place among those: operator names count per rank, and a rank whose shard of a parameter is empty
    runs fewer operators.
    """

    def __init__(self, ranks: Iterable[RankLike], warnings: list[str] | None = None) -> None:
        self._all = list(ranks)
        self._ranks: list[RankLike] | None = None
        self._built: dict[tuple[int, int], _Iteration] = {}
        self._lock = threading.Lock()
        self.warnings = warnings if warnings is not None else []
        self._incomplete: set[tuple] = set()     # tensors already warned about

    def source(self, graph_id: int, iteration: int, rank: int, key: Key) -> LogicalSource | None:
        """The logical tensor that rank ``rank``'s tensor ``key`` = (node, io, slot) is a part of, as ``rank``
        holds it: its own replicas where it holds some (None: none)."""
        built = self._iteration(graph_id, iteration)
        group = built.group_of.get((rank, key))
        src = None if group is None else built.logical.get(group)
        return None if src is None else src.viewed_by(rank)

    def parts(self, graph_id: int, iteration: int, key: Key, rank: int | None = None) -> list[Piece]:
        """Every rank's part of the tensor that ``rank`` (default: the lowest rank holding ``key``) calls
        ``key``, by rank: also replicas of a parameter replicated on every mesh dimension, and parts that
        do not make up a whole ([] when no rank holds it under a ShardRecord)."""
        built = self._iteration(graph_id, iteration)
        if rank is None:
            rank = min((r for r, k in built.group_of if k == key), default=-1)
        group = built.group_of.get((rank, key))
        return [] if group is None else [p for _, _, p in built.groups[group]]

    def _iteration(self, graph_id: int, iteration: int) -> _Iteration:
        k = (graph_id, iteration)
        with self._lock:
            if self._ranks is None:
                self._ranks = [r for r in self._all if r.layout is not None]
            built = self._built.get(k)
            if built is None:
                built = self._built[k] = self._collect(graph_id, iteration)
                self._make_logical(built)
            return built

    def _collect(self, graph_id: int, iteration: int) -> _Iteration:
        by_match: dict[tuple, int] = {}
        built = _Iteration()
        for r in self._ranks or ():
            layout, graph = r.layout, r.graphs.get(graph_id)
            seen: dict[tuple, int] = {}
            for ref in r.local_index.get((graph_id, iteration), ()):    # in execution order
                shard = shard_of(ref, layout)
                if shard is None:
                    continue
                match = _match_key(ref, graph, seen)
                group = by_match.setdefault(match, len(built.groups))
                if group == len(built.groups):
                    built.groups.append([])
                built.groups[group].append((r.rank, ref.key, Piece(r.rank, ref.source, shard)))
                built.group_of[(r.rank, ref.key)] = group
        return built

    def _make_logical(self, built: _Iteration) -> None:
        for group, members in enumerate(built.groups):
            pieces = [p for _, _, p in members]
            if all(p.shard.covers_whole() and p.shard.local_shape == p.shard.shape for p in pieces):
                continue           # replicas only (Replicate on every mesh dimension): each rank's is whole
            # the parts must be of one logical tensor (one logical shape, one part per rank) and make it up
            if (len({p.shard.shape for p in pieces}) == 1 and len({p.rank for p in pieces}) == len(pieces)
                    and covers(pieces)):
                built.logical[group] = LogicalSource(members[0][1][0], pieces)
            else:
                self._note_incomplete(members)

    def _note_incomplete(self, members: list[tuple[int, Key, Piece]]) -> None:
        _, key, piece = members[0]
        if key in self._incomplete:
            return
        self._incomplete.add(key)
        ranks = sorted(r for r, _, _ in members)
        self.warnings.append(
            f"{key[0]}: the shards dumped on rank(s) {ranges_text(ranks)} do not make up its logical tensor "
            f"(of shape {tuple(piece.shard.shape)}): read as each rank's own shard")


def _match_key(ref: "TensorRef", graph: Graph | None, seen: dict[tuple, int]) -> tuple:
    """What names ``ref`` alike on every rank: a graph parameter's name; an operator tensor's parameter,
    kind, operator type, io, slot and its place among the rank's tensors alike (``seen`` counts them)."""
    if graph is not None and ref.node in graph and graph.node(ref.node).is_parameter:
        return ("state", ref.node, ref.io, ref.slot)
    alike = ("op", ref.param, str(ref.kind), ref.op_type, ref.io, ref.slot)
    n = seen[alike] = seen.get(alike, -1) + 1
    return alike + (n,)
