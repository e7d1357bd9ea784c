"""The seam between dump formats and the rest of tdbg.

A format is one folder under ``debugger/formats/`` that provides a :class:`Format` (recognise a
path, open it) whose :class:`RankReader` objects hand out plain records only: graphs as
:class:`~debugger.formats.records.GraphRecord`, tensors as :class:`TensorRecord` whose data is
reached through a :class:`TensorSource`. Nothing above this module knows a format's file names,
and nothing below the model knows how a graph is drawn or scanned.

Tensor sources are small picklable objects: a scan hands them to worker processes (or Dask
workers), which read the data themselves.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

if TYPE_CHECKING:   # annotations only: opening a dump must not load numpy
    import numpy as np

from ..errors import QueryError
from .parallel import RankLayout
from .records import LEVEL_OPS, GraphRecord, IterationFacts, SeriesTensor

# What a dump holds per tensor.
VALUES, STATISTICS, BOTH = "values", "statistics", "values+statistics"


class ValuesUnavailableError(QueryError):
    """A tensor's values were asked for, but the dump stores only its statistics (a miss, not a fault)."""


@dataclass(frozen=True)
class TensorHeader:
    """What is known of a tensor without reading its values."""

    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the values."""
        return self.size * self.dtype.itemsize


class TensorSource(ABC):
    """Where one tensor's data lives: header, values in bounded chunks, stored statistics.

    Implementations are picklable (plain paths and names, no open handles in their state) and
    cheap to create: nothing is read until a method asks.
    """

    @property
    @abstractmethod
    def identity(self) -> str:
        """A key that changes whenever the tensor's data does (caches are keyed by it)."""

    def current_identity(self) -> str:
        """:attr:`identity` as the data is now (a long-lived view asks this; a scan takes the listing's)."""
        return self.identity

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the data is, for messages: a file path, or ``file.h5:/dataset``."""

    @property
    @abstractmethod
    def stored_bytes(self) -> int:
        """Bytes the tensor takes in the dump (from a listing; 0 when unknown)."""

    @property
    def has_values(self) -> bool:
        """Whether the values are stored (False for statistics-only dumps)."""
        return True

    @abstractmethod
    def header(self) -> TensorHeader:
        """dtype and shape without reading values (DumpError naming the file when unreadable)."""

    @abstractmethod
    def array(self, mmap: bool = True) -> np.ndarray:
        """All values (memory-mapped where the format allows); ValuesUnavailableError when not stored."""

    @abstractmethod
    def chunks(self, n: int) -> Iterator[np.ndarray]:
        """The values flattened in C order, at most ``n`` elements at a time, in bounded memory.

        A yielded array may be a reused buffer: it is valid until the next one is asked for.
        """

    def whole(self) -> tuple[TensorHeader, np.ndarray] | None:
        """Header and every value (flat, C order) in one read when the tensor is small enough to hold
        whole and the format can; None otherwise (read it in :meth:`chunks`)."""
        return None

    def stored_stats(self) -> Mapping[str, float] | None:
        """Statistics the format stores for this tensor (names of :data:`debugger.stats.STAT_NAMES`)."""
        return None

    def stored_extras(self) -> Mapping[str, float]:
        """Statistics of :data:`debugger.stats.EXTRA_STAT_NAMES` the format stores for this tensor."""
        return {}

    def digest(self) -> str | None:
        """An exact digest of the values, when the format stores one (equal digests: equal values)."""
        return None

    def _no_values(self) -> ValuesUnavailableError:
        have = ", ".join(sorted(self.stored_stats() or {})) or "none"
        return ValuesUnavailableError(self.location, f"needs tensor values; this dump holds statistics only: {have}")


@dataclass
class TensorRecord:
    """One dumped tensor as a reader lists it (one per node, io and slot in an iteration)."""

    node: str                      # the graph's full node name, or the format's own name when unmatched
    op_type: str
    io: str                        # "input" | "output"
    slot: int
    source: TensorSource
    dtype_name: str | None = None  # a float/int name the listing gives without reading (e.g. "float32")
    matched: bool = True           # whether ``node`` names a node of the graph


@dataclass
class RankInfo:
    """What a rank says about itself, in tdbg's words (every field optional)."""

    framework: str | None = None           # "MindSpore", "PyTorch" ...
    framework_version: str | None = None
    device_target: str | None = None       # "CPU", "GPU", "Ascend"
    saved: str | None = None               # VALUES | STATISTICS | BOTH
    net: str | list[str] | None = None
    raw: dict[str, Any] = field(default_factory=dict)   # the format's own metadata, as found
    # Each iteration records what ran in it (a call sequence, not a fixed graph): iterations may hold
    # different tensors by design, so a short one is not taken for an incomplete one.
    iterations_vary: bool = False
    # the rank's place in a parallel job (meshes, each parameter's shard, pipeline stage); None: unknown
    layout: RankLayout | None = None
    # what the format records and what it does not, in a sentence, where that is less than an operator
    # graph with its data flow (`tdbg info` prints it); None: nothing to say
    records: str | None = None
    # the training runs recorded into the rank, in order, each {"first_iteration": int, ...} (a run resumed
    # after a restart begins a new one); empty: one run, or the format does not say
    runs: list[dict[str, Any]] = field(default_factory=list)


