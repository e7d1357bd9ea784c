"""Reading tdbg-h5 dumps: recognise a root, list each rank once, hand out records and H5Tensors."""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import CorruptFileError, DumpError, NotADumpError
from ...common.selection import ranges_text
from ..base import DumpSource, Format, RankInfo, RankReader, SeriesSource, TensorRecord
from ..files import FileDigest, hash_entries
from ..parallel import RankLayout, layout_from_dict
from ..records import LEVEL_OPS, GraphRecord, IterationFacts
from . import layout as L
from .detect import read_json as _read_json
from .detect import marker_missing, root_of, why_not
from .handles import open_checked, open_h5

if TYPE_CHECKING:
    from .series import SeriesReader


@dataclass(frozen=True)
class _File:
    """A data file as listed: its path, size and mtime (the identity every cache keys on)."""

    path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class _IterationInfo:
    file: _File
    graphs: frozenset[int]
    ran: frozenset[int]
    count: int
    facts: IterationFacts | None = None


class H5RankReader(RankReader):
    """One ``rank_R`` folder; lists it once, opens iteration files only when asked."""

    def __init__(self, rank: int, path: str) -> None:
        self.rank = rank
        self.path = path
        self.warnings: list[str] = []
        self._graph_files: dict[int, _File] | None = None
        self._iteration_files: dict[int, _File] = {}
        self._iters: dict[int, _IterationInfo] | None = None
        self._graphs: dict[int, tuple[GraphRecord, list[int], str] | None] = {}
        self._info: RankInfo | None = None
        self._series: "SeriesReader | None" = None
        self._series_mtime: int | None = None     # the series folder's, when it was listed

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def _list(self) -> dict[int, _File]:
        """One scandir of the rank folder: graph and iteration files, warnings for the rest."""
        if self._graph_files is not None:
            return self._graph_files
        self._graph_files = {}
        try:
            entries = sorted(os.scandir(self.path), key=lambda e: e.name)
        except OSError as exc:
            self._warn(f"{self.path}: cannot list: {exc.strerror or exc}")
            return self._graph_files
        for e in entries:
            if L.TEMP_RE.match(e.name):
                self._warn(f"{e.path}: incomplete file left by a writer (still running, or died); ignored")
                continue
            g, it = L.GRAPH_RE.match(e.name), L.ITERATION_RE.match(e.name)
            if not (g or it):
                if e.name.endswith(".h5"):   # looks like ours but is not (iteration_²0.h5, graph_x.h5)
                    self._warn(f"{e.path}: not a tdbg-h5 graph_G.h5 or iteration_N.h5 name; skipped")
                continue
            try:
                st = os.stat(e.path)
            except OSError as exc:
                self._warn(f"{e.path}: cannot read: {exc.strerror or exc}; skipped")
                continue
            if not stat.S_ISREG(st.st_mode):
                self._warn(f"{e.path}: not a regular file; skipped")
                continue
            f = _File(e.path, st.st_size, st.st_mtime_ns)
            if g:
                self._graph_files[int(g.group(1))] = f
            else:
                self._iteration_files[int(it.group(1))] = f  # type: ignore[union-attr]
        return self._graph_files

    def _iterations(self) -> dict[int, _IterationInfo]:
        """The attributes of every iteration file (opened once; an unreadable one is a warning)."""
        if self._iters is not None:
            return self._iters
        self._list()
        self._iters = {}
        import numpy as np   # here, not above: opening a dump and its fingerprint need no numpy

        for it, f in sorted(self._iteration_files.items()):
            try:
                h = open_h5(f.path, f.size, f.mtime_ns)
                a = h.attrs
                if a.get("format") != L.FORMAT_NAME or a.get("kind") != "iteration":
                    raise CorruptFileError(f.path, "not a tdbg-h5 iteration file")
                if int(a.get("version", 0)) > L.VERSION:
                    raise CorruptFileError(f.path, f"version {a.get('version')} is newer than this tdbg reads")
                graphs = frozenset(int(x) for x in np.asarray(a.get("graphs", [])).reshape(-1))
                ran = frozenset(int(x) for x in np.asarray(a.get("ran", [])).reshape(-1))
                self._iters[it] = _IterationInfo(f, graphs, ran, int(a.get("count", 0)), _facts(f.path, a))
            except DumpError as exc:
                self._warn(f"{exc}; skipped")
            except (OSError, KeyError, ValueError, RuntimeError, TypeError) as exc:
                self._warn(f"{f.path}: unreadable ({exc}); skipped")
        return self._iters

    def info(self) -> RankInfo:
        """What ``rank.json`` says."""
        if self._info is None:
            path = os.path.join(self.path, L.RANK_JSON)
            try:
                raw = _read_json(path)
                if not isinstance(raw, dict):
                    raise CorruptFileError(path, "not a JSON object")
            except DumpError as exc:
                self._warn(str(exc))
                raw = {}
            self._info = RankInfo(raw.get("framework"), raw.get("framework_version"), raw.get("device_target"),
                                  raw.get("saved"), raw.get("net"), raw, layout=self._layout(raw, path),
                                  runs=_runs(raw))
        return self._info

    def _layout(self, raw: dict, path: str) -> RankLayout | None:
        """The parallel layout ``rank.json`` records (None, with a warning, when it is damaged)."""
        if raw.get("layout") is None:
            return None
        try:
            return layout_from_dict(raw["layout"])
        except ValueError as exc:
            self._warn(f"{path}: layout unreadable ({exc}); the rank's tensors are read as they are, not as shards")
            return None

    def graph_ids(self) -> list[int]:
        """Graphs with a graph file or tensors."""
        ids = set(self._list())
        for info in self._iterations().values():
            ids |= info.graphs
        return sorted(ids)

    def _graph(self, graph_id: int) -> tuple[GraphRecord, list[int], str] | None:
        if graph_id not in self._graphs:
            f = self._list().get(graph_id)
            got = None
            if f is None:
                self._missing_graph(graph_id)
            else:
                try:
                    from .graphfile import read_graph   # numpy with it: when a graph is read

                    h = open_checked(f.path, f.size, f.mtime_ns)
                    try:
                        got = read_graph(h, f.path)
                    finally:
                        h.close()
                except DumpError as exc:
                    self._warn(f"{exc}; graph {graph_id} skipped")
                except (OSError, KeyError, ValueError, RuntimeError, TypeError) as exc:
                    self._warn(f"{f.path}: unreadable graph ({exc}); skipped")
            self._graphs[graph_id] = got
        return self._graphs[graph_id]

    def _missing_graph(self, graph_id: int) -> None:
        """Say that iterations hold tensors of a graph whose file is gone (a partial copy)."""
        its = self.iterations(graph_id)
        if its:
            self._warn(f"{os.path.join(self.path, L.graph_file_name(graph_id))}: missing, but iteration(s) "
                       f"{ranges_text(its)} hold tensors of graph {graph_id}: without it their nodes, kinds and "
                       "order are unknown, and the watchpoints that need them (weights, gradients, activations, "
                       "NaN origin) do not check them")

    def graph_key(self, graph_id: int) -> str | None:
        """The content digest the writer stored."""
        g = self._graph(graph_id)
        return None if g is None else g[2] or None

    def graph_level(self, graph_id: int) -> str:
        """The level the recorder stored with the graph."""
        g = self._graph(graph_id)
        return LEVEL_OPS if g is None else g[0].level

    def read_graph(self, graph_id: int) -> GraphRecord | None:
        """The GraphRecord as written."""
        g = self._graph(graph_id)
        return None if g is None else g[0]

    def iterations(self, graph_id: int) -> list[int]:
        """Iterations whose file holds tensors of the graph."""
        return sorted(it for it, info in self._iterations().items() if graph_id in info.graphs)

    def run_history(self, graph_id: int) -> list[int]:
        """The graph file's run history plus every iteration file that says the graph ran."""
        g = self._graph(graph_id)
        runs = set(g[1]) if g else set()
        runs |= {it for it, info in self._iterations().items() if graph_id in info.ran}
        return sorted(runs)

    def iteration_facts(self, iteration: int) -> IterationFacts | None:
        """The recorder's facts about the iteration (steps that did not run, a loss scaler's check)."""
        info = self._iterations().get(iteration)
        return None if info is None else info.facts

    def tensors(self, graph_id: int, iteration: int, graph: GraphRecord | None) -> list[TensorRecord]:
        """One TensorRecord per index row; ``matched`` when the node is in ``graph``."""
        from .tensor import H5Tensor, graph_table   # numpy and h5py with it: opening and the fingerprint need neither

        info = self._iterations().get(iteration)
        if info is None or graph_id not in info.graphs:
            return []
        f = info.file
        try:
            t = graph_table(f.path, f.size, f.mtime_ns, graph_id)
        except DumpError as exc:
            self._warn(f"{exc}; skipped")
            return []
        if t is None:
            return []
        names = {n.name for n in graph.nodes} if graph is not None else set()
        out = []
        for i, node in enumerate(t.nodes):
            src = H5Tensor(f.path, f.size, f.mtime_ns, graph_id, i, t.values[i], t.nbytes[i])
            out.append(TensorRecord(node, t.op_types[i], t.io[i], t.slots[i], src, t.dtype_names[i],
                                    node in names))
        return out

    def series(self) -> "SeriesSource | None":
        """The rank's ``series`` folder (None when it has no segment), listed again when a running writer
        added a segment since (one stat: a followed run shows its new steps)."""
        from .series import SERIES_DIR, SeriesReader

        try:
            mtime: int | None = os.stat(os.path.join(self.path, SERIES_DIR)).st_mtime_ns
        except OSError:
            mtime = None
        if self._series is None or mtime != self._series_mtime:
            self._series, self._series_mtime = SeriesReader(self.path), mtime
            self.warnings.extend(w for w in self._series.warnings if w not in self.warnings)
            if not self._series.segments and self._series_promised():
                self._warn(f"{os.path.join(self.path, SERIES_DIR)}: the rank was recorded with a per-step series "
                           "(Recorder(series=True)), but no segment of it reached the disk: the process ended "
                           "before its first write (about a second in), or writing it failed")
        return self._series if self._series.segments else None

    def _series_promised(self) -> bool:
        """Whether the recorder that wrote the rank was asked for a per-step series (its metadata says)."""
        meta = (self.info().raw or {}).get("metadata")
        return isinstance(meta, dict) and meta.get("series") is True

    def tensor_file_count(self) -> int:
        """Tensors listed in the readable iteration files."""
        return sum(info.count for info in self._iterations().values())

    def tensor_bytes(self) -> int:
        """Bytes of the iteration files."""
        self._list()
        return sum(f.size for f in self._iteration_files.values())

    def fingerprint(self) -> str:
        """blake2b of every entry's name, size and mtime (the writer's lock file aside)."""
        return self.stamp()[0]

    def stamp(self) -> tuple[str, float | None]:
        """(fingerprint, newest mtime) of the rank folder's entries, in one listing."""
        h = FileDigest()
        hash_entries(h, self.path, skip=frozenset({L.LOCK_FILE}))
        return h.stamp()


