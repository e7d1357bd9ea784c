"""``.pt`` tensor files read without torch, and without ever unpickling an arbitrary object.

A ``torch.save`` file is a zip archive: ``<name>/data.pkl`` (a pickle describing the tensor),
``<name>/data/<key>`` (raw storages, stored uncompressed), ``<name>/byteorder`` and
``<name>/version``. The pickle of a plain tensor calls ``torch._utils._rebuild_tensor_v2`` on a
persistent storage reference (``('storage', torch.FloatStorage, key, location, numel)``), with an
empty ``collections.OrderedDict`` of hooks. The unpickler below resolves exactly those globals to
functions of its own that only record numbers; any other global (``os.system``, ``builtins.eval``,
``torch.nn.Module`` ...) is refused before it could be called, so a hostile file runs nothing.
"""
from __future__ import annotations

import collections
import io
import math
import os
import pickle
import struct
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator

import numpy as np

from ...errors import CorruptFileError
from ..files import open_regular

# A tensor's pickle is ~150-300 bytes; anything past this is not a plain tensor.
MAX_PICKLE = 1 << 16
MAX_MEMBERS = 64

_BF16 = "bfloat16"
STORAGE_DTYPES: dict[str, str] = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": _BF16,
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}


@dataclass(frozen=True)
class _StorageType:
    dtype: str


@dataclass(frozen=True)
class _StorageRef:
    dtype: str
    key: str
    numel: int


@dataclass(frozen=True)
class PtLayout:
    """Where a tensor's values lie in a ``.pt`` file and how to view them."""

    dtype: str                    # numpy dtype name, or "bfloat16" (read as float32)
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int                   # storage offset, in elements
    data_start: int               # byte offset of the storage in the file
    numel: int                    # elements in the storage
    little: bool

    @property
    def np_dtype(self) -> np.dtype:
        """The dtype values are returned in (bfloat16 widens to float32)."""
        return np.dtype("float32" if self.dtype == _BF16 else self.dtype)

    @property
    def raw_dtype(self) -> np.dtype:
        """The dtype of the stored bytes."""
        base = np.dtype("uint16" if self.dtype == _BF16 else self.dtype)
        return base.newbyteorder("<" if self.little else ">") if base.itemsize > 1 else base

    @property
    def size(self) -> int:
        """Number of elements of the tensor."""
        return math.prod(self.shape)

    @property
    def contiguous(self) -> bool:
        """Whether the elements lie in C order without gaps."""
        want, acc = [], 1
        for d in reversed(self.shape):
            want.append(acc)
            acc *= d
        return all(s == w for s, w, d in zip(self.stride, reversed(want), self.shape) if d > 1)


def _rebuild_tensor_v2(storage: Any, storage_offset: Any, size: Any, stride: Any, *rest: Any) -> tuple:
    """Stands in for ``torch._utils._rebuild_tensor_v2``: records the arguments, builds nothing."""
    return ("tensor", storage, storage_offset, size, stride)


def _ordered_dict(*args: Any) -> dict:
    """``collections.OrderedDict`` (hooks): only an empty one is a plain tensor's."""
    if args:
        raise pickle.UnpicklingError("non-empty OrderedDict (a tensor with hooks or a state dict)")
    return collections.OrderedDict()


_ALLOWED: dict[tuple[str, str], Any] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor_v2,
    ("collections", "OrderedDict"): _ordered_dict,
}


class _TensorUnpickler(pickle.Unpickler):
    """Resolves only the globals of a plain tensor; every other one is an error."""

    def find_class(self, module: str, name: str) -> Any:
        fn = _ALLOWED.get((module, name))
        if fn is not None:
            return fn
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(STORAGE_DTYPES[name])
        raise pickle.UnpicklingError(f"refers to {module}.{name}, which a plain tensor file never does")

    def persistent_load(self, pid: Any) -> _StorageRef:
        if (not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage"
                or not isinstance(pid[1], _StorageType) or not isinstance(pid[2], str)
                or type(pid[4]) is not int or pid[4] < 0):
            raise pickle.UnpicklingError("unexpected storage reference")
        return _StorageRef(pid[1].dtype, pid[2], pid[4])


def _ints(v: Any, what: str) -> tuple[int, ...]:
    if not isinstance(v, tuple) or not all(type(x) is int and x >= 0 for x in v):
        raise pickle.UnpicklingError(f"bad {what} {v!r}")
    return v


def _zip_info(z: zipfile.ZipFile, path: str) -> tuple[str, dict[str, zipfile.ZipInfo]]:
    infos = z.infolist()
    if len(infos) > MAX_MEMBERS:
        raise CorruptFileError(path, f"a .pt archive of {len(infos)} members; a tensor file has a handful")
    members = {i.filename: i for i in infos}
    pkls = [n for n in members if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pkls) != 1:
        raise CorruptFileError(path, "not a torch.save file (no single <name>/data.pkl)")
    return pkls[0][: -len("data.pkl")], members


