"""HDF5 statistics cache, keyed by tensor-file identity and kept outside the dump directory."""
from __future__ import annotations

import hashlib
import os
import threading
import warnings as _warnings
from typing import Any

import numpy as np

from .stats import STAT_NAMES, Stats, tensor_stats

_KEY = "S16"
_FORMAT_VERSION = 1


def default_cache_dir() -> str:
    """``$TDBG_CACHE_DIR``, else ``$XDG_CACHE_HOME/tdbg``, else ``~/.cache/tdbg``."""
    env = os.environ.get("TDBG_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tdbg")


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).digest()


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
        self.hits = 0
        self.misses = 0
        if self.path and os.path.exists(self.path):
            self._load()

    @classmethod
    def for_dump(cls, dump_root: str, directory: str | None = None, enabled: bool = True) -> "StatsCache":
        """The cache file of one dump root (its name derives from the root's real path)."""
        tag = hashlib.blake2b(os.path.realpath(dump_root).encode(), digest_size=8).hexdigest()
        return cls(directory, f"stats-{tag}", enabled)

    def _load(self) -> None:
        import h5py

        try:
            with h5py.File(self.path, "r") as f:
                if f.attrs.get("version") != _FORMAT_VERSION:
                    return
                if "stats" in f:
                    g = f["stats"]
                    keys = g["key"][()]
                    cols = {n: g[n][()] for n in STAT_NAMES}
                    for i, k in enumerate(keys):
                        self._stats[bytes(k)] = Stats(**{n: _from_col(n, cols[n][i]) for n in STAT_NAMES})
                if "extra" in f:
                    keys = f["extra/key"][()]
                    vals = f["extra/value"][()]
                    self._extra.update(zip((bytes(k) for k in keys), (float(v) for v in vals)))
        except (OSError, KeyError, ValueError) as exc:
            _warnings.warn(f"{self.path}: unreadable statistics cache ignored ({exc})", RuntimeWarning, 2)

    # -- lookups ------------------------------------------------------------------------------
    def get(self, identity: str) -> Stats | None:
        """Cached statistics of a file identity."""
        if not self.enabled:
            return None
        k = _digest(identity)
        s = self._stats.get(k) or self._new_stats.get(k)
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

    def get_extra(self, key: str) -> float | None:
        """A cached extra value."""
        if not self.enabled:
            return None
        k = _digest(key)
        return self._extra.get(k, self._new_extra.get(k))

    def put_extra(self, key: str, value: float) -> None:
        """Remember an extra value."""
        if self.enabled:
            with self._lock:
                self._new_extra[_digest(key)] = float(value)

    def stats(self, ref: Any) -> Stats:
        """Statistics of a TensorRef: from the cache, else computed (and cached)."""
        s = self.get(ref.file_identity)
        if s is None:
            s = tensor_stats(ref.value())
            self.put(ref.file_identity, s)
        return s

    # -- persistence --------------------------------------------------------------------------
    def flush(self) -> None:
        """Append new entries to the HDF5 file."""
        if not self.enabled or not (self._new_stats or self._new_extra):
            return
        import h5py

        with self._lock:
            new_stats, self._new_stats = self._new_stats, {}
            new_extra, self._new_extra = self._new_extra, {}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with h5py.File(self.path, "a") as f:
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
        except OSError as exc:
            _warnings.warn(f"{self.path}: statistics cache not written ({exc})", RuntimeWarning, 2)
            return
        self._stats.update(new_stats)
        self._extra.update(new_extra)


def _append(group: Any, name: str, data: np.ndarray) -> None:
    if name not in group:
        group.create_dataset(name, data=data, maxshape=(None,), chunks=True)
        return
    ds = group[name]
    n = ds.shape[0]
    ds.resize((n + data.shape[0],))
    ds[n:] = data


def _to_col(v: float | int | None) -> float:
    return np.nan if v is None else float(v)


_INT_STATS = {"count", "nan", "pos_inf", "neg_inf", "zeros", "positives", "negatives"}


def _from_col(name: str, v: float) -> float | int | None:
    if name in _INT_STATS:
        return int(v)
    return None if np.isnan(v) else float(v)
