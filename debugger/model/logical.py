"""Logical tensors: a parameter (or its gradient or optimizer state) whole, from its shards on many ranks.

A :class:`LogicalSource` is a :class:`~debugger.formats.base.TensorSource` like any reader's, so
every engine reads it as it reads one rank's tensor: the values are assembled from the shards'
values (each index once: replicas are read from the first rank that holds them; partial sums are
added), and the statistics are combined exactly from the shards' stored statistics (counts, sums,
min, max, and the variance through sums) when the dump holds no values.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

from ..errors import CorruptFileError
from ..formats.base import TensorHeader, TensorSource
from ..formats.parallel import ShardRecord
from ..stats.core import COUNT_NAMES, Stats

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Piece:
    """One rank's shard of a logical tensor."""

    rank: int
    source: TensorSource
    shard: ShardRecord


def distinct_pieces(pieces: Sequence[Piece], prefer: int | None = None) -> list[Piece]:
    """Each part of the logical tensor once: of every set of replicas, rank ``prefer``'s when it holds one,
    else the first rank's (partial sums are all kept: each adds to the total)."""
    seen: set[tuple] = set()
    out = []
    for p in sorted(pieces, key=lambda p: (p.rank != prefer, p.rank)):
        key = p.shard.key()
        if key in seen and not p.shard.is_partial:
            continue
        seen.add(key)
        out.append(p)
    return sorted(out, key=lambda p: p.rank)


def replica_groups(pieces: Sequence[Piece]) -> list[list[Piece]]:
    """Pieces that hold the same indices (must be equal), grouped; shards of other indices apart."""
    groups: dict[tuple, list[Piece]] = {}
    for p in sorted(pieces, key=lambda p: p.rank):
        if not p.shard.is_partial:
            groups.setdefault(p.shard.key(), []).append(p)
    return list(groups.values())


class LogicalSource(TensorSource):
    """The logical tensor behind ``pieces`` (one per rank that holds a part of it)."""

    def __init__(self, name: str, pieces: Sequence[Piece], viewer: int | None = None) -> None:
        if not pieces:
            raise ValueError(f"{name}: a logical tensor needs at least one shard")
        self.name = name
        self.pieces = tuple(sorted(pieces, key=lambda p: p.rank))
        self.shape = self.pieces[0].shard.shape
        self.viewer = viewer
        # what the values are read from: the viewing rank's own replicas (a rank's view is its data)
        self.parts = distinct_pieces(self.pieces, viewer)

    def viewed_by(self, rank: int) -> "LogicalSource":
        """The same tensor as ``rank`` holds it: its own replicas where it holds some (itself when that reads
        the same parts)."""
        parts = distinct_pieces(self.pieces, rank)
        if [(p.rank, p.shard.key()) for p in parts] == [(p.rank, p.shard.key()) for p in self.parts]:
            return self
        return LogicalSource(self.name, self.pieces, rank)

    @property
    def owner_rank(self) -> int:
        """The rank that reports on the whole tensor (the lowest rank holding a part)."""
        return self.pieces[0].rank

    @property
    def identity(self) -> str:
        """Changes when any shard does (and with the replicas read: another rank's view, another tensor)."""
        h = hashlib.blake2b(digest_size=16)
        for p in self.pieces:
            h.update(f"{p.rank}\0{p.source.identity}\0{p.shard.key()}\n".encode())
        if self.viewer is not None:
            h.update(f"viewer\0{self.viewer}".encode())
        return "logical:" + h.hexdigest()

    def current_identity(self) -> str:
        """:attr:`identity` from the shards' data as it is now."""
        h = hashlib.blake2b(digest_size=16)
        for p in self.pieces:
            h.update(f"{p.rank}\0{p.source.current_identity()}\0{p.shard.key()}\n".encode())
        if self.viewer is not None:
            h.update(f"viewer\0{self.viewer}".encode())
        return "logical:" + h.hexdigest()

    @property
    def location(self) -> str:
        """The shards' locations, for messages."""
        own = [p for p in self.parts if p.rank == self.viewer]     # the viewing rank's file first
        first = (own or list(self.parts))[0].source.location
        more = f" and {len(self.pieces) - 1} more shard(s)" if len(self.pieces) > 1 else ""
        return f"{self.name} (logical; {first}{more})"

    @property
    def stored_bytes(self) -> int:
        """Bytes of every shard."""
        return sum(p.source.stored_bytes for p in self.pieces)

    @property
    def has_values(self) -> bool:
        """Values when every shard has them."""
        return all(p.source.has_values for p in self.pieces)

    def header(self) -> TensorHeader:
        """The logical shape, and the dtype of the shards."""
        return TensorHeader(self.pieces[0].source.header().dtype, self.shape)

    def array(self, mmap: bool = True) -> "np.ndarray":
        """The whole tensor, assembled from the shards' values."""
        import numpy as np
        if not self.has_values:
            raise self._no_values()
        parts = self.parts
        dtype = np.result_type(*(p.source.header().dtype for p in parts))
        out = np.zeros(self.shape, dtype)
        flat_out = out.reshape(-1)
        for p in parts:
            local = np.asarray(p.source.array(mmap=False))
            if local.size != p.shard.local_size:
                raise CorruptFileError(p.source.location, f"holds {local.size} elements, but rank {p.rank}'s shard "
                                       f"of {self.name} is {p.shard.local_size}")
            if p.shard.flat is not None:
                _place(flat_out, slice(*p.shard.flat), local.reshape(-1), p.shard.is_partial)
            else:
                where = _index_of(p.shard) if p.shard.index is not None else ...
                _place(out, where, local.reshape(p.shard.local_shape), p.shard.is_partial)
        return out

    def chunks(self, n: int) -> Iterator["np.ndarray"]:
        """The assembled values, ``n`` elements at a time."""
        flat = self.array().reshape(-1)
        n = max(1, int(n))
        for i in range(0, flat.size, n):
            yield flat[i:i + n]

    def stored_stats(self) -> Mapping[str, float] | None:
        """The shards' statistics combined exactly (None when a shard stores none, or holds partial sums)."""
        parts = self.parts
        if any(p.shard.is_partial for p in parts):
            return None
        got = [p.source.stored_stats() for p in parts]
        if any(g is None for g in got):
            return None
        combined = combine_stats([Stats.from_stored(g) for g in got])   # type: ignore[arg-type]
        return None if combined is None else {k: v for k, v in combined.to_dict().items() if v is not None}


