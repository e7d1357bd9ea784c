"""Names, version and constants of the tdbg-h5 layout (its array work, the digest included: :mod:`.arrays`).

The page ``docs/tdbg-h5-format.md`` is the specification; this module is its one source of
names in code, so the writer and the reader cannot drift apart.
"""
from __future__ import annotations

import os
import re
import secrets

FORMAT_NAME = "tdbg-h5"
VERSION = 3
# Version 1 files hold blake2b-128 digests, version 2 xxh3-128 ones (same framing): a version 1
# digest is read with this prefix, so it never equals (nor passes for) a version 2 one.
V1_DIGEST_PREFIX = "blake2b:"

MARKER = "tdbg_dump.json"          # DUMP/tdbg_dump.json: {"format": "tdbg-h5", "version": 2}
RANK_JSON = "rank.json"            # DUMP/rank_R/rank.json: the rank's metadata
LOCK_FILE = ".writer.lock"         # DUMP/rank_R/.writer.lock: flock'ed by the one live writer of a rank
RANK_RE = re.compile(r"^rank_(\d{1,18})\Z", re.ASCII)
GRAPH_RE = re.compile(r"^graph_(\d{1,18})\.h5\Z", re.ASCII)
ITERATION_RE = re.compile(r"^iteration_(\d{1,18})\.h5\Z", re.ASCII)
TEMP_RE = re.compile(r"^\.(?P<final>.+)\.\d+\.[0-9a-f]+\.tmp\Z")


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
