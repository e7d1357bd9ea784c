"""The one writer of tdbg-h5 dumps: every recorder (and every converter) writes through it.

One :class:`DumpWriter` per rank and process. Each file is written under a hidden temporary name
and renamed when complete, so a reader (or a crash) never leaves half a file under a real name.
"""
from __future__ import annotations

import functools
import json
import math
import operator
import os
import re
from types import TracebackType
from typing import Any, Iterable, Mapping, Sequence

import h5py
import numpy as np

from ...common.atomic import write_json_atomic
from ...errors import DumpError
from ...stats.core import CHUNK, EXTRA_STAT_NAMES, STAT_NAMES, Stats, c_order_chunks, stats_of_chunks
from ..base import BOTH, STATISTICS, VALUES
from ..parallel import RankLayout, layout_to_dict
from ..records import GraphRecord, IterationFacts
from . import arrays
from . import layout as L
from . import memfile, repeatfile
from .graphfile import write_graph

_SAVED = (VALUES, STATISTICS, BOTH)
_COMPRESSION = (None, "gzip", "lzf")
_HEX = set("0123456789abcdef")
_ALL_STATS = frozenset(STAT_NAMES)
_ALL_KNOWN = [True] * len(STAT_NAMES)     # shared by complete rows: only ever read
_IO = {name: code for code, name in enumerate(L.IO_CODES)}
_DIGEST = re.compile(f"[0-9a-f]{{{2 * L.DIGEST_SIZE}}}")
# (graph_id, node, op_type, io, slot, stats, digest, dtype, shape, extra): a statistics-only tensor
_STATS_OF = operator.itemgetter(*STAT_NAMES)
StatisticsRow = tuple[int, str, str, str, int, Mapping[str, "float | None"], "str | None", str, tuple[int, ...],
                      "Mapping[str, float] | None"]


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json_atomic(path: str, obj: Any, durable: bool) -> None:
    """Write ``obj`` as JSON under the format's temporary name (readers skip it), then rename it over ``path``."""
    write_json_atomic(path, obj, tmp=L.temp_name(path), durable=durable, indent=1, sort_keys=True)


def _ensure_marker(root: str) -> None:
    """Create ``tdbg_dump.json`` if absent (first writer wins: link() fails when it exists)."""
    path = os.path.join(root, L.MARKER)
    want = {"format": L.FORMAT_NAME, "version": L.VERSION}
    if not os.path.exists(path):
        tmp = L.temp_name(path)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(want, f)
        try:
            os.link(tmp, path)           # atomic and never replaces another writer's marker
        except FileExistsError:
            pass
        except OSError:                  # file systems without hard links: same content, so replace
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    try:
        with open(path, encoding="utf-8") as f:
            have = json.load(f)
    except (OSError, ValueError) as exc:
        raise DumpError(path, f"unreadable dump marker ({exc})") from exc
    if not isinstance(have, dict) or have.get("format") != L.FORMAT_NAME:
        raise DumpError(path, f"not a {L.FORMAT_NAME} dump marker; refusing to write into it")
    if have.get("version") != L.VERSION:
        raise DumpError(path, f"dump is version {have.get('version')}, this writer writes {L.VERSION}")


