"""``.npy`` tensor files: the header without the data, values through one chunked reader.

Shared by the formats that store one ``.npy`` file per tensor.
"""
from __future__ import annotations

import ast
import io
import math
import os
import re
import stat
import struct
from functools import lru_cache
from dataclasses import dataclass
from typing import Any, Iterator, Literal

import numpy as np   # this module is imported where values or headers are read, never to list a dump

from ..errors import CorruptFileError
from .base import TensorHeader, TensorSource
from .files import open_regular


_MAGIC = b"\x93NUMPY"
_HEADER_RE = re.compile(
    r"^\{'descr': '(?P<descr>[<>|=]?[a-zA-Z]\d*)', 'fortran_order': (?P<fortran>True|False), "
    r"'shape': \((?P<shape>[\d, ]*)\), \}\s*$", re.ASCII)
# A header longer than this is no tensor's (numpy needs version 2 headers only for huge shapes or records).
_MAX_HEADER = 1 << 20


@lru_cache(maxsize=64)
def _dtype(descr: str) -> np.dtype:
    return np.dtype(descr)


@dataclass(frozen=True)
class NpyHeader:
    """What an .npy header says: dtype, shape, order and where the data starts."""

    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int

    @property
    def nbytes(self) -> int:
        """Bytes of data the header promises."""
        return math.prod(self.shape) * self.dtype.itemsize


# Files up to this size are read into memory in one call; larger ones are memory-mapped.
READ_LIMIT = 8 << 20


def read_npy_header(path: str) -> NpyHeader:
    """Read and check the header of an .npy file without reading its data."""
    try:
        with open_regular(path) as f:
            return _header_from(f, path)
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc


def _header_from(f: Any, path: str) -> NpyHeader:
    """Parse the header at the start of an open .npy file, leaving it at the data."""
    head = f.read(10)
    if len(head) < 10 or not head.startswith(_MAGIC):
        raise CorruptFileError(path, "not an .npy file (bad magic or truncated header)")
    major = head[6]
    if major == 1:
        hlen = struct.unpack("<H", head[8:10])[0]
        start = 10
    elif major in (2, 3):
        extra = f.read(2)
        if len(extra) < 2:
            raise CorruptFileError(path, "truncated .npy header")
        hlen = struct.unpack("<I", head[8:10] + extra)[0]
        start = 12
    else:
        raise CorruptFileError(path, f"unsupported .npy version {major}")
    if hlen > _MAX_HEADER:
        raise CorruptFileError(path, f"corrupt .npy header ({hlen} bytes long)")
    text = f.read(hlen)
    if len(text) < hlen:
        raise CorruptFileError(path, "truncated .npy header")
    try:
        header_text = text.decode("latin1")
        m = _HEADER_RE.match(header_text)
        if m:  # numpy's own layout: parse it without the (slow) literal_eval
            dtype = _dtype(m.group("descr"))
            shape = tuple(int(d) for d in m.group("shape").replace(",", " ").split())
            fortran = m.group("fortran") == "True"
        else:
            meta = ast.literal_eval(header_text)
            dtype = np.dtype(meta["descr"])
            shape = meta["shape"]
            fortran = meta["fortran_order"]
            # numpy writes ints and a bool: anything else (1.5, True as a dimension) is a lying header
            if not isinstance(shape, tuple) or not all(type(d) is int for d in shape) or type(fortran) is not bool:
                raise CorruptFileError(path, f"corrupt .npy header (shape {shape!r}, fortran_order {fortran!r})")
    except CorruptFileError:
        raise
    except Exception as exc:  # any malformed header is the same user-facing problem
        raise CorruptFileError(path, f"corrupt .npy header ({exc.__class__.__name__})") from exc
    if any(d < 0 for d in shape):
        raise CorruptFileError(path, f"corrupt .npy header (negative dimension in shape {shape})")
    if dtype.hasobject:
        raise CorruptFileError(path, "object arrays are not tensors")
    return NpyHeader(dtype, shape, fortran, start + hlen)


