"""Names, version and constants of the tdbg-h5 layout; the digest every writer and reader agree on.

The page ``docs/tdbg-h5-format.md`` is the specification; this module is its one source of
names in code, so the writer and the reader cannot drift apart.
"""
from __future__ import annotations

import math
import os
import re
import secrets
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:   # numpy and xxhash load where arrays are hashed: format detection needs neither
    import numpy as np

FORMAT_NAME = "tdbg-h5"
VERSION = 3
# Version 1 files hold blake2b-128 digests, version 2 xxh3-128 ones (same framing): a version 1
# digest is read with this prefix, so it never equals (nor passes for) a version 2 one.
V1_DIGEST_PREFIX = "blake2b:"

MARKER = "tdbg_dump.json"          # DUMP/tdbg_dump.json: {"format": "tdbg-h5", "version": 2}
RANK_JSON = "rank.json"            # DUMP/rank_R/rank.json: the rank's metadata
LOCK_FILE = ".writer.lock"         # DUMP/rank_R/.writer.lock: flock'ed by the one live writer of a rank
RANK_RE = re.compile(r"^rank_(\d{1,18})$", re.ASCII)
GRAPH_RE = re.compile(r"^graph_(\d{1,18})\.h5$", re.ASCII)
ITERATION_RE = re.compile(r"^iteration_(\d{1,18})\.h5$", re.ASCII)
TEMP_RE = re.compile(r"^\.(?P<final>.+)\.\d+\.[0-9a-f]+\.tmp$")


def rank_dir_name(rank: int) -> str:
    """``rank_{R}``."""
    return f"rank_{rank}"


def graph_file_name(graph_id: int) -> str:
    """``graph_{G}.h5``."""
    return f"graph_{graph_id}.h5"


def iteration_file_name(iteration: int) -> str:
    """``iteration_{I:08d}.h5`` (zero-padded so a plain listing sorts by iteration)."""
    return f"iteration_{iteration:08d}.h5"


def temp_name(final_path: str) -> str:
    """A hidden temporary name beside ``final_path``, unique per process and call."""
    head, tail = os.path.split(final_path)
    return os.path.join(head, f".{tail}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


# Graph and iteration files.
GRAPH_GROUP = "graph_{}"           # per graph, inside an iteration file
IO_CODES = ("input", "output")     # index column ``io``: 0 input, 1 output
EDGE_CODES = ("data", "control")   # graph file ``inputs/edge``: 0 data, 1 control


def index_dtype() -> np.dtype:
    """The row type of ``/graph_{G}/index`` in an iteration file (one row per tensor)."""
    import h5py
    import numpy as np

    s = h5py.string_dtype()
    return np.dtype([("node", s), ("op_type", s), ("io", "u1"), ("slot", "<i4"), ("dtype", s),
                     ("shape", h5py.vlen_dtype(np.int64)), ("values", s), ("offset", "<i8"),
                     ("nbytes", "<i8"), ("digest", "S32")])


# HDF5 file-format features up to 1.10's: indexed groups (fast with thousands of datasets), files
# readable by any HDF5 >= 1.10 (every h5py >= 3.8 wheel ships a newer one).
LIBVER = ("v110", "v110")

# Values of at least this many bytes are stored chunked (and compressed when asked); smaller ones
# contiguous, which lets a reader fetch them with one plain read at the byte offset in the index.
CHUNKED_MIN_BYTES = 1 << 20
CHUNK_BYTES = 1 << 20              # target bytes of one HDF5 chunk of a large tensor

# Reader bounds: a corrupt or hostile file must not make tdbg allocate without limit.
MAX_TABLE_BYTES = 256 << 20        # fixed part of any table (index, stats, graph columns)
MAX_TABLE_ROWS = 16_000_000
# HDF5 filters a reader applies: deflate, shuffle, fletcher32, lzf. Anything else would make
# HDF5 load a plugin library, so it is refused rather than run.
ALLOWED_FILTERS = frozenset({1, 2, 3, 32000})

ALLOWED_KINDS = "biufc"            # numpy dtype kinds a tensor may have

DIGEST_SIZE = 16                   # bytes; stored as 32 lowercase hex characters


class Digest:
    """xxh3-128 over ``"tdbg-h5 v2", NUL, dtype name, NUL, shape as little-endian int64, NUL,
    C-order little-endian bytes``.

    Not a cryptographic hash, and it need not be: the digest is stored data that whoever writes a
    file chooses anyway; it only has to tell two tensors apart by accident (2**-128), and at
    ~30 GB/s it costs a recorder 30 times less than blake2b did (version 1).
    """

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        import numpy as np
        import xxhash

        self._h = xxhash.xxh3_128(b"tdbg-h5 v2\0")
        self._h.update(np.dtype(dtype).name.encode("ascii") + b"\0")
        self._h.update(np.asarray(shape, dtype="<i8").tobytes() + b"\0")

    def update(self, chunk: np.ndarray) -> None:
        """Add the next C-order piece (little-endian, as stored)."""
        import numpy as np

        self._h.update(memoryview(np.ascontiguousarray(chunk)).cast("B"))  # type: ignore[arg-type]

    def hexdigest(self) -> str:
        """32 hex characters."""
        return self._h.hexdigest()


def digest_of(a: np.ndarray) -> str:
    """The digest of a whole array (any memory order or byte order)."""
    import numpy as np

    a = np.asarray(a)
    d = Digest(a.dtype, tuple(a.shape))
    for _, block in c_blocks(little_endian(a), 1 << 20):
        d.update(block.reshape(-1))
    return d.hexdigest()


def little_endian(a: np.ndarray) -> np.ndarray:
    """``a`` with a little-endian (or byte-order-free) dtype; a copy only when it was big-endian."""
    if a.dtype.byteorder == ">":
        return a.astype(a.dtype.newbyteorder("<"))
    return a


def shape_blocks(shape: tuple[int, ...], n: int, prefix: tuple = ()) -> Iterable[tuple[tuple, tuple[int, ...]]]:
    """Index tuples cutting ``shape`` into C-order blocks of at most ``max(n, 1)`` elements, with their shapes.

    Whole rows of the first axis when a row fits in ``n``; otherwise one row at a time, cut again.
    """
    if not shape:
        yield prefix, ()
        return
    row = math.prod(shape[1:])
    if len(shape) == 1 or row <= n:
        k = max(1, n // max(row, 1))
        for i in range(0, shape[0], k):
            j = min(i + k, shape[0])
            yield prefix + (slice(i, j),), (j - i,) + tuple(shape[1:])
        return
    for i in range(shape[0]):
        yield from shape_blocks(tuple(shape[1:]), n, prefix + (i,))


def c_blocks(a: np.ndarray, n: int) -> Iterable[tuple[tuple, np.ndarray]]:
    """C-contiguous blocks of ``a`` in C order (see :func:`shape_blocks`) with their index.

    Fortran-ordered or strided input is copied one block at a time, so memory stays bounded.
    """
    import numpy as np

    for index, bshape in shape_blocks(tuple(a.shape), n):
        block = a[index]
        yield index, np.ascontiguousarray(block).reshape(bshape)