class SeriesSource(ABC):
    """A rank's per-step statistics series: every step's statistics (stats.STAT_NAMES) of a set of tensors
    and a few scalars (``SCALARS``: loss, lr, loss_scale, grad_norm). Values are float64, NaN where unknown."""

    warnings: list[str]
    # where the steps come from: "recorded" (series files), "iterations" (a dump's recorded iterations, each
    # one step: debugger.model.stepseries)
    origin: str = "recorded"

    @abstractmethod
    def catalog(self) -> list[SeriesTensor]:
        """Every tensor of the series, first seen first."""

    def tensors(self) -> list[str]:
        """Every tensor name, in :meth:`catalog` order (the rows of :meth:`matrix`)."""
        return [t.name for t in self.catalog()]

    @abstractmethod
    def steps(self) -> np.ndarray:
        """Every step of the series, in order."""

    @abstractmethod
    def curve(self, tensor: str, stat: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one statistic of one tensor."""

    @abstractmethod
    def matrix(self, stat: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values (tensors x steps)) of one statistic of every tensor."""

    @abstractmethod
    def scalar(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one scalar."""

    @abstractmethod
    def fingerprint(self) -> str:
        """Changes when the series does (stat only)."""

    def captures(self) -> "dict[str, Any] | None":
        """Why each deep step was taken, where the writer said (None: not said)."""
        return None


class RankReader(ABC):
    """One rank of an opened dump. Reads lazily; problems become :attr:`warnings`, not exceptions."""

    rank: int
    path: str                      # where the rank lives, for messages
    warnings: list[str]

    @abstractmethod
    def info(self) -> RankInfo:
        """Metadata of the rank."""

    @abstractmethod
    def graph_ids(self) -> list[int]:
        """Ids of every graph the rank has a graph or tensors for."""

    @abstractmethod
    def graph_key(self, graph_id: int) -> str | None:
        """A digest of the graph's content (ranks with equal keys share one parsed graph), None when absent."""

    @abstractmethod
    def read_graph(self, graph_id: int) -> GraphRecord | None:
        """The graph with its execution order and node hints; None (and a warning) when unreadable."""

    @abstractmethod
    def iterations(self, graph_id: int) -> list[int]:
        """Iterations with dumped tensors of a graph, sorted."""

    def run_history(self, graph_id: int) -> list[int]:
        """Iterations in which the graph ran ([] when the format does not record it)."""
        return []

    def graph_level(self, graph_id: int) -> str:
        """How finely the graph was recorded (records.LEVELS), without building it: every operator
        unless the format records coarser levels."""
        return LEVEL_OPS

    @abstractmethod
    def tensors(self, graph_id: int, iteration: int, graph: GraphRecord | None) -> list[TensorRecord]:
        """Tensors of one graph and iteration, one per (node, io, slot), names matched against ``graph``."""

    def iteration_facts(self, iteration: int) -> IterationFacts | None:
        """What the run recorded about an iteration beyond its tensors (None: the format records nothing)."""
        return None

    def node_alias(self, graph: GraphRecord, name: str) -> str | None:
        """A node's full name from another spelling the format uses (e.g. in file names), if any."""
        return None

    def series(self) -> SeriesSource | None:
        """The rank's per-step statistics series (None: the rank has none)."""
        return None

    @abstractmethod
    def tensor_file_count(self) -> int:
        """How many tensor entries the rank lists (before any de-duplication)."""

    @abstractmethod
    def tensor_bytes(self) -> int:
        """Bytes of tensor data the rank holds (from listings)."""

    def release(self) -> None:  # noqa: B027 (optional: a reader that keeps nothing has nothing to forget)
        """Forget what was listed or read so far (read again on next use): a command going through many
        ranks holds a few at a time."""

    @abstractmethod
    def fingerprint(self) -> str:
        """A digest of every file's name, size and mtime (stat only): changes when the rank does."""

    def stamp(self) -> tuple[str, float | None]:
        """(fingerprint, the newest mtime of the rank's files in seconds since the epoch; None: not known)."""
        return self.fingerprint(), None


@dataclass
class DumpSource:
    """An opened dump: its root, its format, and one reader per rank."""

    root: str
    format: str
    ranks: list[RankReader]
    warnings: list[str] = field(default_factory=list)
    # Lists these ranks' folders in one go where a format can share the work between ranks (listings
    # spread over processes, names parsed once); None: each rank lists itself on first use.
    list_together: Callable[[list[RankReader]], None] | None = None


class Format(ABC):
    """One dump format: recognise a path cheaply, open it into rank readers."""

    name: str = ""
    description: str = ""

    @abstractmethod
    def root_of(self, path: str) -> str | None:
        """The dump root ``path`` is or lies in (a root, or one rank of it), None when not this format."""

    @abstractmethod
    def why_not(self, path: str) -> str:
        """Why ``path`` is not a dump of this format, in a few words, for the 'tried' message."""

    @abstractmethod
    def open(self, root: str, path: str) -> DumpSource:
        """Open the dump at ``root``; ``path`` (the root or one rank in it) says which ranks."""
