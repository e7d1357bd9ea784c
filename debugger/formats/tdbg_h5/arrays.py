"""tdbg-h5's array work: the index row type, the tensor digest, and C-order blocks of an array.

Apart from :mod:`.layout` (names and bounds), so that detecting a dump, which reads the layout, loads
neither numpy nor h5py; the writer, the tensor reader and the recorder import this.
"""
from __future__ import annotations

import hashlib
import math
from typing import Any, Iterable

import h5py
import numpy as np
import xxhash


def index_dtype() -> np.dtype:
    """The row type of ``/graph_{G}/index`` in an iteration file (one row per tensor)."""
    s = h5py.string_dtype()
    return np.dtype([("node", s), ("op_type", s), ("io", "u1"), ("slot", "<i4"), ("dtype", s),
                     ("shape", h5py.vlen_dtype(np.int64)), ("values", s), ("offset", "<i8"),
                     ("nbytes", "<i8"), ("digest", "S32")])



class Digest:
    """xxh3-128 over ``"tdbg-h5 v2", NUL, dtype name, NUL, shape as little-endian int64, NUL,
    C-order little-endian bytes``.

    Not a cryptographic hash, and it need not be: the digest is stored data that whoever writes a
    file chooses anyway; it only has to tell two tensors apart by accident (2**-128), and at
    ~30 GB/s it costs a recorder 30 times less than blake2b did (version 1).
    """

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self._h = xxhash.xxh3_128(b"tdbg-h5 v2\0")
        self._h.update(np.dtype(dtype).name.encode("ascii") + b"\0")
        self._h.update(np.asarray(shape, dtype="<i8").tobytes() + b"\0")

    def update(self, chunk: np.ndarray) -> None:
        """Add the next C-order piece (little-endian, as stored)."""
        self._h.update(memoryview(np.ascontiguousarray(chunk)).cast("B"))  # type: ignore[arg-type]

    def hexdigest(self) -> str:
        """32 hex characters."""
        return self._h.hexdigest()


_HEADED: dict[tuple[np.dtype, tuple[int, ...]], Any] = {}


def hasher(dtype: np.dtype, shape: tuple[int, ...]) -> Any:
    """A fresh xxh3-128 state past the header of ``dtype`` and ``shape``, ready for the C-order bytes."""
    key = (dtype, shape)      # (numpy derives dtype.name anew on every access, ~3 us)
    headed = _HEADED.get(key)
    if headed is None:
        if len(_HEADED) > 4096:
            _HEADED.clear()
        headed = _HEADED[key] = Digest(dtype, shape)._h
    # a copy of the cached state: a recorder hashes, and a reader checks, the same shapes every step
    return headed.copy()


def v1_hasher(dtype: np.dtype, shape: tuple[int, ...]) -> Any:
    """A blake2b-128 state past the header, as version 1 digests were made (kept to check their files)."""
    h = hashlib.blake2b(digest_size=16, person=b"tdbg-h5 v1")
    h.update(np.dtype(dtype).name.encode("ascii") + b"\0")
    h.update(np.asarray(shape, dtype="<i8").tobytes() + b"\0")
    return h


def digest_of(a: np.ndarray) -> str:
    """The digest of a whole array (any memory order or byte order)."""
    a = np.asarray(a)
    if a.flags.c_contiguous and a.dtype.byteorder != ">":
        # one update over the whole buffer (the hash streams: the same digest as block by block)
        h = hasher(a.dtype, a.shape)
        h.update(memoryview(a.reshape(-1)).cast("B"))   # type: ignore[arg-type]
        return h.hexdigest()
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
    for index, bshape in shape_blocks(tuple(a.shape), n):
        block = a[index]
        yield index, np.ascontiguousarray(block).reshape(bshape)