class TdbgH5Format(Format):
    """tdbg's own HDF5 dump: ``tdbg_dump.json`` and ``rank_R/{rank.json, graph_G.h5, iteration_I.h5}``."""

    name = L.FORMAT_NAME
    description = "tdbg's own HDF5 dump (docs/tdbg-h5-format.md)"

    def root_of(self, path: str) -> str | None:
        """``path`` when it holds the marker, its parent when it is a ``rank_R`` folder of such a root."""
        return root_of(path)

    def why_not(self, path: str) -> str:
        """The missing or wrong marker, in a few words."""
        return why_not(path)

    def open(self, root: str, path: str) -> DumpSource:
        """Readers for every ``rank_R`` of ``root``, or only the one ``path`` names."""
        root = os.path.abspath(root)
        said: list[str] = []
        if marker_missing(root):    # each file still carries and checks its own version
            said.append(f"{os.path.join(root, L.MARKER)}: missing; read as a tdbg-h5 dump, which its rank "
                        f"folders' {L.RANK_JSON} say it is (copied without its marker?)")
        else:
            _check_marker(root, self.why_not(root))
        p = os.path.abspath(path)
        m = L.RANK_RE.match(os.path.basename(p.rstrip(os.sep)))
        if p != root and m and os.path.dirname(p.rstrip(os.sep)) == root:
            ranks = [(int(m.group(1)), p)]
        else:
            try:
                ranks = sorted((int(mm.group(1)), e.path) for e in os.scandir(root)
                               if (mm := L.RANK_RE.match(e.name)) and e.is_dir(follow_symlinks=False))
            except OSError as exc:   # permissions: refused naming the folder, not an internal error
                raise DumpError(root, f"cannot list: {exc.strerror or exc}") from exc
        if not ranks:
            raise NotADumpError(root, "tdbg-h5 dump without any rank_R folder")
        return DumpSource(root, L.FORMAT_NAME, [H5RankReader(r, d) for r, d in ranks], warnings=said)


