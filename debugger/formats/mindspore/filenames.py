"""The one parser of MindSpore tensor file names, for every version, read right to left."""
from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, NamedTuple

from ..files import is_number

if TYPE_CHECKING:   # numpy loads where a dtype is made, not where names are parsed
    import numpy as np

# {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}.{input|output}.{slot}.{format}[.{dtype}].npy
# op_name may itself contain dots, so every field but op_type is taken from the right.
_IO = {"input", "output"}
_FORMAT_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\Z")
_KNOWN_FORMATS = {"DefaultFormat", "NCHW", "NHWC", "NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ", "ND"}

# MindSpore's dtype spellings in file names (2.4+) mapped to numpy; both "Float32" and
# "float16" styles occur.
_DTYPES = {
    "bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "float32": "float32", "float64": "float64",
    "bfloat16": "bfloat16", "complex64": "complex64", "complex128": "complex128",
}


class TensorFileName(NamedTuple):
    """The fields of one tensor file name (a tuple: tens of thousands are made per dump)."""

    op_type: str
    op_name: str
    task_id: int
    stream_id: int
    timestamp: int
    io: str
    slot: int
    format: str
    dtype: str | None  # numpy dtype name when the name carries one (MindSpore >= 2.4)


def dtype_from_field(field: str) -> str | None:
    """Numpy dtype name for a file-name dtype field such as ``Float32``, or None if unknown."""
    return _DTYPES.get(field.lower())


def parse_tensor_file_name(name: str) -> TensorFileName | None:
    """Parse a tensor file name; None when it matches no known grammar."""
    if not name.endswith(".npy"):
        return None
    parts = name[:-4].split(".")
    if len(parts) < 8:
        return None
    dtype: str | None = None
    # With a dtype field the io word sits 4th from the right, without it 3rd.
    if parts[-4] in _IO and len(parts) >= 9:
        dtype_field = parts[-1]
        dtype = dtype_from_field(dtype_field)
        if dtype is None:
            return None
        parts = parts[:-1]
    if parts[-3] not in _IO:
        return None
    fmt, slot, io = parts[-1], parts[-2], parts[-3]
    ts, stream, task = parts[-4], parts[-5], parts[-6]
    if not (is_number(slot) and is_number(ts) and is_number(stream) and is_number(task)):
        return None
    if fmt not in _KNOWN_FORMATS and not _FORMAT_RE.match(fmt):
        return None
    op_type = parts[0]
    op_name = ".".join(parts[1:-6])
    if not op_type or not op_name:
        return None
    return TensorFileName(op_type, op_name, int(task), int(stream), int(ts), io, int(slot), fmt, dtype)


# For parse_tensor_file_names: the usual spellings of the dtype field (others: parse_tensor_file_name),
# and the four numbers and the format of a name's tail checked in one match.
_DTYPE_SPELLINGS = {**_DTYPES, **{k.capitalize(): v for k, v in _DTYPES.items()}, "BFloat16": "bfloat16",
                    "UInt8": "uint8", "UInt16": "uint16", "UInt32": "uint32", "UInt64": "uint64"}
_IO_WORDS = {w: w for w in _IO}
_TAIL = re.compile(r"[0-9]{1,18}\.[0-9]{1,18}\.[0-9]{1,18}\.[0-9]{1,18}\.[A-Za-z][A-Za-z0-9_]*", re.ASCII).fullmatch


def parse_tensor_file_names(names: list[str]) -> list[TensorFileName | None]:
    """:func:`parse_tensor_file_name` of each name, in order; faster for many names (a folder's)."""
    # The usual names are taken apart inline; any name this loop is not sure of goes through
    # parse_tensor_file_name itself, so both agree on every name (tests/test_filenames_many.py checks it).
    out: list[TensorFileName | None] = []
    append = out.append
    make = TensorFileName._make
    io_words, spellings, tail = _IO_WORDS, _DTYPE_SPELLINGS, _TAIL
    # One string object per distinct op name (it recurs in every iteration): less memory per file, and the
    # look-ups that match names to nodes find its hash computed already. The io word: one of two constants.
    intern = sys.intern
    for n in names:
        p = n.rsplit(".", 8)   # head, task, stream, timestamp, io, slot, format, dtype, npy
        io = io_words.get(p[4]) if len(p) == 9 else None
        if io is not None and p[8] == "npy":
            head, task, stream, ts, _, slot, fmt, dtype = p[:8]
            dtype = spellings.get(dtype)
        else:
            p = n.rsplit(".", 7)
            io = io_words.get(p[4]) if len(p) == 8 else None
            if io is None or p[7] != "npy":
                append(parse_tensor_file_name(n))
                continue
            head, task, stream, ts, _, slot, fmt = p[:7]
            dtype = None
        i = head.find(".")
        if (i <= 0 or i == len(head) - 1 or (dtype is None and len(p) == 9)
                or tail(f"{task}.{stream}.{ts}.{slot}.{fmt}") is None):
            append(parse_tensor_file_name(n))
            continue
        append(make((head[:i], intern(head[i + 1:]), int(task), int(stream), int(ts), io, int(slot), fmt, dtype)))
    return out


def numpy_dtype(name: str | None) -> np.dtype | None:
    """A numpy dtype for a dtype name, None when numpy lacks it (bfloat16)."""
    if name is None:
        return None
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        return None
