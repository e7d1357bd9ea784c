"""TensorRef: one dumped tensor, what it belongs to and where its data lies; values read on demand."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..formats.base import TensorHeader, TensorSource
from ..formats.records import Kind

if TYPE_CHECKING:   # numpy loads with the first tensor's values, not with the dump
    import numpy as np

    from .logical import Piece


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
    kind: Kind = Kind.OTHER
    param: str | None = None
    file_dtype: str | None = None   # dtype name the listing gives without reading the data
    matched: bool = True
    # a part of a logical tensor (a sharded parameter, its gradient or optimizer state): this rank's own
    # shard (its local source and ShardRecord); ``source`` is then the whole tensor, assembled from the
    # parts on every rank (a LogicalSource), or the shard itself when the parts do not make up the whole
    shard: "Piece | None" = None

    @property
    def is_logical(self) -> bool:
        """Whether the tensor is a logical tensor assembled from shards on several ranks (the rank's own
        part is :attr:`shard`)."""
        return self.shard is not None and self.source is not self.shard.source

    @property
    def pieces(self) -> "tuple[Piece, ...]":
        """The parts of a logical tensor on every rank that holds one, by rank (() when not logical)."""
        return tuple(getattr(self.source, "pieces", ())) if self.is_logical else ()

    @property
    def key(self) -> tuple[str, str, int]:
        """(node, io, slot): the same tensor across iterations and ranks."""
        return (self.node, self.io, self.slot)

    @property
    def location(self) -> str:
        """Where the data lives, for messages."""
        return self.source.location

    @property
    def stored_bytes(self) -> int:
        """Bytes the tensor takes in the dump (its header's ``size`` counts elements)."""
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
        import numpy as np   # with the values, not with the dump (tests/test_lazy_imports.py)

        return np.asarray(self.value()[index])
