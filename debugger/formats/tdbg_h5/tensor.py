"""One tensor of an iteration file: index tables parsed once per process, values read in bounded memory."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator, Mapping

import numpy as np

from ...errors import CorruptFileError, DumpError
from ...stats.core import EXTRA_STAT_NAMES, STAT_NAMES
from ..base import TensorHeader, TensorSource
from . import arrays
from . import layout as L
from ..files import open_regular
from .columns import checked, read_table_column, strings
from .handles import open_h5

_INT_STATS = frozenset({"count", "nan", "pos_inf", "neg_inf", "zeros", "positives", "negatives"})


@dataclass(frozen=True)
class GraphTable:
    """The index (and statistics) of one graph in one iteration file, decoded."""

    nodes: list[str]
    op_types: list[str]
    io: list[str]
    slots: list[int]
    dtypes: list[np.dtype]
    dtype_names: list[str]
    shapes: list[tuple[int, ...]]
    nbytes: list[int]
    values: list[str]
    offsets: list[int]           # byte offset of contiguous values in the file, -1: read through HDF5
    digests: list[str]
    stats: np.ndarray | None     # (rows, len(STAT_NAMES)) in STAT_NAMES order
    stats_known: np.ndarray | None = None   # same shape, bool: which statistics a row holds (None: all)
    extra: dict[str, np.ndarray] | None = None   # EXTRA_STAT_NAMES column by name (NaN: absent)


@lru_cache(maxsize=256)
def graph_table(path: str, size: int, mtime_ns: int, graph_id: int) -> GraphTable | None:
    """The table of ``graph_id`` in an iteration file (None when the file holds none of its tensors)."""
    f = open_h5(path, size, mtime_ns)
    group = L.GRAPH_GROUP.format(graph_id)
    try:
        if group not in f:
            return None
        return _decode(f, path, size, group)
    except DumpError:
        raise
    except (OSError, KeyError, ValueError, RuntimeError, TypeError) as exc:
        raise CorruptFileError(path, f"unreadable {group}/index ({exc})") from exc


def _decode(f: Any, path: str, size: int, group: str) -> GraphTable:
    rows = read_table_column(f, f"{group}/index", path)
    want = arrays.index_dtype().names or ()
    if rows.dtype.names is None or any(n not in rows.dtype.names for n in want):
        raise CorruptFileError(path, f"{group}/index lacks columns of tdbg-h5 version {L.VERSION}")
    n = len(rows)
    dtypes, shapes, offsets, sizes = [], [], [], []
    prefix = f"{group}/values/"
    values = strings(rows["values"])
    for i in range(n):
        try:
            dt = np.dtype(rows["dtype"][i].decode("ascii"))
        except (TypeError, ValueError, UnicodeDecodeError) as exc:
            raise CorruptFileError(path, f"{group}/index row {i}: bad dtype") from exc
        shape = tuple(int(d) for d in rows["shape"][i])
        nbytes = math.prod(shape) * dt.itemsize
        if dt.kind not in L.ALLOWED_KINDS or any(d < 0 for d in shape) or int(rows["nbytes"][i]) != nbytes:
            raise CorruptFileError(path, f"{group}/index row {i}: dtype, shape and size disagree")
        if values[i] and not values[i].startswith(prefix):
            raise CorruptFileError(path, f"{group}/index row {i}: values outside {prefix}")
        off = int(rows["offset"][i])
        if off >= 0 and off + nbytes > size:
            raise CorruptFileError(path, f"{group}/index row {i}: values past the end of the file")
        dtypes.append(dt)
        shapes.append(shape)
        sizes.append(nbytes)
        offsets.append(off if values[i] else -1)
    if rows["io"].size and int(rows["io"].max()) > 1:
        raise CorruptFileError(path, f"{group}/index: io code out of range")
    _verify_offsets(f, path, values, offsets)
    stats = known = None
    if f"{group}/stats" in f:
        raw = read_table_column(f, f"{group}/stats", path, n)
        names = [s.decode("ascii") for s in f.attrs.get("stat_names", np.asarray(STAT_NAMES, "S16"))]
        if raw.ndim != 2 or raw.shape[1] != len(names) or set(STAT_NAMES) - set(names):
            raise CorruptFileError(path, f"{group}/stats does not have the columns {', '.join(STAT_NAMES)}")
        order = [names.index(s) for s in STAT_NAMES]
        stats = np.asarray(raw[:, order], np.float64)
        if f"{group}/stats_known" in f:
            mask = read_table_column(f, f"{group}/stats_known", path, n)
            if mask.shape != raw.shape:
                raise CorruptFileError(path, f"{group}/stats_known is not shaped like {group}/stats")
            known = np.asarray(mask[:, order], bool)
    extra = _extra_columns(f, path, group, n)
    return GraphTable(strings(rows["node"]), strings(rows["op_type"]), [L.IO_CODES[int(x)] for x in rows["io"]],
                      [int(x) for x in rows["slot"]], dtypes, [d.name for d in dtypes], shapes, sizes, values, offsets,
                      _digests(rows["digest"], f.attrs.get("version", L.VERSION)), stats, known, extra)


def _extra_columns(f: Any, path: str, group: str, n: int) -> dict[str, np.ndarray] | None:
    """The stats_extra table by column name (files written before it have none; names this tdbg
    does not know are left out)."""
    if f"{group}/stats_extra" not in f:
        return None
    raw = read_table_column(f, f"{group}/stats_extra", path, n)
    names = [s.decode("ascii", "replace") for s in f.attrs.get("extra_stat_names", np.asarray([], "S24"))]
    if raw.ndim != 2 or raw.shape[1] != len(names):
        raise CorruptFileError(path, f"{group}/stats_extra does not have the columns named by extra_stat_names")
    return {name: np.asarray(raw[:, i], np.float64) for i, name in enumerate(names) if name in EXTRA_STAT_NAMES}


def _digests(column: np.ndarray, version: Any) -> list[str]:
    """The stored digests; a version 1 file's (blake2b) tagged so none equals a version 2 one."""
    prefix = L.V1_DIGEST_PREFIX if int(version) < 2 else ""
    return [prefix + d.decode("ascii") if d else "" for d in column]