def _check_marker(root: str, why_not_text: str) -> None:
    """The marker says tdbg-h5, in a version this tdbg reads (else the error naming it)."""
    marker = _read_json(os.path.join(root, L.MARKER))
    if not isinstance(marker, dict) or marker.get("format") != L.FORMAT_NAME:
        raise NotADumpError(root, f"not a tdbg-h5 dump ({why_not_text})")
    version = marker.get("version")
    if not isinstance(version, int) or version > L.VERSION:
        raise DumpError(os.path.join(root, L.MARKER), f"tdbg-h5 version {version!r}; this tdbg reads up to {L.VERSION}")


FORMAT = TdbgH5Format()


def _facts(path: str, attrs: Any) -> IterationFacts | None:
    """The iteration file's ``facts`` attribute (absent: None; malformed: the file is damaged)."""
    text = attrs.get("facts")
    if text is None:
        return None
    try:
        d = json.loads(text.decode() if isinstance(text, bytes) else str(text))
        if not isinstance(d, dict):
            raise ValueError("not an object")
        return IterationFacts.from_dict(d)
    except ValueError as exc:
        raise CorruptFileError(path, f"malformed 'facts' attribute ({exc})") from None


def _runs(raw: dict) -> list[dict[str, Any]]:
    """The runs the recorder lists in ``rank.json`` (``metadata.runs``: one per ``Recorder(resume=True)``
    restart, each with the iteration where it began), in order; [] when it lists one or none."""
    meta = raw.get("metadata")
    runs = meta.get("runs") if isinstance(meta, dict) else None
    if not isinstance(runs, list):
        return []
    good = [dict(r) for r in runs if isinstance(r, dict) and isinstance(r.get("first_iteration"), int)
            and not isinstance(r.get("first_iteration"), bool)]
    return sorted(good, key=lambda r: r["first_iteration"]) if len(good) > 1 else []