class DumpWriter:
    """Writes one rank of a tdbg-h5 dump: rank metadata, graphs, one file per iteration.

    ``saved`` says what each tensor keeps: ``"values"`` (values and digest),
    ``"statistics"`` (statistics and digest, ~100x smaller) or ``"values+statistics"``.
    Large tensors are chunked and, with ``compression`` ("gzip" or "lzf"), compressed.
    ``durable`` fsyncs every file before its rename (survives power loss, not only a crash).
    """

    @staticmethod
    def is_digest(digest: object) -> bool:
        """Whether ``digest`` is one of this version's (xxh3-128 of dtype, shape and bytes, in hex):
        another format's checksum (msprobe's md5 with dtype and shape) is not, and is left out."""
        return isinstance(digest, str) and len(digest) == 2 * L.DIGEST_SIZE and not set(digest) - _HEX

    def __init__(self, root: str | os.PathLike[str], rank: int, saved: str = VALUES, *,
                 framework: str | None = None, framework_version: str | None = None,
                 device_target: str | None = None, net: str | None = None,
                 metadata: Mapping[str, Any] | None = None, compression: str | None = None,
                 compression_opts: int | None = None, durable: bool = False,
                 layout: RankLayout | None = None, in_memory: bool | None = None) -> None:
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            raise ValueError(f"rank must be an int >= 0, got {rank!r}")
        if saved not in _SAVED:
            raise ValueError(f"saved must be one of {', '.join(_SAVED)}, got {saved!r}")
        if compression not in _COMPRESSION:
            raise ValueError(f"compression must be None, 'gzip' or 'lzf', got {compression!r}")
        if compression_opts is not None and compression != "gzip":
            raise ValueError("compression_opts (a gzip level 0-9) needs compression='gzip'")
        try:
            json.dumps(dict(metadata or {}))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"metadata must be JSON-serialisable: {exc}") from exc
        self.root = os.path.abspath(os.fspath(root))
        self.rank = rank
        self.saved = saved
        self.compression = compression
        self.compression_opts = compression_opts
        self.durable = durable
        # iteration files built in memory and written whole (memfile.py: a full disk is an OSError, never a
        # crash inside HDF5); None: only statistics-only ones, which are small (a converter's value files
        # can exceed memory); a recorder holds each iteration's values in memory anyway and says True
        self.in_memory = saved == STATISTICS if in_memory is None else bool(in_memory)
        self.rank_dir = os.path.join(self.root, L.rank_dir_name(rank))
        os.makedirs(self.rank_dir, exist_ok=True)
        _ensure_marker(self.root)
        self._lock_fd: int | None = self._lock()
        self._rank_json: dict[str, Any] = {
            "format": L.FORMAT_NAME, "version": L.VERSION, "rank": rank, "saved": saved,
            "framework": framework, "framework_version": framework_version,
            "device_target": device_target, "net": net, "metadata": dict(metadata or {})}
        self.set_layout(layout)
        self._open_iteration: IterationWriter | None = None
        self._template: repeatfile.Template | None = None     # the last statistics-only iteration file

    def set_layout(self, layout: RankLayout | None) -> None:
        """Write ``rank.json`` anew with the rank's parallel layout (None: none known)."""
        self._rank_json["layout"] = None if layout is None else layout_to_dict(layout)
        _write_json_atomic(os.path.join(self.rank_dir, L.RANK_JSON), self._rank_json, self.durable)

    def _lock(self) -> int | None:
        """Hold an exclusive lock on the rank, so two live writers cannot interleave its files."""
        path = os.path.join(self.rank_dir, L.LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl
        except ImportError:              # no flock (Windows): one writer per rank is then the user's rule
            return fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise DumpError(self.rank_dir, "another process is writing this rank") from exc
        return fd

    def _check_open(self) -> None:
        if self._lock_fd is None:
            raise ValueError(f"{self.rank_dir}: the writer is closed")

    def write_graph(self, record: GraphRecord, run_history: Sequence[int] = ()) -> str:
        """Write (or replace) ``graph_{G}.h5`` from a GraphRecord; returns its path."""
        self._check_open()
        if not isinstance(record, GraphRecord):
            raise ValueError(f"write_graph needs a GraphRecord, got {type(record).__name__}")
        if not isinstance(record.graph_id, int) or record.graph_id < 0:
            raise ValueError(f"graph_id must be an int >= 0, got {record.graph_id!r}")
        for n in record.nodes:
            for _, edge in n.inputs:
                if edge not in L.EDGE_CODES:
                    raise ValueError(f"node {n.name}: input edge kind must be 'data' or 'control', got {edge!r}")
        path = os.path.join(self.rank_dir, L.graph_file_name(record.graph_id))
        tmp = L.temp_name(path)
        try:
            f = memfile.in_memory(tmp)       # a graph is small: built in memory (memfile.py)
            try:
                write_graph(f, record, [int(i) for i in run_history])
            except BaseException:
                f.close()
                raise
            memfile.write_image(f, tmp, self.durable)
            self._publish(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    def iteration(self, iteration: int, replace: bool = False, in_memory: bool | None = None) -> "IterationWriter":
        """A context manager collecting one iteration's tensors; the file appears on a clean exit.
        ``in_memory``: build this file in memory (None: as the writer was told)."""
        self._check_open()
        if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
            raise ValueError(f"iteration must be an int >= 0, got {iteration!r}")
        if self._open_iteration is not None:
            raise ValueError(f"iteration {self._open_iteration.iteration} is still open")
        path = os.path.join(self.rank_dir, L.iteration_file_name(iteration))
        if os.path.exists(path) and not replace:
            raise ValueError(f"{path} exists (pass replace=True to write the iteration again)")
        return IterationWriter(self, iteration, path, self.in_memory if in_memory is None else bool(in_memory))

    def _publish(self, tmp: str, path: str) -> None:
        if self.durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
        if self.durable:
            _fsync_dir(self.rank_dir)

    def close(self) -> None:
        """Release the rank (idempotent); files already renamed stay as they are."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "DumpWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class IterationWriter:
    """Tensors of one rank and iteration, written into a temporary file renamed on a clean exit."""

    def __init__(self, writer: DumpWriter, iteration: int, path: str, in_memory: bool = False) -> None:
        self.writer = writer
        self._in_memory = in_memory
        self.iteration = iteration
        self.path = path
        self._tmp = L.temp_name(path)
        self._file: Any = None      # in memory: made at its first use (an iteration like the one before needs none)
        self._active = False
        self._shapes: dict[int, list[tuple[Any, ...]]] = {}    # per graph, each row as repeatfile's shape key sees it
        self._irregular = False     # a row came through add(): this file is never a template
        self._rows: dict[int, list[tuple[Any, ...]]] = {}
        self._stats: dict[int, list[list[float]]] = {}
        self._known: dict[int, list[list[bool]]] = {}
        self._extra: dict[int, dict[int, list[float]]] = {}   # graph -> row -> EXTRA_STAT_NAMES (NaN: absent)
        self._seen: set[tuple[int, str, str, int]] = set()
        self._ran: set[int] = set()
        self._datasets: dict[str, Any] = {}
        self._groups: dict[int, Any] = {}
        self._nbytes = 0
        self._facts: IterationFacts | None = None

    def __enter__(self) -> "IterationWriter":
        if not self._in_memory:
            self._file = h5py.File(self._tmp, "w", libver=L.LIBVER)
        self._active = True
        self.writer._open_iteration = self
        return self

    def _h5(self) -> Any:
        """The file being written (an in-memory one is made here, at its first use)."""
        if self._file is None:
            self._file = memfile.in_memory(self._tmp)
        return self._file

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.writer._open_iteration = None
        self._active = False
        try:
            if exc_type is None:
                self._write_out()
                self.writer._publish(self._tmp, self.path)
            elif self._in_memory:
                if self._file is not None:
                    self._file.close()
            else:
                memfile.close_or_keep(self._file, self._datasets, self._groups)
        finally:
            if os.path.exists(self._tmp):
                os.unlink(self._tmp)

    def _write_out(self) -> None:
        """The finished file under its temporary name: in memory, from the last iteration's image when this one
        has its shape (repeatfile.py), else built and kept as the image the next one may take."""
        durable = self.writer.durable
        if not self._in_memory:
            self._finish()
            memfile.close_or_keep(self._file, self._datasets, self._groups)
            return
        shape = self._shape()
        t = self.writer._template
        if t is not None and shape is not None and shape == t.shape:
            stats = {gid: np.asarray(self._stats[gid], np.float64) for gid in self._rows}
            extra = {gid: self._extra_table(gid) for gid in t.extra}
            digests = {gid: [r[9] for r in rows] for gid, rows in self._rows.items()}
            memfile.write_bytes(repeatfile.refill(t, self.iteration, stats, extra, digests, self._facts), self._tmp, durable)
            return
        self._finish()
        image = memfile.write_image(self._h5(), self._tmp, durable)
        self.writer._template = None if shape is None else repeatfile.Template(
            shape, bytes(image), frozenset(gid for gid in self._rows if self._extra.get(gid)))

    def _shape(self) -> tuple[Any, ...] | None:
        """What an iteration file holds besides the numbers, digests, iteration and facts that repeatfile.refill
        writes: equal for two files that differ only in those (None: a file that is no template: values,
        rows added one by one, no row)."""
        if self._irregular or self._datasets or not self._rows:
            return None
        return (tuple(sorted(self._ran | set(self._rows))),
                tuple((gid, tuple(self._shapes[gid])) for gid in sorted(self._rows)))

    def ran(self, graph_id: int) -> None:
        """Record that a graph ran in this iteration although none of its tensors was dumped."""
        self._ran.add(_check_id(graph_id, "graph_id"))

    def facts(self, facts: IterationFacts) -> None:
        """Store what the run knew about this iteration beyond its tensors (steps that did not run ...)."""
        self._facts = facts

    def add(self, graph_id: int, node: str, op_type: str, io: str, slot: int,
            values: np.ndarray | None = None, *, stats: Stats | Mapping[str, float | None] | None = None,
            digest: str | None = None, dtype: str | np.dtype | None = None,
            shape: Sequence[int] | None = None, extra: Mapping[str, float] | None = None) -> None:
        """Add one tensor: its ``values`` (the writer derives what ``saved`` asks), or, in a
        statistics-only dump, its ``stats``, ``dtype``, ``shape`` and ``digest`` (None: unknown) computed elsewhere.
        ``extra``: statistics of :data:`debugger.stats.EXTRA_STAT_NAMES` that apply to this tensor."""
        if not self._active:
            raise ValueError("add() outside 'with writer.iteration(...)'")
        self._irregular = True
        # the common case (plain ints and strs: a recorder adds hundreds of rows a step) checked first
        if type(graph_id) is not int or graph_id < 0:
            graph_id = _check_id(graph_id, "graph_id")
        if type(slot) is not int or slot < 0:
            slot = _check_id(slot, "slot")
        if type(node) is not str or not node:
            if not isinstance(node, str) or not node:
                raise ValueError(f"node must be a non-empty str, got {node!r}")
        if type(op_type) is not str and not isinstance(op_type, str):
            raise ValueError(f"op_type must be a str, got {op_type!r}")
        if io not in L.IO_CODES:
            raise ValueError(f"io must be 'input' or 'output', got {io!r}")
        key = (graph_id, node, io, slot)
        if key in self._seen:
            raise ValueError(f"{node} {io} {slot} of graph {graph_id} was already added in iteration {self.iteration}")
        saved = self.writer.saved
        want_stats = saved in (STATISTICS, BOTH)
        row = len(self._rows.get(graph_id, []))
        if values is None and saved != STATISTICS:
            raise ValueError(f"saved={saved!r} needs values for {node}")
        given = _stat_row(stats, node) if stats is not None else None   # validated before anything is written
        extra_row = _extra_row(extra, node) if extra else None
        if values is not None:
            if digest is not None:
                raise ValueError("digest is computed from values; pass one only without values")
            a = arrays.little_endian(np.asarray(values))
            if a.dtype.kind not in L.ALLOWED_KINDS:
                raise ValueError(f"{node}: dtype {a.dtype} is not a tensor dtype (bool, int, uint, float, complex)")
            if dtype is not None and np.dtype(dtype) != a.dtype or shape is not None and tuple(shape) != a.shape:
                raise ValueError(f"{node}: dtype/shape arguments disagree with the values")
            store = saved in (VALUES, BOTH)
            name = f"{L.GRAPH_GROUP.format(graph_id)}/values/{row}" if store else ""
            computed, digest = self._consume(a, name, graph_id, row, want_stats and given is None)
            if given is None and computed is not None:
                given = _stat_row(computed, node)
            a_dtype, a_shape = a.dtype, tuple(a.shape)
            if store:
                self._nbytes += a.nbytes
        else:
            if stats is None or dtype is None or shape is None:
                raise ValueError(f"{node}: without values, pass stats, dtype and shape (and a digest when known)")
            if digest is None:
                digest = ""      # not computed (statistics made on a device): stored empty, read as unknown
            elif not DumpWriter.is_digest(digest):
                raise ValueError(f"{node}: digest must be {2 * L.DIGEST_SIZE} lowercase hex characters "
                                 "(see tdbg_h5.arrays.Digest)")
            a_dtype = _dtype(dtype) if isinstance(dtype, (str, np.dtype)) else np.dtype(dtype)
            if a_dtype.kind not in L.ALLOWED_KINDS:
                raise ValueError(f"{node}: dtype {a_dtype} is not a tensor dtype")
            a_shape = tuple(map(int, shape))
            if a_shape and min(a_shape) < 0:
                raise ValueError(f"{node}: negative dimension in shape {a_shape}")
            name = ""
        if want_stats and given is None:
            raise ValueError(f"{node}: saved={saved!r} needs statistics")
        self._seen.add(key)
        self._rows.setdefault(graph_id, []).append(
            (node, op_type, L.IO_CODES.index(io), slot, _dtype_name(a_dtype), np.asarray(a_shape, np.int64),
             name, -1, math.prod(a_shape) * a_dtype.itemsize, digest.encode("ascii")))
        if want_stats:
            row_values, row_known = given  # type: ignore[misc]
            self._stats.setdefault(graph_id, []).append(row_values)
            self._known.setdefault(graph_id, []).append(row_known)
            if extra_row is not None:
                self._extra.setdefault(graph_id, {})[row] = extra_row

    def add_statistics(self, rows: Iterable[StatisticsRow]) -> None:
        """:meth:`add` of many statistics-only tensors, each ``(graph_id, node, op_type, io, slot, stats,
        digest, dtype, shape, extra)``: a recorder adds a hundred and more a step, and the common row
        (every statistic given, a str dtype, a tuple shape) is checked here in a fraction of add's time."""
        if not self._active:
            raise ValueError("add_statistics() outside 'with writer.iteration(...)'")
        quick = self.writer.saved == STATISTICS
        for r in rows:
            if not (quick and self._quick_row(*r)):
                gid, node, op_type, io, slot, stats, digest, dtype, shape, extra = r
                self.add(gid, node, op_type, io, slot, stats=stats, digest=digest, dtype=dtype, shape=shape,
                         extra=extra)

    def _quick_row(self, graph_id: Any, node: Any, op_type: Any, io: Any, slot: Any, stats: Any, digest: Any,
                   dtype: Any, shape: Any, extra: Any) -> bool:
        """One row of :meth:`add_statistics` stored as :meth:`add` stores it; False (nothing done) for a
        row that is not of the common kind, which add then checks in full."""
        io_code = _IO.get(io) if type(io) is str else None
        if type(graph_id) is not int or graph_id < 0 or type(slot) is not int or slot < 0 or \
                type(node) is not str or not node or type(op_type) is not str or io_code is None or \
                type(stats) is not dict or stats.keys() != _ALL_STATS or type(dtype) is not str or \
                type(shape) is not tuple or not (digest is None or type(digest) is str and _DIGEST.fullmatch(digest)):
            return False
        key = (graph_id, node, io, slot)
        a_dtype = _dtype(dtype)
        if key in self._seen or a_dtype.kind not in L.ALLOWED_KINDS or \
                not all(type(d) is int and d >= 0 for d in shape):
            return False
        given = _STATS_OF(stats)
        row_values = [math.nan if v is None else float(v) for v in given] if None in given else list(map(float, given))
        extra_row = _extra_row(extra, node) if extra else None
        self._seen.add(key)
        rows = self._rows.setdefault(graph_id, [])
        if extra_row is not None:
            self._extra.setdefault(graph_id, {})[len(rows)] = extra_row
        nbytes = math.prod(shape) * a_dtype.itemsize
        rows.append((node, op_type, io_code, slot, _dtype_name(a_dtype), _shape_array(shape), "", -1,
                     nbytes, (digest or "").encode("ascii")))
        self._shapes.setdefault(graph_id, []).append((node, op_type, io_code, slot, a_dtype, shape, extra_row is not None))
        self._stats.setdefault(graph_id, []).append(row_values)
        self._known.setdefault(graph_id, []).append(_ALL_KNOWN)
        return True

    def _consume(self, a: np.ndarray, name: str, graph_id: int, row: int,
                 want_stats: bool) -> tuple[Stats | None, str]:
        """``a`` stored (when ``name``) and digested in C-order blocks, then its statistics."""
        d = arrays.Digest(a.dtype, tuple(a.shape))
        ds = None
        if name:
            w = self.writer
            if not self._in_memory:      # HDF5 must never meet a full disk (memfile.py)
                memfile.check_room(w.rank_dir, a.nbytes)
            group = self._groups.get(graph_id)
            if group is None:   # created once: a full path per dataset costs a lookup per level
                group = self._groups[graph_id] = self._h5().require_group(f"{L.GRAPH_GROUP.format(graph_id)}/values")
            if a.nbytes < L.CHUNKED_MIN_BYTES:
                # not ascontiguousarray: it turns a 0-d array into shape (1,)
                ds = group.create_dataset(str(row), data=a if a.flags.c_contiguous else a.copy(order="C"))
                self._datasets[name] = ds
            else:
                ds = group.create_dataset(str(row), shape=a.shape, dtype=a.dtype, chunks=_chunk_shape(a),
                                               compression=w.compression, compression_opts=w.compression_opts)

        for index, block in arrays.c_blocks(a, CHUNK):
            if ds is not None and a.nbytes >= L.CHUNKED_MIN_BYTES and block.size:
                ds.write_direct(block, dest_sel=index)
            d.update(block.reshape(-1))
        # the statistics a scan computes from the stored values, to the bit: its chunks, not the blocks above
        st = stats_of_chunks(c_order_chunks(a))[0] if want_stats else None
        return st, d.hexdigest()

    def _index_table(self, rows: list[tuple[Any, ...]], dt: np.dtype) -> np.ndarray:
        """The index rows as a table, filled column by column (a row at a time costs ~5 us a row)."""
        table = np.empty(len(rows), dt)
        for j, name in enumerate(dt.names or ()):
            if name == "shape":      # variable-length: one array per row, never broadcast
                col = table["shape"]
                for i, r in enumerate(rows):
                    col[i] = r[j]
            else:
                table[name] = [r[j] for r in rows]
        for i, r in enumerate(rows):
            if r[6] in self._datasets:
                off = self._datasets[r[6]].id.get_offset()
                table["offset"][i] = -1 if off is None else off   # contiguous: one plain read
        return table

    def _extra_table(self, gid: int) -> np.ndarray:
        """Graph ``gid``'s stats_extra table (NaN where a row has no such statistic)."""
        table_x = np.full((len(self._rows[gid]), len(EXTRA_STAT_NAMES)), np.nan, np.float64)
        for i, vals in self._extra.get(gid, {}).items():
            table_x[i] = vals
        return table_x

    def _finish(self) -> None:
        """Write the per-graph index and statistics tables and the file's attributes."""
        f = self._h5()
        dt = arrays.index_dtype()
        for gid, rows in self._rows.items():
            g = f.require_group(L.GRAPH_GROUP.format(gid))
            g.create_dataset("index", data=self._index_table(rows, dt))
            if gid in self._stats:
                g.create_dataset("stats", data=np.asarray(self._stats[gid], np.float64).reshape(-1, len(STAT_NAMES)))
                known = np.asarray(self._known[gid], np.uint8).reshape(-1, len(STAT_NAMES))
                if not known.all():   # only where some statistic is unknown: a complete table needs no mask
                    g.create_dataset("stats_known", data=known)
            if self._extra.get(gid):
                g.create_dataset("stats_extra", data=self._extra_table(gid))
        f.attrs.update({
            "format": L.FORMAT_NAME, "version": L.VERSION, "kind": "iteration", "rank": self.writer.rank,
            "iteration": self.iteration, "saved": self.writer.saved,
            "graphs": np.asarray(sorted(self._rows), np.int64),
            "ran": np.asarray(sorted(self._ran | set(self._rows)), np.int64),
            "count": sum(len(r) for r in self._rows.values()), "nbytes": self._nbytes,
            "stat_names": np.asarray(STAT_NAMES, dtype="S16"),
            "extra_stat_names": np.asarray(EXTRA_STAT_NAMES, dtype="S24")})
        if self._facts is not None:
            f.attrs["facts"] = json.dumps(self._facts.to_dict(), sort_keys=True)


@functools.lru_cache(maxsize=256)
def _dtype(dtype: Any) -> np.dtype:
    """``np.dtype(dtype)``, once per distinct argument (a statistics row names its dtype as a str)."""
    return np.dtype(dtype)


@functools.lru_cache(maxsize=4096)
def _shape_array(shape: tuple[int, ...]) -> np.ndarray:
    """A shape as the index stores it, made once per shape (rows only read it)."""
    return np.asarray(shape, np.int64)


@functools.lru_cache(maxsize=256)
def _dtype_name(dtype: np.dtype) -> str:
    """``dtype.name`` (numpy derives it anew, about 5 us, on every access)."""
    return dtype.name


def _check_id(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"{what} must be an int >= 0, got {v!r}")
    return int(v)


def _stat_row(stats: Stats | Mapping[str, float | None], node: str) -> tuple[list[float], list[bool]]:
    """One row of the statistics table in STAT_NAMES order (None, no finite value, is NaN) and which
    of them are known: a mapping may leave some out (another format recorded fewer statistics)."""
    if type(stats) is dict and stats.keys() == _ALL_STATS:
        # every statistic given (what the recorder and convert hand over, a row per tensor): no
        # per-name checks; values still go through float(), so a bad value fails as below
        return [math.nan if v is None else float(v) for v in map(stats.__getitem__, STAT_NAMES)], _ALL_KNOWN
    if not isinstance(stats, (Stats, Mapping)):
        raise ValueError(f"{node}: stats must be a debugger.stats.Stats or a mapping, got {type(stats).__name__}")
    d = stats.to_dict() if isinstance(stats, Stats) else dict(stats)
    unknown = sorted(set(d) - set(STAT_NAMES))
    if unknown:
        raise ValueError(f"{node}: stats has {', '.join(map(str, unknown))}, not among debugger.stats.STAT_NAMES")
    if not d:
        raise ValueError(f"{node}: stats is empty")
    return ([math.nan if d.get(n) is None else float(d[n]) for n in STAT_NAMES],  # type: ignore[arg-type]
            [n in d for n in STAT_NAMES])


def _extra_row(extra: Mapping[str, float], node: str) -> list[float]:
    """One row of the stats_extra table in EXTRA_STAT_NAMES order (NaN: absent)."""
    unknown = sorted(set(extra) - set(EXTRA_STAT_NAMES))
    if unknown:
        raise ValueError(f"{node}: extra has {', '.join(map(str, unknown))}, not among "
                         "debugger.stats.EXTRA_STAT_NAMES")
    return [math.nan if extra.get(n) is None else float(extra[n]) for n in EXTRA_STAT_NAMES]


def _chunk_shape(a: np.ndarray) -> tuple[int, ...] | bool:
    """Whole rows along the first axis, about CHUNK_BYTES per chunk (reads go row block by row block)."""
    row_bytes = a.itemsize * math.prod(a.shape[1:])
    if a.ndim == 0 or row_bytes == 0:
        return True
    if row_bytes <= L.CHUNK_BYTES:
        return (max(1, min(a.shape[0], L.CHUNK_BYTES // row_bytes)),) + tuple(a.shape[1:])
    return True