def read_npy(path: str) -> np.ndarray:
    """Values of an .npy file with one open: read when small, memory-mapped when large."""
    try:
        with open_regular(path) as f:
            header = _header_from(f, path)
            if header.nbytes > READ_LIMIT or header.nbytes == 0:
                return load_npy(path, header)
            size = os.fstat(f.fileno()).st_size
            _check_size(path, header, size)
            buf = f.read(header.nbytes)
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    if len(buf) < header.nbytes:
        _check_size(path, header, header.data_offset + len(buf))
    order: Literal["C", "F"] = "F" if header.fortran_order else "C"
    return np.frombuffer(buf, dtype=header.dtype).reshape(header.shape, order=order)


def read_exact(f: Any, raw: memoryview, want: int, path: str) -> None:
    """Fill ``raw[:want]`` from ``f`` (CorruptFileError when the file ends first)."""
    got = 0
    while got < want:
        n = f.readinto(raw[got:want])
        if not n:
            raise CorruptFileError(path, "truncated .npy data (the file shrank while being read)")
        got += n


def check_complete(path: str, header: NpyHeader) -> None:
    """CorruptFileError when the file holds fewer data bytes than its header promises."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    _check_size(path, header, size)


def _check_size(path: str, header: NpyHeader, size: int) -> None:
    need = header.data_offset + header.nbytes
    if size < need:
        raise CorruptFileError(
            path, f"truncated .npy data ({size - header.data_offset} of {header.nbytes} bytes; "
            "the file may still be being written)")


def load_npy(path: str, header: NpyHeader | None = None, mmap: bool = True) -> np.ndarray:
    """Values of an .npy file, memory-mapped when possible; checks the file is complete."""
    header = header or read_npy_header(path)
    check_complete(path, header)
    order: Literal["C", "F"] = "F" if header.fortran_order else "C"
    if header.nbytes == 0:
        return np.zeros(header.shape, dtype=header.dtype, order=order)
    if mmap:
        return np.memmap(path, dtype=header.dtype, mode="r", offset=header.data_offset,
                         shape=header.shape, order=order)
    with open_regular(path) as f:
        f.seek(header.data_offset)
        buf = f.read(header.nbytes)
    return np.frombuffer(buf, dtype=header.dtype).reshape(header.shape, order=order)


# Large files come back from read_npy memory-mapped. Every page of a map that a pass touches stays
# in the process's resident set until the map goes, so a pass over a 64 MiB tensor would add 64 MiB:
# chunks are read instead, one piece at a time through one reused buffer.
def _read_pieces(path: str, header: NpyHeader, n: int) -> Iterator[np.ndarray]:
    total = math.prod(header.shape)
    buf = np.empty(min(total, n), header.dtype)
    raw = buf.view(np.uint8).data
    with open_regular(path, buffering=0) as f:
        if total * header.dtype.itemsize > (8 << 20) and hasattr(os, "posix_fadvise"):
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)   # a larger read-ahead when cold
        f.seek(header.data_offset)
        done = 0
        while done < total:
            k = min(n, total - done)
            read_exact(f, raw, k * header.dtype.itemsize, path)
            done += k
            yield buf[:k]


@dataclass(frozen=True)
class NpyTensor(TensorSource):
    """A tensor stored as one ``.npy`` file; identity is path, size and mtime as listed."""

    path: str
    size: int
    mtime_ns: int = 0

    @property
    def identity(self) -> str:
        """``path|size|mtime_ns``: changes whenever the file does (made once: a scan asks often)."""
        d = self.__dict__
        ident = d.get("_identity")
        if ident is None:
            ident = d["_identity"] = f"{self.path}|{self.size}|{self.mtime_ns}"
        return ident

    def __getstate__(self) -> dict[str, Any]:
        # the fields only: the cached identity is rebuilt where needed, not shipped to workers
        return {"path": self.path, "size": self.size, "mtime_ns": self.mtime_ns}

    def current_identity(self) -> str:
        """``path|size|mtime_ns`` from a fresh stat: a file replaced since the listing gets a new key."""
        try:
            st = os.stat(self.path)
        except OSError:
            return self.identity   # reading it reports the problem
        return f"{self.path}|{st.st_size}|{st.st_mtime_ns}"

    @property
    def location(self) -> str:
        """The file's path."""
        return self.path

    @property
    def stored_bytes(self) -> int:
        """The file's size as listed."""
        return self.size

    def header(self) -> TensorHeader:
        """dtype and shape from the .npy header (read once per process and file identity)."""
        h = self.npy_header()
        return TensorHeader(h.dtype, h.shape)

    def npy_header(self) -> NpyHeader:
        """The parsed .npy header, data offset and order included (numeric tensors only)."""
        try:   # keyed by the file as it is now: a replaced file is never read with a stale header
            st = os.stat(self.path)
            h = _npy_header(self.path, st.st_size, st.st_mtime_ns)
        except OSError as exc:
            raise CorruptFileError(self.path, f"cannot read: {exc.strerror or exc}") from exc
        _check_numeric(self.path, h)
        return h

    def array(self, mmap: bool = True) -> np.ndarray:
        """The values, memory-mapped by default (small files are read whole)."""
        if mmap:
            return load_npy(self.path, self.npy_header(), mmap=True)
        return read_npy(self.path)

    def chunks(self, n: int) -> Iterator[np.ndarray]:
        """Elements in C order, ``n`` at a time, read through one reused buffer."""
        if 0 < self.size <= READ_LIMIT:
            # the common case, a small file: one open, one fstat, one read (what a scan pays per file)
            got = _read_small(self.path)
            if got is not None:
                a = got[1]
                for i in range(0, a.size, n):
                    yield a[i:i + n]
                return
        h = self.npy_header()
        check_complete(self.path, h)
        if h.nbytes == 0:
            return
        if h.fortran_order and len(h.shape) > 1:
            flat = load_npy(self.path, h).reshape(-1, order="C")   # logical order: numpy copies per chunk
            for i in range(0, flat.size, n):
                yield np.ascontiguousarray(flat[i:i + n])
            return
        yield from _read_pieces(self.path, h, n)

    def whole(self) -> tuple[TensorHeader, np.ndarray] | None:
        """Header and values (flat, C order) of a small file from one read; None for a large one."""
        got = _read_small(self.path) if 0 < self.size <= READ_LIMIT else None
        return None if got is None else (TensorHeader(got[0].dtype, got[0].shape), got[1])