def _verify_offsets(f: Any, path: str, values: list[str], offsets: list[int]) -> None:
    """Trust the stored byte offsets only if one of them still matches HDF5's (a repack moves data)."""
    for i, off in enumerate(offsets):
        if off >= 0:
            ds = checked(f, values[i], path)
            if ds.id.get_offset() != off or ds.compression or ds.chunks:
                offsets[:] = [-1] * len(offsets)
            return


@dataclass(frozen=True)
class H5Tensor(TensorSource):
    """One tensor of a tdbg-h5 iteration file: row ``row`` of graph ``graph_id``'s index.

    Plain paths and numbers only, so it pickles; identity is the file's path, size and mtime
    plus the dataset. ``dataset`` is "" for a statistics-only tensor.
    """

    path: str
    size: int
    mtime_ns: int
    graph_id: int
    row: int
    dataset: str = ""
    nbytes: int = 0

    @property
    def identity(self) -> str:
        """``path|size|mtime_ns|dataset`` (the index row when no values are stored)."""
        where = self.dataset or f"{L.GRAPH_GROUP.format(self.graph_id)}/index[{self.row}]"
        return f"{self.path}|{self.size}|{self.mtime_ns}|{where}"

    @property
    def location(self) -> str:
        """``file.h5:/dataset``."""
        return f"{self.path}:/{self.dataset or L.GRAPH_GROUP.format(self.graph_id) + f'/index[{self.row}]'}"

    @property
    def stored_bytes(self) -> int:
        """Bytes of the stored values (0 for statistics only)."""
        return self.nbytes if self.dataset else 0

    @property
    def has_values(self) -> bool:
        """False for statistics-only tensors."""
        return bool(self.dataset)

    def _table(self) -> GraphTable:
        t = graph_table(self.path, self.size, self.mtime_ns, self.graph_id)
        if t is None or self.row >= len(t.nodes):
            raise CorruptFileError(self.path, f"no row {self.row} in {L.GRAPH_GROUP.format(self.graph_id)}/index")
        return t

    def header(self) -> TensorHeader:
        """dtype and shape from the index table."""
        t = self._table()
        return TensorHeader(t.dtypes[self.row], t.shapes[self.row])

    def stored_stats(self) -> Mapping[str, float] | None:
        """The row of the statistics table (counts as ints, None where no finite value), None when absent."""
        t = self._table()
        if t.stats is None:
            return None
        out: dict[str, Any] = {}
        known = t.stats_known[self.row] if t.stats_known is not None else None
        for i, (name, v) in enumerate(zip(STAT_NAMES, t.stats[self.row].tolist())):
            if known is not None and not known[i]:
                continue    # not recorded by the dump this one was converted from
            out[name] = int(v) if name in _INT_STATS else (None if math.isnan(v) else v)
        return out

    def stored_extras(self) -> Mapping[str, float]:
        """The statistics of :data:`debugger.stats.EXTRA_STAT_NAMES` stored for this tensor."""
        t = self._table()
        if not t.extra:
            return {}
        out = {name: float(col[self.row]) for name, col in t.extra.items()}
        return {k: v for k, v in out.items() if not math.isnan(v)}

    def digest(self) -> str | None:
        """blake2b-128 of dtype, shape and C-order bytes (see ``arrays.Digest``)."""
        return self._table().digests[self.row] or None

    def array(self, mmap: bool = True) -> np.ndarray:
        """All values, read into memory (HDF5 data is not memory-mapped) and checked against the stored digest."""
        if not self.has_values:
            raise self._no_values()
        t = self._table()
        out = np.empty(t.shapes[self.row], _little(t.dtypes[self.row]))
        if out.size:
            self._read_checked(t, out)
        return out

    def _read_checked(self, t: GraphTable, out: np.ndarray) -> None:
        """Fill ``out`` with the values whose bytes match the stored digest: at the stored offset, else
        through HDF5 by name (an edit in place can move a dataset and leave the offset stale)."""
        off = t.offsets[self.row]
        try:
            if off >= 0:
                with self._open_raw() as fh:
                    _pread_exact(fh, memoryview(out.reshape(-1).view(np.uint8)), off, self.path)
                if self._matches(t, out.reshape(-1)):
                    return
                t.offsets[self.row] = -1    # stale (or the bytes changed): HDF5 by name from now on
            self._dataset().read_direct(out)
        except (OSError, ValueError, RuntimeError, TypeError) as exc:
            raise CorruptFileError(self.location, f"unreadable values ({exc})") from exc
        if not self._matches(t, out.reshape(-1)):
            raise self._changed()

    def _matches(self, t: GraphTable, flat: np.ndarray) -> bool:
        """Whether ``flat`` (all values, C order) has the stored digest (True when none is stored)."""
        check = _DigestCheck(t.digests[self.row], t.dtypes[self.row], t.shapes[self.row])
        check.update(flat)
        return check.ok()

    def _changed(self) -> CorruptFileError:
        """The error naming the file and dataset whose bytes no longer have the stored digest."""
        return CorruptFileError(self.location, "changed since it was written: its digest does not match")

    def _open_raw(self) -> Any:
        """The file for plain reads at an offset, checked to be the one the index was read from."""
        fh = open_regular(self.path, buffering=0)   # a FIFO put in its place must not block
        st = os.fstat(fh.fileno())
        if st.st_size != self.size or st.st_mtime_ns != self.mtime_ns:
            fh.close()
            raise CorruptFileError(self.path, "changed since the dump was listed (re-open the dump)")
        return fh

    def _dataset(self) -> Any:
        f = open_h5(self.path, self.size, self.mtime_ns)
        ds = checked(f, self.dataset, self.path)
        t = self._table()
        if ds.shape != t.shapes[self.row] or ds.dtype.kind != t.dtypes[self.row].kind:
            raise CorruptFileError(self.location, "dataset shape or dtype disagrees with the index")
        return ds

    def chunks(self, n: int) -> Iterator[np.ndarray]:
        """Elements in C order, at most ``n`` at a time, checked against the stored digest as they are read:
        a mismatch raises before the last piece is handed out, so no verdict is made of changed bytes."""
        if not self.has_values:
            raise self._no_values()
        t = self._table()
        total = math.prod(t.shapes[self.row])
        if total == 0:
            return
        n = max(1, int(n))
        if 0 <= t.offsets[self.row] and t.nbytes[self.row] < L.CHUNKED_MIN_BYTES:
            # contiguous values are small: read whole and checked before any piece goes out, so a stale
            # offset can still fall back to HDF5
            flat = np.empty(total, _little(t.dtypes[self.row]))
            self._read_checked(t, flat.reshape(t.shapes[self.row]))
            for i in range(0, total, n):
                yield flat[i:i + n]
            return
        yield from self._streamed(t, total, n)

    def _streamed(self, t: GraphTable, total: int, n: int) -> Iterator[np.ndarray]:
        """The values through HDF5 block by block into one reused buffer, hashed as they come."""
        shape = t.shapes[self.row]
        check = _DigestCheck(t.digests[self.row], t.dtypes[self.row], shape)
        buf = np.empty(min(total, n), _little(t.dtypes[self.row]))
        done = 0
        try:
            ds = self._dataset()   # holds the file open even if the handle cache drops it meanwhile
            for index, bshape in arrays.shape_blocks(shape, n):
                k = math.prod(bshape)
                if k == 0:
                    continue
                piece = buf[:k]
                ds.read_direct(piece.reshape(bshape), source_sel=index)
                check.update(piece)
                done += k
                # checked before the last piece goes out: a consumer zipping two tensors stops asking
                # for more once one of them ends
                if done == total and not check.ok():
                    raise self._changed()
                yield piece
        except (OSError, ValueError, RuntimeError, TypeError) as exc:
            raise CorruptFileError(self.location, f"unreadable values ({exc})") from exc


