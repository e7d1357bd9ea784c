"""HDF5 statistics cache, keyed by tensor-file identity and kept outside the dump directory; beside it, in a
folder of their own, the JSON results of whole scans and triages (:class:`ResultStore`)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import threading
import time
import warnings as _warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from ..common.atomic import write_json_atomic

if TYPE_CHECKING:   # numpy, and stats with it, load when statistics are read or computed, not for a stored result
    import numpy as np

    from . import Stats

_KEY = "S16"
_KEY_LEN = 16   # digest bytes; numpy's "S" strips trailing NUL bytes on reading, so keys are padded back
MAX_RESULTS = 64
_FORMAT_VERSION = 1


def _key(k: bytes) -> bytes:
    """A key as read from the file, with the NUL bytes numpy dropped from its end put back."""
    return bytes(k).ljust(_KEY_LEN, b"\0")


def default_cache_dir() -> str:
    """``$TDBG_CACHE_DIR``, else ``$XDG_CACHE_HOME/tdbg``, else ``~/.cache/tdbg``."""
    env = os.environ.get("TDBG_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tdbg")


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=_KEY_LEN).digest()


@dataclass(frozen=True)
class ExtraKey:
    """A number cached beside a tensor's statistics: of which file (an identity) or pair of files, what it is,
    and the arguments that made it (a range's bounds, a unit-activity spec, a tolerance)."""

    identity: str
    what: str
    args: tuple[Any, ...] = ()

    @classmethod
    def of_pair(cls, current: str, previous: str, what: str, *args: Any) -> "ExtraKey":
        """A number of a tensor and its previous value (or of two runs' tensors)."""
        return cls(f"{current}>{previous}", what, args)

    def text(self) -> str:
        """The key as stored (hashed with the rest): ``identity|what|repr(arg)|...``."""
        return "|".join((self.identity, self.what, *map(repr, self.args)))


class ResultStore:
    """Whole results (a scan's, a triage's) as JSON files in ``folder``, the newest MAX_RESULTS kept; None
    folder: nothing is stored. A result that cannot be stored only costs time (a warning says why)."""

    def __init__(self, folder: str | None) -> None:
        self.folder = folder

    def get(self, key: str) -> Any:
        """A stored result (None when absent or unreadable)."""
        path = self._path(key)
        if path is None or not os.path.exists(path):
            return None
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def put(self, key: str, obj: Any) -> None:
        """Store a JSON-ready result, keeping the newest MAX_RESULTS."""
        path = self._path(key)
        if path is None:
            return
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_json_atomic(path, obj)
            old = sorted((e.stat().st_mtime, e.path) for e in os.scandir(os.path.dirname(path)))
            for _, p in old[:-MAX_RESULTS]:
                os.remove(p)
        except OSError as exc:
            _warnings.warn(f"{path}: result not cached ({exc})", RuntimeWarning, 2)

    def _path(self, key: str) -> str | None:
        return None if self.folder is None else os.path.join(self.folder, f"{key}.json")


class StatsCache:
    """Statistics per tensor file, plus named extra values (range counts, pair differences).

    Everything is read into memory on open and new entries are appended on :meth:`flush`, so a
    cached scan costs one HDF5 read. A cache that cannot be written only costs speed.
    """

    def __init__(self, directory: str | None = None, name: str = "stats", enabled: bool = True) -> None:
        self.enabled = enabled
        self.path = os.path.join(directory or default_cache_dir(), f"{name}.h5") if enabled else None
        self._stats: dict[bytes, Stats] = {}
        self._extra: dict[bytes, float] = {}
        self._new_stats: dict[bytes, Stats] = {}
        self._new_extra: dict[bytes, float] = {}
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._rows: dict[bytes, int] = {}
        self._cols: dict[str, np.ndarray] = {}
        self._loaded = False
        self._corrupt = False
        self.hits = 0
        self.misses = 0
        self.results = ResultStore(os.path.join(os.path.dirname(self.path), "results") if self.path else None)

    @classmethod
    def for_dump(cls, dump_root: str, directory: str | None = None, enabled: bool = True) -> "StatsCache":
        """The cache file of one dump root (its name derives from the root's real path)."""
        tag = hashlib.blake2b(os.path.realpath(dump_root).encode(), digest_size=8).hexdigest()
        return cls(directory, f"stats-{tag}", enabled)

    def _load(self) -> None:
        """Read the file once, on the first lookup; rows become Stats only when asked for."""
        with self._load_lock:   # the web UI's threads share one cache: one of them reads the file
            if not self._loaded:
                self._read_file()
                self._loaded = True

    def _read_file(self) -> None:
        import h5py   # local: a cached re-scan (StatsCache's stored results) must not load h5py, numpy

        from . import STAT_NAMES

        if not self.path or not os.path.exists(self.path):
            return
        try:
            with _file_lock(self.path, exclusive=False), h5py.File(self.path, "r") as f:
                if f.attrs.get("version") != _FORMAT_VERSION:
                    return
                if "stats" in f:
                    g = f["stats"]
                    self._cols = {n: g[n][()] for n in STAT_NAMES}
                    self._rows = {_key(k): i for i, k in enumerate(g["key"][()])}
                if "extra" in f:
                    keys = f["extra/key"][()]
                    vals = f["extra/value"][()].tolist()
                    self._extra.update(zip((_key(k) for k in keys), vals))
        except (OSError, KeyError, ValueError) as exc:
            self._corrupt = True
            _warnings.warn(f"{self.path}: unreadable statistics cache ignored ({exc})", RuntimeWarning, 2)

    def _row(self, k: bytes) -> Stats | None:
        from . import COUNT_NAMES, STAT_NAMES, Stats   # local: numpy (see _read_file)

        i = self._rows.get(k)
        if i is None:
            return None
        return Stats(**{n: _from_col(n, self._cols[n][i], COUNT_NAMES) for n in STAT_NAMES})  # type: ignore[arg-type]

    # -- lookups ------------------------------------------------------------------------------
    def get(self, identity: str) -> Stats | None:
        """Cached statistics of a file identity."""
        if not self.enabled:
            return None
        if not self._loaded:
            self._load()
        k = _digest(identity)
        s = self._stats.get(k) or self._new_stats.get(k) or self._row(k)
        if s is None:
            self.misses += 1
        else:
            self.hits += 1
        return s

    def put(self, identity: str, stats: Stats) -> None:
        """Remember statistics of a file identity."""
        if self.enabled:
            with self._lock:
                self._new_stats[_digest(identity)] = stats

    def get_extra(self, key: ExtraKey) -> float | None:
        """A cached extra value."""
        if not self.enabled:
            return None
        if not self._loaded:
            self._load()
        k = _digest(key.text())
        return self._extra.get(k, self._new_extra.get(k))

    def put_extra(self, key: ExtraKey, value: float) -> None:
        """Remember an extra value."""
        if self.enabled:
            with self._lock:
                self._new_extra[_digest(key.text())] = float(value)

    def take_new(self) -> tuple[dict[bytes, Stats], dict[bytes, float]]:
        """The entries remembered since the last flush, forgotten here (a worker hands them to its parent)."""
        with self._lock:
            got = self._new_stats, self._new_extra
            self._new_stats, self._new_extra = {}, {}
        return got

    def add_new(self, entries: tuple[dict[bytes, Stats], dict[bytes, float]]) -> None:
        """Remember entries a worker's copy of this cache took (:meth:`take_new`), to be flushed from here."""
        if self.enabled:
            with self._lock:
                self._new_stats.update(entries[0])
                self._new_extra.update(entries[1])

    # -- persistence --------------------------------------------------------------------------
    def flush(self) -> None:
        """Append new entries to the HDF5 file."""
        if not self.enabled or not self.path or not (self._new_stats or self._new_extra):
            return
        import h5py   # local: see _read_file

        with self._lock:
            new_stats, self._new_stats = self._new_stats, {}
            new_extra, self._new_extra = self._new_extra, {}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with _file_lock(self.path, exclusive=True):
                self._append_entries(h5py, new_stats, new_extra)
        except OSError as exc:
            _warnings.warn(f"{self.path}: statistics cache not written ({exc})", RuntimeWarning, 2)
            return
        self._stats.update(new_stats)
        self._extra.update(new_extra)

    def _append_entries(self, h5py: Any, new_stats: dict[bytes, Stats], new_extra: dict[bytes, float]) -> None:
        """Append entries to the file (the caller holds the lock)."""
        import numpy as np   # local: see _read_file

        from . import STAT_NAMES

        try:
            f = h5py.File(self.path, "a")
        except OSError:
            if not self._corrupt:
                raise
            f = h5py.File(self.path, "w")  # our own file, found unreadable: start it again
        with f:
            if f.attrs.get("version") != _FORMAT_VERSION:
                for k in list(f.keys()):
                    del f[k]
                f.attrs["version"] = _FORMAT_VERSION
            if new_stats:
                g = f.require_group("stats")
                keys = np.array(list(new_stats), dtype=_KEY)
                _append(g, "key", keys)
                for n in STAT_NAMES:
                    _append(g, n, np.array([_to_col(getattr(s, n)) for s in new_stats.values()],
                                           dtype=np.float64))
            if new_extra:
                g = f.require_group("extra")
                _append(g, "key", np.array(list(new_extra), dtype=_KEY))
                _append(g, "value", np.array(list(new_extra.values()), dtype=np.float64))


def _append(group: Any, name: str, data: np.ndarray) -> None:
    if name not in group:
        group.create_dataset(name, data=data, maxshape=(None,), chunks=True)
        return
    ds = group[name]
    n = ds.shape[0]
    ds.resize((n + data.shape[0],))
    ds[n:] = data


def _to_col(v: float | int | None) -> float:
    return math.nan if v is None else float(v)


def _from_col(name: str, v: float, counts: tuple[str, ...]) -> float | int | None:
    if name in counts:
        return int(v)
    return None if math.isnan(v) else float(v)


@contextlib.contextmanager
def _file_lock(path: str, exclusive: bool, timeout: float = 60.0) -> Iterator[None]:
    """Hold a lock on ``path`` + ".lock": concurrent scans wait for each other's writes instead of failing.

    HDF5's own lock refuses a second opener at once ("unable to lock file"); this one is waited for.
    Without ``fcntl`` (Windows) it is a no-op and HDF5's lock is all there is.
    """
    try:
        import fcntl   # local: POSIX only (see above)
    except ImportError:
        yield
        return
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise OSError(f"another tdbg held the cache lock for {timeout:.0f} s") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)
