"""Open HDF5 files and parsed index tables, cached per process.

Scans fork worker processes after the parent has read files: a child must not use (or close)
the parent's HDF5 handles, so the cache is keyed by process id as well.
"""
from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from typing import Any

from ...errors import CorruptFileError

MAX_OPEN = 16          # open files per process; a scan walks iterations in order, so a few suffice

_lock = threading.Lock()
_handles: "OrderedDict[tuple[int, str, int, int], Any]" = OrderedDict()
_inherited: list[Any] = []   # a parent's handles after fork: kept referenced, never used or closed


def open_h5(path: str, size: int, mtime_ns: int) -> Any:
    """The read-only ``h5py.File`` of ``path`` as listed (CorruptFileError when unreadable or changed)."""
    pid = os.getpid()
    key = (pid, path, size, mtime_ns)
    with _lock:
        f = _handles.get(key)
        if f is not None:
            _handles.move_to_end(key)
            return f
        if _handles and next(iter(_handles))[0] != pid:
            _inherited.append(dict(_handles))
            _handles.clear()
    f = open_checked(path, size, mtime_ns)
    with _lock:
        _handles[key] = f
        while len(_handles) > MAX_OPEN:
            # dropped, not closed: a chunks() generator still reading it holds its own reference
            _handles.popitem(last=False)
    return f


def open_checked(path: str, size: int | None = None, mtime_ns: int | None = None) -> Any:
    """Open a regular file read-only with h5py, checking it is what the listing saw."""
    import h5py   # here: the reader imports this module to open a dump, which a cached re-scan does without h5py

    try:
        st = os.stat(path)
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise CorruptFileError(path, "not a regular file; skipped")
    if size is not None and (st.st_size != size or (mtime_ns and st.st_mtime_ns != mtime_ns)):
        raise CorruptFileError(path, "changed since the dump was listed (re-open the dump)")
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError, RuntimeError) as exc:
        raise CorruptFileError(path, f"unreadable HDF5 file, truncated or corrupt ({_short(exc)})") from exc


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    return text[:200]
