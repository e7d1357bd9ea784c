"""Reading the small files of a dump safely: regular files only, never blocking, bounded in size.

A dump can hold anything: a FIFO where a graph file should be (a read would wait forever), a link
to ``/dev/zero`` (a read would never end), a multi-gigabyte "config". Every reader of a metadata,
graph or csv file goes through :func:`read_bytes`, which refuses such files with a message that
names them, before reading a byte.
"""
from __future__ import annotations

import gc
import hashlib
import marshal
import os
import re
import signal
import stat
import sys
import threading
from array import array
from typing import Any, BinaryIO, NamedTuple, NoReturn, Sequence

from ..errors import CorruptFileError

MiB = 1 << 20
# What a sane file of each kind can weigh: a 50,000-node graph is ~40 MiB of .pb and ~100 MiB of .ir.
LIMITS = {"json": 16 * MiB, "csv": 256 * MiB, "graph": 1024 * MiB}
# At most 18 digits: every such number fits the int64 columns that convert writes and numpy indexes.
MAX_DIGITS = 18
_DIGITS = re.compile(r"^[0-9]{1,%d}\Z" % MAX_DIGITS)


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


class Folder(NamedTuple):
    """One folder as :func:`list_folders` found it."""

    path: str
    error: str | None     # why it could not be listed (its names and folders are then empty)
    names: list[str]      # its entries that are not folders, sorted
    folders: list[str]    # its subfolders (links to folders are names, never walked into), sorted
    stats: array          # st_mode, st_size, st_mtime_ns of each name, links followed; st_mode -1: vanished


# Forking pays from a few thousand stats on: a fork costs about a millisecond, a stat 2-4 us on a VM.
FORK_AT = 4096
_MAX_CHILDREN = 7
# Bytes of a folder's st_size per entry, about (ext4: 30 to 200 with the name's length): only sizes the
# work to decide whether and how to split it; the result never depends on it.
_ENTRY_BYTES = 64


class _ForkCount:
    """How the children of :func:`list_folders` ended (the tests check that the forked path really ran)."""

    reported = 0
    failed = 0


FORKS = _ForkCount()


def list_folders(paths: Sequence[str], *, workers: int | None = None, fork_at: int = FORK_AT,
                 child_fault: str | None = None) -> list[Folder]:
    """Every folder of ``paths`` listed, and every entry that is not a folder stated: the same
    :class:`Folder` list, in the order of ``paths``, whether one process does it or several.

    The stats of thousands of files are a cached re-scan's and ``info``'s floor and a VM's stat is slow:
    where it is safe (Linux, ``os.fork``, no other thread in this process) and there are more than
    ``fork_at`` entries (estimated from the folders' sizes), the folders are shared between this process
    and one forked child per extra core. A child only lists, stats, writes its part into a pipe and
    leaves by ``os._exit``; a child that fails, dies or writes a partial report makes this process do
    its part itself. ``workers`` forces the number of processes (1: serial). ``child_fault`` is a test
    hook making every child fail: "exit" (before any work), "truncate" (half a report) or "kill"
    (SIGKILL after the work)."""
    paths = list(paths)
    shares = _shares(paths, workers, fork_at)
    if len(shares) < 2:
        return [_folder(p) for p in paths]
    out: list[Folder | None] = [None] * len(paths)
    children: list[tuple[int, int, list[int]]] = []   # pid, read end, share
    mine = list(shares[0])
    was_enabled = gc.isenabled()
    gc.disable()   # the collector must not run finalizers in a child
    try:
        try:
            for share in shares[1:]:
                r, w = os.pipe()
                try:
                    pid = os.fork()
                except OSError:   # no process to be had (a limit): this one does that share too
                    os.close(r)
                    os.close(w)
                    mine.extend(share)
                    continue
                if pid == 0:   # pragma: no cover - the child (coverage cannot follow it)
                    _child(w, [paths[i] for i in share], child_fault)
                os.close(w)
                children.append((pid, r, share))
        finally:
            if was_enabled:
                gc.enable()
        for i in mine:
            out[i] = _folder(paths[i])
        while children:
            pid, r, share = children.pop(0)
            parts = _collect(pid, r, len(share))
            if parts is None:
                FORKS.failed += 1
                for i in share:
                    out[i] = _folder(paths[i])
                continue
            FORKS.reported += 1
            for i, part in zip(share, parts):
                out[i] = Folder(paths[i], *part)
    finally:
        for pid, r, _ in children:   # interrupted: end our own children, leave no zombie
            os.close(r)
            _end(pid, kill=True)
    return out  # type: ignore[return-value]