def _read_small(path: str) -> tuple[NpyHeader, np.ndarray] | None:
    """The header and values of a file small enough to read whole, flat in C order, from one open, one
    fstat and one read (header, checks and data from the same bytes); None when the file is not a small
    regular file (the general path reads it, or says why not)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > READ_LIMIT:
            return None
        buf = os.read(fd, st.st_size)
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    h = _header_of_bytes(buf, path)
    _check_numeric(path, h)
    _check_size(path, h, len(buf))   # what was read: a file that shrank meanwhile is truncated
    a = np.frombuffer(buf, dtype=h.dtype, count=math.prod(h.shape), offset=h.data_offset)
    if h.fortran_order and len(h.shape) > 1:
        a = a.reshape(h.shape, order="F").reshape(-1, order="C")   # logical order
    return h, a


# Parsed headers by their bytes: a dump repeats a few hundred headers (one per tensor) over every
# iteration and rank, and parsing one costs more than reading a small file's data.
_HEADERS_SEEN: dict[bytes, NpyHeader] = {}
_HEADERS_SEEN_MAX = 1 << 14


def _header_of_bytes(buf: bytes, path: str) -> NpyHeader:
    """The header at the start of a whole file's bytes: parsed once per distinct header text."""
    if len(buf) >= 10 and buf[:6] == _MAGIC[:6] and buf[6] == 1:
        key = buf[:10 + int.from_bytes(buf[8:10], "little")]
        h = _HEADERS_SEEN.get(key)
        if h is None:
            h = _header_from(io.BytesIO(buf), path)   # raises, naming the file, when it is corrupt
            if len(_HEADERS_SEEN) < _HEADERS_SEEN_MAX:
                _HEADERS_SEEN[key] = h
        return h
    return _header_from(io.BytesIO(buf), path)


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _check_numeric(path: str, h: NpyHeader) -> None:
    if h.dtype.kind not in "biufc" or h.dtype.fields is not None:
        # strings, dates, raw bytes and records are listed, but they are no tensors to check or compare
        raise CorruptFileError(path, f"dtype {h.dtype.str} is not a numeric tensor; skipped")


@lru_cache(maxsize=4096)
def _npy_header(path: str, size: int, mtime_ns: int) -> NpyHeader:
    """Keyed by the file's identity, so a replaced file is read anew."""
    return read_npy_header(path)
