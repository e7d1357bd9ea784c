"""Reading the small files of a dump safely: regular files only, never blocking, bounded in size.

A dump can hold anything: a FIFO where a graph file should be (a read would wait forever), a link
to ``/dev/zero`` (a read would never end), a multi-gigabyte "config". Every reader of a metadata,
graph or csv file goes through :func:`read_bytes`, which refuses such files with a message that
names them, before reading a byte.
"""
from __future__ import annotations

import os
import re
import stat
from array import array
from typing import Any, BinaryIO

from ..errors import CorruptFileError

MiB = 1 << 20
# What a sane file of each kind can weigh: a 50,000-node graph is ~40 MiB of .pb and ~100 MiB of .ir.
LIMITS = {"json": 16 * MiB, "csv": 256 * MiB, "graph": 1024 * MiB}
# At most 18 digits: every such number fits the int64 columns that convert writes and numpy indexes.
MAX_DIGITS = 18
_DIGITS = re.compile(r"^[0-9]{1,%d}$" % MAX_DIGITS)


def is_number(text: str) -> bool:
    """ASCII digits only, at most 18: ``int()`` also takes '²' and '٣', which are not iteration numbers."""
    return _DIGITS.match(text) is not None


def regular_size(path: str) -> int:
    """The size of a regular file (CorruptFileError for a FIFO, device, socket or directory)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise CorruptFileError(path, f"not a regular file ({_kind(st.st_mode)}); skipped")
    return st.st_size


def open_regular(path: str, buffering: int = -1) -> BinaryIO:
    """A regular file opened for reading, without blocking (CorruptFileError for anything else)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)   # O_NONBLOCK: opening a FIFO must not wait for a writer
    except OSError as exc:
        raise CorruptFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    # Check the file opened, not the name checked earlier, and before fdopen: fdopen itself refuses a
    # directory with an error that names the descriptor, not the path.
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise CorruptFileError(path, f"not a regular file ({_kind(mode)}); skipped")
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str, kind: str) -> bytes:
    """The whole of a small file of ``kind`` ("json", "csv", "graph"), refused when absurd."""
    limit = LIMITS[kind]
    with open_regular(path) as f:
        st = os.fstat(f.fileno())
        if st.st_size > limit:
            raise CorruptFileError(path, f"{st.st_size} bytes: more than a {kind} file of a dump can hold "
                                   f"({limit // MiB} MiB); skipped")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise CorruptFileError(path, f"more than {limit // MiB} MiB: skipped")
    return data


def read_text(path: str, kind: str) -> str:
    """:func:`read_bytes` decoded as UTF-8 (undecodable bytes replaced)."""
    return read_bytes(path, kind).decode("utf-8", "replace")


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return word
    return "not a file"


_S_IFMT, _S_IFLNK, _S_IFDIR = 0o170000, stat.S_IFLNK, stat.S_IFDIR
# Stat a folder's entries relative to a descriptor of it where the platform can (not Windows): the
# kernel then does not walk the whole path again for each of thousands of files.
_DIR_FD = os.stat in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")


def open_dir(path: str) -> tuple[int | None, str]:
    """``(fd, where)`` to stat the entries of the folder ``path`` as ``os.stat(where + name, dir_fd=fd)``: a
    descriptor of the folder and "" where the platform allows, else None and the folder's path with a
    separator. Close with :func:`close_dir`; OSError when the folder cannot be opened."""
    if not _DIR_FD:
        return None, os.path.join(path, "")
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)), ""


def close_dir(fd: int | None) -> None:
    """Close what :func:`open_dir` opened."""
    if fd is not None:
        os.close(fd)


def hash_entries(h: Any, folder: str, prefix: str = "", skip: frozenset[str] = frozenset()) -> None:
    """Feed ``h`` (a hashlib object) the name, size and mtime of every entry of ``folder``, in name
    order (links not followed; an unlistable folder or a vanished entry adds nothing): a folder's
    part of a dump's fingerprint, which changes when a file is added, removed or rewritten."""
    try:
        names = sorted(n for n in os.listdir(folder) if n not in skip)
        fd, where = open_dir(folder)
    except OSError:
        return
    kept: list[str] = []
    numbers: list[int] = []
    try:
        for n in names:
            try:
                st = os.stat(where + n, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            kept.append(prefix + n)
            numbers.append(st.st_size)
            numbers.append(st.st_mtime_ns)
    finally:
        close_dir(fd)
    _hash_names(h, kept, numbers)


def hash_tree(h: Any, root: str) -> None:
    """Feed ``h`` the name, size and mtime of every file below ``root`` (links to files followed, to
    folders not), folder by folder in path order: one listing per folder and one stat per file, nothing
    more (a cached re-scan costs this walk). An unlistable folder or a vanished file adds nothing."""
    folders: list[tuple[str, list[str], list[int]]] = []
    stat_at = os.stat
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            names = os.listdir(d)
            fd, where = open_dir(d)
        except OSError:
            continue
        kept: list[str] = []
        numbers: list[int] = []
        keep, number = kept.append, numbers.extend
        try:
            for n in sorted(names):
                try:
                    st = stat_at(where + n, dir_fd=fd, follow_symlinks=False)
                    kind = st.st_mode & _S_IFMT
                    if kind == _S_IFLNK:
                        st = stat_at(where + n, dir_fd=fd)   # a link is hashed as what it points to, never walked into
                    elif kind == _S_IFDIR:
                        stack.append(os.path.join(d, n))
                        continue
                except OSError:
                    continue
                keep(n)
                number((st.st_size, st.st_mtime_ns))
        finally:
            close_dir(fd)
        folders.append((d, kept, numbers))
    folders.sort(key=lambda f: f[0])
    for d, kept, numbers in folders:
        h.update(d.encode("utf-8", "surrogateescape") + b"\0")   # no path holds a NUL: the parts stay apart
        _hash_names(h, kept, numbers)


def _hash_names(h: Any, names: list[str], numbers: list[int]) -> None:
    # names joined, then the numbers packed: what one line per entry would say, at a fraction of the cost
    h.update("\0".join(names).encode("utf-8", "surrogateescape") + b"\0\0")
    h.update(array("q", numbers).tobytes())
