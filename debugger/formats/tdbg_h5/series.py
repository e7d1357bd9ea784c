"""The per-step statistics series of a tdbg-h5 rank: every step's statistics of a set of tensors (weights,
gradients, optimizer state) and a few scalars (loss, learning rate, loss scale), for runs of 100,000 steps.

``rank_R/series/steps_FFFFFFFFFF-LLLLLLLLLL.h5`` holds the steps F to L in one immutable segment,
written under a temporary name and renamed when complete (the format's rules 1 and 5): a crash loses
the steps not yet flushed, a reader never sees half a segment, and a followed run shows new segments.
Inside a segment, each statistic is one (tensors x steps) dataset chunked a tensor's row at a time:
one tensor's curve over a run reads one chunk per segment. Readers of older tdbg ignore the folder.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ...errors import CorruptFileError, DumpError
from ...stats.core import COUNT_NAMES, STAT_NAMES
from ..base import SeriesSource
from ..records import SERIES_ROLES, SeriesTensor
from . import layout as L
from . import memfile
from .columns import checked, read_table_column, strings, write_strings

SERIES_DIR = "series"
SEGMENT_RE = re.compile(r"^steps_(\d{10})-(\d{10})\.h5\Z", re.ASCII)
SERIES_FORMAT = "tdbg-h5-series"
SERIES_VERSION = 1
SCALARS = ("loss", "lr", "loss_scale", "grad_norm")
SEGMENT_STEPS = 4096      # steps per segment: 25 segments for 100,000 steps
CAPTURES_FILE = "captures.json"     # why each deep step was taken (the PyTorch recorder's triggers)


def segment_name(first: int, last: int) -> str:
    """``steps_{first:010d}-{last:010d}.h5`` (zero-padded: a plain listing sorts by step)."""
    return f"steps_{first:010d}-{last:010d}.h5"


class SeriesWriter:
    """Appends steps of statistics for a fixed list of tensor names; every ``segment_steps`` steps (and on
    :meth:`flush` and :meth:`close`) the pending steps become one segment file."""

    def __init__(self, rank_dir: str, tensors: Sequence[str], *, roles: Sequence[str] | None = None,
                 params: Sequence[str | None] | None = None, segment_steps: int = SEGMENT_STEPS,
                 compression: str = "gzip") -> None:
        if len(set(tensors)) != len(tensors):
            raise ValueError("tensor names must be distinct")
        self.roles = list(roles) if roles is not None else ["other"] * len(tensors)
        self.params = [p or "" for p in params] if params is not None else [""] * len(tensors)
        if len(self.roles) != len(tensors) or len(self.params) != len(tensors):
            raise ValueError("roles and params need one entry per tensor")
        bad = sorted(set(self.roles) - set(SERIES_ROLES))
        if bad:
            raise ValueError(f"unknown roles {bad}; known: {', '.join(SERIES_ROLES)}")
        self.folder = os.path.join(rank_dir, SERIES_DIR)
        os.makedirs(self.folder, exist_ok=True)
        self.tensors = list(tensors)
        self.segment_steps = max(1, int(segment_steps))
        self.compression = compression
        self._steps: list[int] = []
        self._rows: list[np.ndarray] = []           # per step: (tensors, 13) float64, NaN unknown
        self._scalars: list[list[float]] = []
        self._parts: list[str] = []     # segments :meth:`checkpoint` wrote of the pending steps
        self._checked = 0               # pending steps already in them

    def add(self, step: int, stats: np.ndarray, scalars: Mapping[str, float] | None = None) -> None:
        """One step: ``stats`` is (tensors, 13) in STAT_NAMES order (NaN: unknown); ``scalars`` by name."""
        a = np.array(stats, dtype=np.float64)    # a copy: the caller may fill the same array every step
        if a.shape != (len(self.tensors), len(STAT_NAMES)):
            raise ValueError(f"stats of step {step} have shape {a.shape}, expected {(len(self.tensors), len(STAT_NAMES))}")
        if self._steps and step <= self._steps[-1]:
            raise ValueError(f"step {step} after step {self._steps[-1]}: steps only grow")
        unknown = set(scalars or {}) - set(SCALARS)
        if unknown:
            raise ValueError(f"unknown scalars {sorted(unknown)}; known: {', '.join(SCALARS)}")
        self._steps.append(int(step))
        self._rows.append(a)
        self._scalars.append([float((scalars or {}).get(n, math.nan)) for n in SCALARS])
        if len(self._steps) >= self.segment_steps:
            self.flush()

    def flush(self) -> str | None:
        """Write the pending steps as one segment (None when there are none); returns its path. The
        segments :meth:`checkpoint` wrote of them are removed once it is in place."""
        if not self._steps:
            return None
        path = self._write(0, len(self._steps))
        for part in self._parts:
            if part != path:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(part)
        self._steps, self._rows, self._scalars = [], [], []
        self._parts, self._checked = [], 0
        return path

    def checkpoint(self) -> str | None:
        """Make the pending steps not yet written readable now (a followed run), as a small segment
        of their own, and keep them pending: the next :meth:`flush` writes every pending step as one
        segment and removes these (many small segments would slow every curve read)."""
        if self._checked >= len(self._steps):
            return None
        path = self._write(self._checked, len(self._steps))
        self._parts.append(path)
        self._checked = len(self._steps)
        return path

    def _write(self, first: int, end: int) -> str:
        path = os.path.join(self.folder, segment_name(self._steps[first], self._steps[end - 1]))
        tmp = L.temp_name(path)
        try:
            _write_segment(tmp, self._catalog(), self._steps[first:end], np.stack(self._rows[first:end], axis=1),
                           np.asarray(self._scalars[first:end], dtype=np.float64), self.compression)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    def _catalog(self) -> list[SeriesTensor]:
        return [SeriesTensor(n, r, p or None) for n, r, p in zip(self.tensors, self.roles, self.params)]

    def close(self) -> None:
        """Flush what is pending."""
        self.flush()

    def __enter__(self) -> "SeriesWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_segment(path: str, tensors: list[SeriesTensor], steps: list[int], values: np.ndarray,
                   scalars: np.ndarray, compression: str) -> None:
    """``values``: (tensors, steps, 13); ``scalars``: (steps, len(SCALARS))."""
    opts: dict[str, Any] = {"compression": compression, "shuffle": True} if compression else {}
    n = len(steps)
    f = memfile.in_memory(path)      # statistics: small, built in memory (a full disk: an OSError, memfile.py)
    try:
        f.attrs.update({"format": SERIES_FORMAT, "version": SERIES_VERSION, "first_step": steps[0],
                        "last_step": steps[-1]})
        write_strings(f, "tensors", [t.name for t in tensors])
        write_strings(f, "roles", [t.role for t in tensors])
        write_strings(f, "params", [t.param or "" for t in tensors])
        f.create_dataset("steps", data=np.asarray(steps, dtype="<i8"))
        g = f.create_group("stats")
        for i, name in enumerate(STAT_NAMES):
            col = values[:, :, i]
            if name in COUNT_NAMES:   # -1: unknown (counts are never negative)
                data = np.where(np.isnan(col), -1, col).astype("<i8")
            else:
                data = col.astype("<f4")
            g.create_dataset(name, data=data, chunks=(1, n) if len(tensors) else None, **opts)
        s = f.create_group("scalars")
        for i, name in enumerate(SCALARS):
            s.create_dataset(name, data=scalars[:, i])
    except BaseException:
        f.close()
        raise
    memfile.write_image(f, path, durable=False)


def write_captures(rank_dir: str, captures: Mapping[str, Any]) -> None:
    """Replace the rank's ``series/captures.json`` at once (temporary file, then rename)."""
    folder = os.path.join(rank_dir, SERIES_DIR)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, CAPTURES_FILE)
    tmp = L.temp_name(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(captures, f, allow_nan=False)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@dataclass(frozen=True)
class Segment:
    """One segment file as listed."""

    path: str
    first: int
    last: int
    size: int
    mtime_ns: int


class SeriesReader(SeriesSource):
    """The series of one rank: its segments listed once; curves read a chunk per segment."""

    def __init__(self, rank_dir: str) -> None:
        self.folder = os.path.join(rank_dir, SERIES_DIR)
        self.warnings: list[str] = []
        self.segments = self._list()
        self._names: dict[str, list[SeriesTensor]] = {}

    def _list(self) -> list[Segment]:
        try:
            entries = sorted(os.scandir(self.folder), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.warnings.append(f"{self.folder}: cannot list: {exc.strerror or exc}")
            return []
        out = []
        for e in entries:
            m = SEGMENT_RE.match(e.name)
            if e.name == CAPTURES_FILE:
                continue
            if L.TEMP_RE.match(e.name):
                self.warnings.append(f"{e.path}: incomplete segment left by a writer (still running, or died); ignored")
            elif m is None or not e.is_file(follow_symlinks=False):
                self.warnings.append(f"{e.path}: not a series segment (steps_F-L.h5); skipped")
            else:
                st = e.stat(follow_symlinks=False)
                seg = Segment(e.path, int(m.group(1)), int(m.group(2)), st.st_size, st.st_mtime_ns)
                if out and seg.first <= out[-1].last:   # a run resumed from an earlier checkpoint, say
                    self.warnings.append(f"{seg.path}: its steps overlap {os.path.basename(out[-1].path)}'s; "
                                         "both are read as written")
                out.append(seg)
        return [seg for seg in out if self._usable(seg)]

    def _usable(self, seg: Segment) -> bool:
        """Whether a segment opens and holds its tables as its catalog says (shapes only, no values read);
        a damaged one is left out, named with the steps it loses: the rest of the series is still read."""
        def check(f: Any) -> None:
            names = _segment_catalog(f, seg.path)
            steps = read_table_column(f, "steps", seg.path)
            for stat in STAT_NAMES:         # every segment holds them all (version 1 on)
                self._dataset(f, seg, stat, len(names), len(steps))
            for name in SCALARS:
                if len(checked(f, f"scalars/{name}", seg.path)) != len(steps):
                    raise CorruptFileError(seg.path, f"scalars/{name} does not hold one value per step")
        try:
            self._read(seg, check)
        except DumpError as exc:
            self.warnings.append(f"{exc}; steps {seg.first}-{seg.last} of the series are lost (the other "
                                 "segments are read)")
            return False
        return True

    def captures(self) -> dict[str, Any] | None:
        """Why each deep step was taken (``captures.json``: schedule, runs of deep steps with their level
        and reason, the triggers that fired); None when the writer kept none."""
        path = os.path.join(self.folder, CAPTURES_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                got = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.warnings.append(f"{path}: unreadable ({exc}); the reasons of deep captures are unknown")
            return None
        if not isinstance(got, dict) or not isinstance(got.get("deep", []), list):
            self.warnings.append(f"{path}: not a captures file (a JSON object with 'deep'); ignored")
            return None
        return got

    def catalog(self) -> list[SeriesTensor]:
        """Every tensor of the series (name, role, parameter), first seen first."""
        seen: dict[str, SeriesTensor] = {}
        for seg in self.segments:
            for t in self._catalog(seg):
                seen.setdefault(t.name, t)
        return list(seen.values())

    def fingerprint(self) -> str:
        """Names, sizes and mtimes of the segments as listed."""
        return ";".join(f"{os.path.basename(s.path)}:{s.size}:{s.mtime_ns}" for s in self.segments)

    def steps(self) -> np.ndarray:
        """Every step of the series, in order."""
        parts = [self._read(seg, lambda f, seg=seg: read_table_column(f, "steps", seg.path)) for seg in self.segments]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def curve(self, tensor: str, stat: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one statistic of one tensor over the run (float64; NaN where unknown or absent)."""
        if stat not in STAT_NAMES:
            raise DumpError(None, f"unknown statistic {stat!r}; known: {', '.join(STAT_NAMES)}")
        return self._joined(lambda f, seg: self._row(f, seg, tensor, stat))

    def scalar(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of one scalar (loss, lr, loss_scale, grad_norm) over the run."""
        if name not in SCALARS:
            raise DumpError(None, f"unknown scalar {name!r}; known: {', '.join(SCALARS)}")
        return self._joined(lambda f, seg: (read_table_column(f, "steps", seg.path),
                                            np.asarray(read_table_column(f, f"scalars/{name}", seg.path), np.float64)))

    def matrix(self, stat: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values (tensors x steps)) of one statistic: every tensor of :meth:`tensors` in that order,
        each segment's dataset read whole (the watch passes' path; NaN where unknown or absent)."""
        if stat not in STAT_NAMES:
            raise DumpError(None, f"unknown statistic {stat!r}; known: {', '.join(STAT_NAMES)}")
        order = {name: i for i, name in enumerate(self.tensors())}
        parts = [self._read(seg, lambda f, seg=seg: self._block(f, seg, stat, order)) for seg in self.segments]
        if not parts:
            return np.zeros(0, np.int64), np.zeros((len(order), 0))
        return np.concatenate([s for s, _ in parts]), np.concatenate([v for _, v in parts], axis=1)

    def _block(self, f: Any, seg: Segment, stat: str, order: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        steps = read_table_column(f, "steps", seg.path)
        names = [t.name for t in self._catalog(seg)]
        data = self._dataset(f, seg, stat, len(names), len(steps))[...].astype(np.float64)
        if stat in COUNT_NAMES:
            data[data < 0] = np.nan
        out = np.full((len(order), len(steps)), np.nan)
        out[[order[n] for n in names]] = data
        return steps, out

    def _dataset(self, f: Any, seg: Segment, stat: str, n_tensors: int, n_steps: int) -> Any:
        ds = checked(f, f"stats/{stat}", seg.path)
        if ds.shape != (n_tensors, n_steps):
            raise CorruptFileError(seg.path, f"stats/{stat} has shape {ds.shape}, expected {(n_tensors, n_steps)}")
        return ds

    def _joined(self, part: Any) -> tuple[np.ndarray, np.ndarray]:
        """``part(file, segment)`` -> (steps, values) of every segment, joined in step order."""
        got = [self._read(seg, lambda f, seg=seg: part(f, seg)) for seg in self.segments]
        if not got:
            return np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate([s for s, _ in got]), np.concatenate([v for _, v in got])

    def _catalog(self, seg: Segment) -> list[SeriesTensor]:
        got = self._names.get(seg.path)
        if got is None:
            got = self._names[seg.path] = self._read(seg, lambda f: _segment_catalog(f, seg.path))
        return got

    def _row(self, f: Any, seg: Segment, tensor: str, stat: str) -> tuple[np.ndarray, np.ndarray]:
        steps = read_table_column(f, "steps", seg.path)
        names = [t.name for t in self._catalog(seg)]
        if tensor not in names:
            return steps, np.full(len(steps), np.nan)
        row = self._dataset(f, seg, stat, len(names), len(steps))[names.index(tensor)].astype(np.float64)
        if stat in COUNT_NAMES:
            row[row < 0] = np.nan
        return steps, row

    def _read(self, seg: Segment, fn: Any) -> Any:
        from .handles import open_h5

        f = open_h5(seg.path, seg.size, seg.mtime_ns)
        if f.attrs.get("format") != SERIES_FORMAT or int(f.attrs.get("version", 0)) > SERIES_VERSION:
            raise CorruptFileError(seg.path, f"not a {SERIES_FORMAT} segment of version <= {SERIES_VERSION}")
        try:
            return fn(f)
        except (KeyError, OSError, ValueError) as exc:
            raise CorruptFileError(seg.path, f"unreadable series segment ({exc})") from exc


def _segment_catalog(f: Any, path: str) -> list[SeriesTensor]:
    """A segment's tensors; roles and parameters default to unknown (segments written before they were)."""
    names = strings(read_table_column(f, "tensors", path))
    roles = strings(read_table_column(f, "roles", path)) if "roles" in f else ["other"] * len(names)
    params = strings(read_table_column(f, "params", path)) if "params" in f else [""] * len(names)
    if len(roles) != len(names) or len(params) != len(names):
        raise CorruptFileError(path, f"{len(names)} tensors but {len(roles)} roles and {len(params)} params")
    return [SeriesTensor(n, r if r in SERIES_ROLES else "other", p or None) for n, r, p in zip(names, roles, params)]
