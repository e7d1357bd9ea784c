"""Find dumps on disk and open them."""
from __future__ import annotations

import os

from ..errors import NotADumpError
from ..model import Dump
from .mindspore.tree import RANK_RE, is_rank_dir, rank_dirs

_MAX_DEPTH = 3


def find_dump_roots(path: str) -> list[str]:
    """Dump roots at ``path``: itself, its ``rank_N`` parent, or dump roots below it."""
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise NotADumpError(path, "no such file or directory")
    if not os.path.isdir(path):
        raise NotADumpError(path, "not a directory (expected a dump root holding rank_N dirs)")
    if rank_dirs(path) or is_rank_dir(path):
        return [path]
    found: list[str] = []

    def walk(p: str, depth: int) -> None:
        try:
            children = sorted(e.path for e in os.scandir(p) if e.is_dir() and not e.name.startswith("."))
        except OSError:
            return
        for c in children:
            if rank_dirs(c):
                found.append(c)
            elif depth < _MAX_DEPTH:
                walk(c, depth + 1)

    walk(path, 1)
    if not found:
        empty = not any(True for _ in os.scandir(path))
        raise NotADumpError(
            path, "empty directory" if empty else "not a MindSpore dump (no rank_N directory found)")
    return found


def open_dump(path: str) -> Dump:
    """Open one dump: a dump root or a single ``rank_N`` dir."""
    path = os.path.abspath(path)
    roots = find_dump_roots(path)
    if len(roots) > 1:
        raise NotADumpError(path, f"holds {len(roots)} dumps ({', '.join(os.path.relpath(r, path) for r in roots)}); "
                            "open one of them")
    root = roots[0]
    if is_rank_dir(root):
        m = RANK_RE.match(os.path.basename(os.path.normpath(root)))
        assert m is not None
        return Dump(os.path.dirname(os.path.normpath(root)), [(int(m.group(1)), root)])
    return Dump(root, rank_dirs(root))


def open_dumps(path: str) -> list[Dump]:
    """Open every dump found at ``path``."""
    return [open_dump(r) for r in find_dump_roots(path)]
