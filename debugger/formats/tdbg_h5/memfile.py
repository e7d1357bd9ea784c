"""HDF5 files that never meet a write error inside HDF5: built in memory, then written with plain file I/O.

HDF5 does not survive a write error: on a full disk its close fails half-way ("Can't decrement id ref
count ... No space left on device") and the objects left behind crash the interpreter when they are
freed (SIGSEGV in the garbage collector), or, freed first, the close reports success on a file that
was never written whole. A file built in memory (HDF5's core driver, no backing store) meets no disk
until its finished image is written by :func:`write_image`, whose errors are plain OSErrors naming the
file. What the writer keeps small (graphs, statistics-only iterations, series segments) is written so.
For a file too big to hold in memory (values), :func:`check_room` refuses to start what the disk
cannot take, and :func:`close_or_keep` keeps a file that HDF5 could not close alive to the end of the
process instead of letting it crash.
"""
from __future__ import annotations

import os
import shutil
from typing import Any

from . import layout as L

# room left beside a value file's data for its index, statistics and HDF5's own metadata
_MARGIN = 1 << 20
# files HDF5 could not close, referenced until the process ends (freeing them crashes the interpreter)
_UNCLOSABLE: list[Any] = []


def in_memory(name: str) -> Any:
    """A new, empty HDF5 file held in memory (``name`` only labels it: nothing is created on disk)."""
    import h5py     # with the writer only: readers of the series import this module too

    return h5py.File(name, "w", driver="core", backing_store=False, libver=L.LIBVER)


def write_image(f: Any, path: str, durable: bool) -> bytes:
    """Close the in-memory file ``f`` and write its bytes to ``path`` (a temporary name the caller renames);
    an OSError names ``path`` and leaves no file there. Returns the image."""
    f.flush()
    image = f.id.get_file_image()
    f.close()
    write_bytes(image, path, durable)
    return image


def write_bytes(image: bytes, path: str, durable: bool) -> None:
    """Write a finished file image to ``path`` with plain file I/O (an OSError names ``path``, no file left)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(image)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        if os.path.exists(path):
            os.unlink(path)
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from None


def check_room(folder: str, nbytes: int) -> None:
    """OSError (no space) when ``folder``'s file system has not room for ``nbytes`` more and a margin."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return          # cannot tell: the write itself will say
    if free < nbytes + _MARGIN:
        raise OSError(28, f"cannot write {nbytes} bytes into {folder}: {free} bytes left on its device")


def close_or_keep(f: Any, *held: Any) -> None:
    """Close an HDF5 file written on disk; when HDF5 cannot (a write error while flushing), keep it and
    ``held`` (what refers to its objects) alive and raise an OSError naming it."""
    try:
        f.close()
    except (OSError, RuntimeError, ValueError) as exc:
        _UNCLOSABLE.append((f, held))
        raise OSError(getattr(exc, "errno", None) or 5, f"cannot finish writing {f.filename}: {exc}") from None