class _DigestCheck:
    """A stored digest, computed again over the bytes as they are read (xxh3 at ~30 GB/s: a small cost)."""

    def __init__(self, stored: str, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self._hash: Any = None       # None: no digest stored (a statistics row made on a device), nothing to check
        if stored.startswith(L.V1_DIGEST_PREFIX):
            self._want, self._hash = stored[len(L.V1_DIGEST_PREFIX):], arrays.v1_hasher(dtype, shape)
        elif stored:
            self._want, self._hash = stored, arrays.hasher(dtype, shape)

    def update(self, flat: np.ndarray) -> None:
        """Add the next C-order piece (little-endian, as read)."""
        if self._hash is not None:
            self._hash.update(flat.view(np.uint8))

    def ok(self) -> bool:
        """Whether the bytes so far have the stored digest (True when none is stored)."""
        return self._hash is None or self._hash.hexdigest() == self._want


def _little(dt: np.dtype) -> np.dtype:
    """``dt`` little-endian, as the values are stored."""
    return dt.newbyteorder("<") if dt.byteorder != "|" else dt


def _pread_exact(fh: Any, raw: memoryview, offset: int, path: str) -> None:
    """Fill ``raw`` from byte ``offset`` of ``fh`` (CorruptFileError when the file ends first)."""
    fh.seek(offset)
    got = 0
    while got < len(raw):
        k = fh.readinto(raw[got:])
        if not k:
            raise CorruptFileError(path, "values end past the end of the file (truncated?)")
        got += k