def _place(out: "np.ndarray", where: object, local: "np.ndarray", partial: bool) -> None:
    if partial:
        out[where] += local      # (an index holds each element once: fancy += adds every part)
    else:
        out[where] = local


def _is_basic(shard: ShardRecord) -> bool:
    """Every dimension one run: the shard is a box (numpy basic indexing, a view)."""
    return shard.index is not None and all(len(runs) == 1 for runs in shard.index)


def _index_of(shard: ShardRecord) -> tuple:
    """A numpy index for the shard's place: slices for a box, index arrays (np.ix_) otherwise."""
    import numpy as np
    assert shard.index is not None
    if _is_basic(shard):
        return tuple(slice(runs[0][0], runs[0][1]) for runs in shard.index)
    return np.ix_(*[np.concatenate([np.arange(a, b) for a, b in runs]) if runs else np.arange(0)
                    for runs in shard.index])


def combine_stats(parts: Sequence[Stats]) -> Stats | None:
    """The statistics of the union of disjoint parts, exactly from theirs (None when a part lacks one
    the combination needs: counts, and for parts with finite elements min, max, mean, abs_mean, std)."""
    counts = {n: 0 for n in COUNT_NAMES}
    n_total, s1, abs_sum = 0, 0.0, 0.0
    lo, hi = math.inf, -math.inf
    moments: list[tuple[int, float, float]] = []      # (finite count, mean, m2) per part
    for st in parts:
        if any(getattr(st, n) is None for n in COUNT_NAMES):
            return None
        for n in COUNT_NAMES:
            counts[n] += getattr(st, n)
        k = st.finite
        if k == 0:
            continue
        if None in (st.min, st.max, st.mean, st.abs_mean, st.std):
            return None
        lo, hi = min(lo, st.min), max(hi, st.max)
        abs_sum += st.abs_mean * k
        s1 += st.mean * k
        n_total += k
        moments.append((k, st.mean, st.std * st.std * (k - 1)))
    if n_total == 0:
        return Stats(**counts, min=None, max=None, mean=None, abs_mean=None, std=None, l2norm=None)
    mean = s1 / n_total
    # Chan et al.: the spread of the whole is the parts' spreads plus their means' spread about the mean
    m2 = sum(m2_k + k * (mean_k - mean) ** 2 for k, mean_k, m2_k in moments)
    std = math.sqrt(m2 / (n_total - 1)) if n_total > 1 else 0.0
    l2 = math.sqrt(max(m2 + mean * mean * n_total, 0.0))
    return Stats(**counts, min=lo, max=hi, mean=mean, abs_mean=abs_sum / n_total, std=std, l2norm=l2)

