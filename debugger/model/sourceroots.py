"""Where the source files named by a dump's stacks are on this machine, and reading them safely.

A dump records the absolute paths of the machine that trained (``/home/ci/job/train.py``). Like a
debugger's *substitute-path*, :class:`SourceRoots` maps such a recorded path to a file under one of
the folders the user allowed: the dump's own tree, each ``--source-root DIR`` and each entry of
``$TDBG_SOURCE_ROOTS`` (joined with ``os.pathsep``). An entry ``OLD=NEW`` rewrites the prefix
``OLD`` to ``NEW`` (and allows ``NEW``); a plain ``DIR`` is searched for the longest trailing part
of the recorded path (``/home/ci/job/src/train.py`` -> ``DIR/src/train.py``, else ``DIR/train.py``).

The graph that names the file is untrusted: a crafted ``.pb`` may name ``/etc/shadow``,
``/proc/self/environ`` or ``../../x``. So a file is served only when its real path (every link
resolved) lies inside an allowed root, no part of its path below that root is hidden (``.ssh``,
``.env``), it is a regular file of at most :data:`MAX_SOURCE_BYTES` and it is text (no NUL byte).
A recorded path is never opened as such, and a refusal reads the same whether or not the file
exists elsewhere.
"""
from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..errors import DumpError, InvalidQueryError, QueryError
from .source import layer_definitions, statement_lines

ENV_VAR = "TDBG_SOURCE_ROOTS"
MAX_SOURCE_BYTES = 2 << 20     # a source file larger than this is refused (a log or data file, not code)
MAX_PATH_CHARS = 4096          # longer recorded or requested paths are not looked up at all
NOT_FOUND = "outside the allowed roots: start tdbg serve with --source-root DIR (the folder that holds it) to show it"


@dataclass(frozen=True)
class Found:
    """A recorded path resolved to a readable file on this machine."""

    recorded: str
    path: str          # the real path (links resolved), inside ``root``
    root: str          # the allowed root it was found under