def _shares(paths: list[str], workers: int | None, fork_at: int) -> list[list[int]]:
    """The indexes of ``paths`` each process lists, this one's first; one share when forking is unsafe
    or does not pay."""
    every = [list(range(len(paths)))]
    if len(paths) < 2 or workers == 1 or not _fork_is_safe():
        return every
    weights = []
    for p in paths:
        try:
            weights.append(1 + os.stat(p).st_size // _ENTRY_BYTES)
        except OSError:
            weights.append(1)
    if workers is None:
        if sum(weights) <= fork_at:
            return every
        workers = min(len(os.sched_getaffinity(0)), 1 + _MAX_CHILDREN, 1 + sum(weights) // max(fork_at, 1))
    workers = min(workers, len(paths))
    if workers < 2:
        return every
    shares: list[list[int]] = [[] for _ in range(workers)]
    load = [0] * workers
    for i in sorted(range(len(paths)), key=lambda i: -weights[i]):   # biggest first, to the least loaded
        k = load.index(min(load))
        shares[k].append(i)
        load[k] += weights[i]
    return [sorted(s) for s in shares if s]


def _fork_is_safe() -> bool:
    """Whether this process may fork: Linux, and no thread but this one, neither Python's (the web server,
    Dask) nor a native library's (a BLAS pool) that a child could find holding a lock."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:   # no /proc: Python's own count is all there is to go on
        return True


def _child(w: int, paths: list[str], fault: str | None) -> NoReturn:  # pragma: no cover - runs in the child
    """List and stat ``paths``, write them to ``w``, exit: nothing else (no atexit, no inherited buffer)."""
    try:
        if fault == "exit":
            os._exit(3)
        data = marshal.dumps([(f.error, f.names, f.folders, f.stats.tobytes()) for f in map(_folder, paths)])
        if fault == "truncate":
            data = data[:len(data) // 2]
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        view = memoryview(data)
        while view:
            view = view[os.write(w, view):]
        os._exit(0)
    finally:
        os._exit(1)


def _collect(pid: int, r: int, count: int) -> list[tuple[str | None, list[str], list[str], array]] | None:
    """A child's report, or None when it failed, died or said too little."""
    chunks = []
    try:
        while True:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    except BaseException:
        os.close(r)
        _end(pid, kill=True)
        raise
    os.close(r)
    if _end(pid) != 0:   # the end of the pipe is the child's exit: wait for it, never kill it
        return None
    try:
        parts = [(error, names, folders, array("q", numbers)) for error, names, folders, numbers
                 in marshal.loads(b"".join(chunks))]
    except (EOFError, ValueError, TypeError):
        return None
    return parts if len(parts) == count else None


def _end(pid: int, kill: bool = False) -> int:
    """Reap a child, killed first when ``kill`` (this process was interrupted): its wait status."""
    try:
        if kill:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        return -1
    return status


def _folder(path: str) -> Folder:
    """One folder listed and its non-folder entries stated, in this process."""
    names: list[str] = []
    folders: list[str] = []
    try:
        with os.scandir(path) as it:
            for e in it:
                try:
                    is_dir = e.is_dir(follow_symlinks=False)   # the listing's d_type: no syscall on most file systems
                except OSError:
                    is_dir = False
                (folders if is_dir else names).append(e.name)
        fd, where = open_dir(path)
    except OSError as exc:
        return Folder(path, exc.strerror or str(exc), [], [], array("q"))
    names.sort()
    folders.sort()
    stats = array("q")
    add = stats.extend
    stat_at = os.stat
    try:
        for n in names:
            try:
                st = stat_at(where + n, dir_fd=fd)
            except OSError:
                add((-1, 0, 0))
                continue
            add((st.st_mode, st.st_size, st.st_mtime_ns))
    finally:
        close_dir(fd)
    return Folder(path, None, names, folders, stats)


def hash_tree(h: Any, root: str, *, workers: int | None = None, child_fault: str | None = None) -> None:
    """Feed ``h`` the name, size and mtime of every file below ``root`` (links to files followed, to
    folders not), folder by folder in path order: one listing per folder and one stat per file, nothing
    more (a cached re-scan costs this walk), spread over processes by :func:`list_folders` (``workers``,
    ``child_fault``: as there). An unlistable folder or a vanished file adds nothing."""
    found: list[Folder] = []
    level = [root]
    while level:   # a level at a time: the big leaf folders of a dump are stated side by side
        listed = list_folders(level, workers=workers, child_fault=child_fault)
        found.extend(f for f in listed if f.error is None)
        level = [os.path.join(f.path, n) for f in listed for n in f.folders]
    found.sort(key=lambda f: f.path)
    for f in found:
        h.update(f.path.encode("utf-8", "surrogateescape") + b"\0")   # no path holds a NUL: the parts stay apart
        modes = f.stats[0::3]
        if -1 not in modes:
            numbers = array("q", f.stats)
            del numbers[0::3]    # (size, mtime) of each file, as the hash has always had them
            _hash_names(h, f.names, numbers)
            continue
        kept = [n for n, m in zip(f.names, modes) if m != -1]
        numbers = array("q")
        for i, m in enumerate(modes):
            if m != -1:
                numbers.extend(f.stats[3 * i + 1:3 * i + 3])
        _hash_names(h, kept, numbers)


class FileDigest:
    """A blake2b digest for :func:`hash_entries` and :func:`hash_tree` that also keeps the newest mtime it
    was fed: when the files last changed, which tells a finished dump from one a job is still writing."""

    def __init__(self) -> None:
        self._h = hashlib.blake2b(digest_size=16)
        self.newest_ns: int | None = None

    def update(self, data: bytes) -> None:
        """Feed bytes, as hashlib's update."""
        self._h.update(data)

    def saw(self, mtimes_ns: Sequence[int]) -> None:
        """Note the mtimes of the files fed."""
        if len(mtimes_ns):
            newest = max(mtimes_ns)
            self.newest_ns = newest if self.newest_ns is None else max(self.newest_ns, newest)

    def stamp(self) -> tuple[str, float | None]:
        """(hex digest, the newest mtime fed in seconds since the epoch, None when no file was fed)."""
        return self._h.hexdigest(), None if self.newest_ns is None else self.newest_ns / 1e9


def _hash_names(h: Any, names: list[str], numbers: Sequence[int]) -> None:
    # names joined, then the numbers packed: what one line per entry would say, at a fraction of the cost
    h.update("\0".join(names).encode("utf-8", "surrogateescape") + b"\0\0")
    h.update(array("q", numbers).tobytes())
    if isinstance(h, FileDigest):
        h.saw(numbers[1::2])         # (size, mtime) pairs
