"""The dump formats tdbg reads, and the one place that picks a format for a path.

A format is a folder here with a ``FORMAT`` object (see :mod:`debugger.formats.base`); the table
below is the only list of them. Nothing outside this package imports a format's modules.
"""
from __future__ import annotations

import importlib
import os

from ..errors import NotADumpError
from .base import DumpSource, Format
from .mindspore.reader import FORMAT as MINDSPORE


class _Deferred(Format):
    """A format recognised by a light module of its own (``root_of``, ``why_not``): its reader, with
    numpy and h5py behind it, loads only when a dump of it is opened."""

    def __init__(self, name: str, detect: str, reader: str) -> None:
        self.name = name
        self._detect = detect
        self._reader = reader

    @property
    def description(self) -> str:  # type: ignore[override]
        """The reader's own description."""
        return self.load().description

    def load(self) -> Format:
        """The format itself, its reader imported."""
        fmt: Format = importlib.import_module(self._reader, __name__).FORMAT
        return fmt

    def root_of(self, path: str) -> str | None:
        """As the format's detection module says."""
        root: str | None = importlib.import_module(self._detect, __name__).root_of(path)
        return root

    def why_not(self, path: str) -> str:
        """As the format's detection module says."""
        why: str = importlib.import_module(self._detect, __name__).why_not(path)
        return why

    def open(self, root: str, path: str) -> DumpSource:
        """The format's own ``open``."""
        return self.load().open(root, path)


TDBG_H5 = _Deferred("tdbg-h5", ".tdbg_h5.detect", ".tdbg_h5.reader")
MSPROBE = _Deferred("msprobe", ".msprobe.detect", ".msprobe.reader")

# Tried in order: a format with a marker file of its own comes before one recognised by layout.
FORMATS: tuple[Format, ...] = (TDBG_H5, MINDSPORE, MSPROBE)

__all__ = ["FORMATS", "find_dump_roots", "format_names", "open_source"]


_MAX_DEPTH = 3


def _format_of(path: str) -> tuple[str, Format] | None:
    for fmt in FORMATS:
        root = fmt.root_of(path)
        if root is not None:
            return root, fmt.load() if isinstance(fmt, _Deferred) else fmt
    return None


def find_dump_roots(path: str) -> list[tuple[str, Format]]:
    """(root, format) of the dumps at ``path``: itself, the dump it is a rank of, or dumps below it."""
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise NotADumpError(path, "no such file or directory")
    if not os.path.isdir(path):
        raise NotADumpError(path, "not a directory (expected a dump root or one rank of a dump)")
    here = _format_of(path)
    if here is not None:
        return [here]
    found: list[tuple[str, Format]] = []

    def walk(p: str, depth: int) -> None:
        try:
            children = sorted(e.path for e in os.scandir(p) if e.is_dir() and not e.name.startswith("."))
        except OSError:
            return
        for c in children:
            hit = _format_of(c)
            if hit is not None and os.path.normpath(hit[0]) == os.path.normpath(c):
                found.append(hit)
            elif depth < _MAX_DEPTH:
                walk(c, depth + 1)

    walk(path, 1)
    if not found:
        try:
            empty = not any(True for _ in os.scandir(path))
        except OSError as exc:   # an unlistable root says so, rather than "not a dump"
            raise NotADumpError(path, f"cannot list: {exc.strerror or exc}") from exc
        if empty:
            raise NotADumpError(path, "empty directory")
        tried = "; ".join(f"{f.name}: {f.why_not(path)}" for f in FORMATS)
        raise NotADumpError(path, f"not a dump of any known format ({tried})")
    return found


def open_source(path: str) -> DumpSource:
    """Open one dump (a root or one of its ranks) into rank readers."""
    path = os.path.abspath(path)
    roots = find_dump_roots(path)
    if len(roots) > 1:
        raise NotADumpError(path, f"holds {len(roots)} dumps ({', '.join(os.path.relpath(r, path) for r, _ in roots)}); "
                            "open one of them")
    root, fmt = roots[0]
    return fmt.open(root, path)


def format_names() -> list[str]:
    """Names of the formats tdbg reads, in the order they are tried."""
    return [f.name for f in FORMATS]