def _split(path: str) -> list[str]:
    """Components of a recorded path, either separator, with ``.``, ``..`` and empties folded."""
    p = path.replace("\\", "/")
    if len(p) > 1 and p[1] == ":":          # a Windows drive: C:/job/train.py -> /job/train.py
        p = p[2:]
    norm = posixpath.normpath("/" + p.lstrip("/")) if p.startswith("/") else posixpath.normpath(p)
    # A relative path keeps leading "..": those components are dropped, never followed.
    return [c for c in norm.split("/") if c not in ("", ".", "..")]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def parse_entries(entries: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Split ``--source-root`` / ``$TDBG_SOURCE_ROOTS`` entries into (folders, (old, new) prefix pairs)."""
    dirs: list[str] = []
    pairs: list[tuple[str, str]] = []
    for raw in entries:
        e = raw.strip()
        if not e:
            continue
        old, eq, new = e.partition("=")
        if eq and not os.path.isdir(e):    # a folder whose name holds '=' stays a folder
            if not old.strip() or not new.strip():
                raise DumpError(None, f"bad source root {raw!r}: expected DIR or OLD=NEW")
            pairs.append((old.strip(), new.strip()))
            dirs.append(new.strip())
        else:
            dirs.append(e)
    return dirs, pairs


def env_entries(environ: Mapping[str, str] | None = None) -> list[str]:
    """The entries of ``$TDBG_SOURCE_ROOTS`` (``os.pathsep``-separated)."""
    text = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return [e for e in text.split(os.pathsep) if e.strip()]


class SourceRoots:
    """The folders source may be served from, and the recorded-path mapping onto them."""

    def __init__(self, dump_paths: Sequence[str] = (), entries: Sequence[str] = (),
                 environ: Mapping[str, str] | None = None, max_bytes: int = MAX_SOURCE_BYTES,
                 trust_recorded: bool = False) -> None:
        dirs, pairs = parse_entries([*entries, *env_entries(environ)])
        self.max_bytes = max_bytes
        # The command line reads for its own user, who can read any file anyway: there a recorded path
        # that exists as it is is used too. The server never does (it would serve what a dump names).
        self.trust_recorded = trust_recorded
        # The user's roots come first: when two roots hold the same trailing path, the one asked
        # for explicitly wins over the dump's own tree.
        roots: list[str] = []
        for d in [*dirs, *dump_paths]:
            real = os.path.realpath(os.path.expanduser(d))
            if os.path.isdir(real) and real not in roots:
                roots.append(real)
        self.roots: tuple[str, ...] = tuple(roots)
        self.dump_trees: tuple[str, ...] = tuple(
            r for r in (os.path.realpath(os.path.expanduser(d)) for d in dump_paths) if os.path.isdir(r))
        self.pairs: tuple[tuple[list[str], str], ...] = tuple(
            (_split(old), os.path.realpath(os.path.expanduser(new))) for old, new in pairs)

    def __repr__(self) -> str:
        return f"SourceRoots({list(self.roots)!r})"

    # -- mapping ------------------------------------------------------------------------------------
    def _check(self, candidate: str, root: str) -> str | None:
        """The real path of ``candidate`` when it may be served from ``root``, else None."""
        if not os.path.exists(candidate):   # one stat before the costlier realpath of every miss
            return None
        real = os.path.realpath(candidate)
        if not _inside(real, root) or real == root:
            return None
        rel = os.path.relpath(real, root)
        if any(part.startswith(".") for part in rel.split(os.sep)):
            return None        # hidden files and folders (.ssh, .git, .env) are never source to show
        try:
            st = os.stat(real)
        except (OSError, ValueError):
            return None
        return real if stat.S_ISREG(st.st_mode) else None

    def _candidates(self, recorded: str) -> Iterable[tuple[str, str]]:
        parts = _split(recorded)
        if not parts:
            return
        for old, new in self.pairs:       # explicit OLD=NEW prefixes first
            if old and parts[:len(old)] == old and len(parts) > len(old):
                yield os.path.join(new, *parts[len(old):]), new
        for k in range(len(parts), 0, -1):  # then the longest trailing part under any root
            tail = parts[-k:]
            for root in self.roots:
                yield os.path.join(root, *tail), root

    def _relocated(self, recorded: str) -> Iterable[tuple[str, str]]:
        """The recorded path re-rooted where the dump's own checkout is now: a dump that travelled with its
        source tree (``/work/a/dumps/make.py`` recorded, the dump now under ``/tmp/b/dumps/``) names a
        folder above the dump, and what follows that folder in the recorded path is looked up below it,
        nearest folder first. Command line only: above the dump is outside what the server may read."""
        parts = _split(recorded)
        for tree in self.dump_trees:
            folder = tree
            while os.path.basename(folder):
                name = os.path.basename(folder)
                if name in parts[:-1]:
                    after = len(parts) - 1 - parts[:-1][::-1].index(name)    # just past its last occurrence
                    yield os.path.join(folder, *parts[after:]), folder
                folder = os.path.dirname(folder)

    def find(self, recorded: str) -> Found | None:
        """Where ``recorded`` is on this machine under an allowed root (None when nowhere)."""
        if not recorded or len(recorded) > MAX_PATH_CHARS or "\0" in recorded:
            return None
        for cand, root in self._candidates(recorded):
            real = self._check(cand, root)
            if real is not None:
                return Found(recorded, real, root)
        if self.trust_recorded:
            for cand, root in self._relocated(recorded):
                real = self._check(cand, root)
                if real is not None:
                    return Found(recorded, real, root)
        if self.trust_recorded and os.path.isabs(recorded):
            real = self._check(recorded, os.path.dirname(os.path.realpath(recorded)))
            if real is not None:
                return Found(recorded, real, os.path.dirname(real))
        return None

    # -- reading ------------------------------------------------------------------------------------
    def read(self, recorded: str) -> dict[str, Any]:
        """``{"file", "exists", "found", "text", "truncated", ["reason"]}`` of a recorded path.

        ``text`` is None unless the file maps under an allowed root, is regular, at most
        ``max_bytes`` long and text; ``reason`` then says which rule refused it.
        """
        out: dict[str, Any] = {"file": recorded, "exists": False, "found": None, "text": None, "truncated": False}
        hit = self.find(recorded)
        if hit is None:
            out["reason"] = NOT_FOUND
            return out
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            # O_NOFOLLOW and the fstat below close the gap between the check and the open: a file
            # swapped for a link or a FIFO meanwhile is refused rather than followed or blocked on.
            fd = os.open(hit.path, flags)
        except OSError as exc:
            out["reason"] = exc.strerror or "cannot be opened"
            return out
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                out["reason"] = NOT_FOUND
                return out
            if st.st_size > self.max_bytes:
                out["reason"] = f"larger than {self.max_bytes >> 20} MiB: not shown"
                return out
            data = f.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            out["reason"] = f"larger than {self.max_bytes >> 20} MiB: not shown"
            return out
        if b"\0" in data:
            out["reason"] = "not a text file"
            return out
        out.update(exists=True, found=hit.path, text=data.decode("utf-8", "replace"))
        return out

    def statement_lines(self, recorded: str, line: int) -> list[int]:
        """Lines of the Python statement holding ``line`` in the file ``recorded`` maps to ([] when unreadable)."""
        text = self.read(recorded)["text"]
        return statement_lines(text, line) if text else []

    def assigned_attribute(self, recorded: str, line: int) -> str | None:
        """The ``self.X`` a line of ``__init__`` assigns in the file ``recorded`` maps to (None when unreadable)."""
        return self.layer_lines(recorded).get(line)

    def layer_lines(self, recorded: str) -> dict[int, str]:
        """Lines of ``__init__`` methods that define a layer (``self.X = ...``) in the file ``recorded``
        maps to, each with its ``X`` ({} when unreadable)."""
        text = self.read(recorded)["text"]
        return layer_definitions(text) if text else {}

    def describe(self, recorded: str) -> dict[str, Any]:
        """``{"exists", "found"}`` of a recorded path: whether :meth:`read` would show it."""
        r = self.read(recorded)
        return {"exists": r["exists"], "found": r["found"]}


def known_file(index: Any, path: str) -> str:
    """The recorded path a request names: exactly, or the one recorded path it is a suffix of.

    Only paths the dump's stacks recorded can be asked for; the request is never a file name."""
    if len(path) > MAX_PATH_CHARS or "\0" in path:
        raise InvalidQueryError(f"bad file: {len(path)} characters or a NUL byte")
    if path in index.all_files():
        return path
    cand = index.files(path)
    if len(cand) == 1:
        return cand[0]
    if not cand:
        raise QueryError(None, f"no source file {path!r} created nodes of this dump")
    raise InvalidQueryError(f"{path!r} matches {len(cand)} files: {', '.join(cand[:5])}")


def source_text(dump: Any, roots: SourceRoots, path: str) -> dict[str, Any]:
    """The text of a source file the dump's stacks name, read from under the allowed roots only."""
    return roots.read(known_file(dump.source_index, path))


def mark_found(items: list[dict[str, Any]], roots: SourceRoots, key: str = "file") -> list[dict[str, Any]]:
    """Set ``exists``/``found`` of each item from the roots (not from the recorded path itself)."""
    for it in items:
        it.update(roots.describe(it[key]))
    return items