def read_layout(path: str) -> PtLayout:
    """Parse a ``.pt`` file's pickle safely (CorruptFileError naming the file when it is no plain tensor)."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            return _layout(f, path, size)
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc


def _layout(f: Any, path: str, size: int) -> PtLayout:
    try:
        z = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise CorruptFileError(path, f"not a torch .pt zip archive ({exc})") from exc
    with z:
        prefix, members = _zip_info(z, path)
        pinfo = members[prefix + "data.pkl"]
        if pinfo.file_size > MAX_PICKLE:
            raise CorruptFileError(path, f"data.pkl of {pinfo.file_size} bytes; a plain tensor's is a few hundred")
        try:
            raw = z.read(pinfo)
            order = z.read(members[prefix + "byteorder"]).strip() if prefix + "byteorder" in members else b"little"
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise CorruptFileError(path, f"damaged .pt archive ({exc})") from exc
        try:
            obj = _TensorUnpickler(io.BytesIO(raw)).load()
        except pickle.UnpicklingError as exc:
            raise CorruptFileError(path, f"not a plain tensor file: {exc}; refused (nothing in it was run)") from exc
        except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, struct.error,
                RecursionError, MemoryError) as exc:
            raise CorruptFileError(path, f"damaged tensor pickle ({exc.__class__.__name__}: {exc})") from exc
        if not (isinstance(obj, tuple) and len(obj) == 5 and obj[0] == "tensor" and isinstance(obj[1], _StorageRef)):
            raise CorruptFileError(path, f"holds a {type(obj).__name__}, not a tensor")
        _, st, offset, shape, stride = obj
        try:
            shape, stride = _ints(shape, "size"), _ints(stride, "stride")
            if type(offset) is not int or offset < 0 or len(shape) != len(stride):
                raise pickle.UnpicklingError("bad storage offset or stride")
        except pickle.UnpicklingError as exc:
            raise CorruptFileError(path, f"damaged tensor pickle ({exc})") from exc
        dinfo = members.get(f"{prefix}data/{st.key}")
        if dinfo is None:
            raise CorruptFileError(path, f"storage {st.key!r} is missing from the archive")
        if dinfo.compress_type != zipfile.ZIP_STORED:
            raise CorruptFileError(path, "compressed storage; torch stores tensors uncompressed")
        itemsize = np.dtype("uint16" if st.dtype == _BF16 else st.dtype).itemsize
        if dinfo.file_size != st.numel * itemsize:
            raise CorruptFileError(path, f"storage holds {dinfo.file_size} bytes, the pickle says "
                                   f"{st.numel} x {itemsize}")
        if math.prod(shape) and offset + sum((d - 1) * s for d, s in zip(shape, stride)) >= st.numel:
            raise CorruptFileError(path, "the tensor's view reaches past its storage")
        start = _data_start(f, dinfo, path)
        if start + dinfo.file_size > size:
            raise CorruptFileError(path, "truncated: the storage ends past the end of the file")
        return PtLayout(st.dtype, shape, stride, offset, start, st.numel, order != b"big")


def _data_start(f: Any, info: zipfile.ZipInfo, path: str) -> int:
    """Byte offset of a stored member's data: after its local header (name and extra field lengths read there)."""
    f.seek(info.header_offset)
    head = f.read(30)
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise CorruptFileError(path, "damaged .pt archive (bad local file header)")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    return info.header_offset + 30 + name_len + extra_len


@lru_cache(maxsize=4096)
def cached_layout(path: str, size: int, mtime_ns: int) -> PtLayout:
    """:func:`read_layout`, keyed by the file's identity."""
    return read_layout(path)


def _widen(raw: np.ndarray, lay: PtLayout) -> np.ndarray:
    if lay.dtype == _BF16:
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(lay.np_dtype, copy=False)


def read_array(path: str, lay: PtLayout) -> np.ndarray:
    """All values of the tensor, as a numpy array in native byte order."""
    rd = lay.raw_dtype
    with open_regular(path) as f:
        f.seek(lay.data_start)
        buf = f.read(lay.numel * rd.itemsize)
    if len(buf) < lay.numel * rd.itemsize:
        raise CorruptFileError(path, "truncated storage (the file shrank while being read)")
    store = np.frombuffer(buf, dtype=rd)
    if lay.contiguous:
        flat = store[lay.offset:lay.offset + lay.size]
        out = flat.reshape(lay.shape)
    else:
        out = np.lib.stride_tricks.as_strided(store[lay.offset:], lay.shape,
                                              tuple(s * rd.itemsize for s in lay.stride), writeable=False)
    return np.array(_widen(out, lay), order="C")


def read_chunks(path: str, lay: PtLayout, n: int) -> Iterator[np.ndarray]:
    """Elements in C order, at most ``n`` at a time (contiguous tensors read piece by piece)."""
    total = lay.size
    if total == 0:
        return
    if not lay.contiguous:
        flat = read_array(path, lay).reshape(-1)
        for i in range(0, total, n):
            yield flat[i:i + n]
        return
    rd = lay.raw_dtype
    n = max(1, int(n))
    with open_regular(path, buffering=0) as f:
        f.seek(lay.data_start + lay.offset * rd.itemsize)
        done = 0
        while done < total:
            k = min(n, total - done)
            want = k * rd.itemsize
            buf = f.read(want)
            while len(buf) < want:
                more = f.read(want - len(buf))
                if not more:
                    raise CorruptFileError(path, "truncated storage (the file shrank while being read)")
                buf += more
            done += k
            yield _widen(np.frombuffer(buf, dtype=rd), lay)
