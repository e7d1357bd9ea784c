"""Recognising a tdbg-h5 dump by its marker, without loading numpy, h5py or the reader: the format
table tries this on every path it is given."""
from __future__ import annotations

import json
import os
from typing import Any

from ...errors import CorruptFileError, DumpError
from ..files import open_regular
from . import layout as L

_MAX_JSON = 1 << 20   # rank.json and the marker are small; a bigger one is not ours


def read_json(path: str) -> Any:
    """A small JSON file (DumpError naming it when unreadable, too large or not a regular file)."""
    try:
        with open_regular(path) as f:    # never blocks on a FIFO; the size is that of the file opened
            size = os.fstat(f.fileno()).st_size
            if size > _MAX_JSON:
                raise DumpError(path, f"{size} bytes; refused (metadata files are small)")
            data = f.read(_MAX_JSON + 1)
        if len(data) > _MAX_JSON:
            raise DumpError(path, "grew past 1 MiB while read; refused (metadata files are small)")
        return json.loads(data.decode("utf-8"))
    except CorruptFileError as exc:
        raise DumpError(path, exc.problem) from exc
    except OSError as exc:
        raise DumpError(path, f"cannot read: {exc.strerror or exc}") from exc
    except RecursionError as exc:      # '[' * 200000: nesting deeper than the parser's stack
        raise CorruptFileError(path, "not valid JSON (nested too deeply)") from exc
    except ValueError as exc:          # also UnicodeDecodeError
        raise CorruptFileError(path, f"not valid JSON ({exc})") from exc


def marker_problem(root: str) -> str | None:
    """Why ``root`` holds no usable tdbg-h5 marker, None when it does."""
    path = os.path.join(root, L.MARKER)
    if not os.path.isfile(path):
        return f"no {L.MARKER}"
    try:
        m = read_json(path)
    except DumpError as exc:
        return exc.problem
    if not isinstance(m, dict) or m.get("format") != L.FORMAT_NAME:
        return f"{L.MARKER} does not say format {L.FORMAT_NAME!r}"
    return None


def root_of(path: str) -> str | None:
    """``path`` when it holds a marker, its parent when it is a ``rank_R`` folder of such a root; also
    a root that lost its marker (a copy of the rank folders alone) when a rank folder holds tdbg-h5's
    own ``rank.json``."""
    p = os.path.abspath(path)
    if not os.path.isdir(p):
        return None
    if _ours(p):
        return p
    parent = os.path.dirname(p.rstrip(os.sep))
    if L.RANK_RE.match(os.path.basename(p.rstrip(os.sep))) and _ours(parent):
        return parent
    return None


def _ours(root: str) -> bool:
    """A marker is there (a damaged or foreign one is then refused by name when opened, never read as
    another format's empty dump), or the rank folders say tdbg-h5 without one."""
    return os.path.isfile(os.path.join(root, L.MARKER)) or marker_missing(root)


def marker_missing(root: str) -> bool:
    """No marker at ``root``, but a ``rank_R`` folder with a tdbg-h5 ``rank.json`` (the recorder writes one
    in every rank folder it makes): a tdbg-h5 dump whose marker was not copied."""
    if os.path.exists(os.path.join(root, L.MARKER)):
        return False            # a marker that is there but wrong is refused, never guessed past
    try:
        entries = [e for e in os.scandir(root) if L.RANK_RE.match(e.name) and e.is_dir(follow_symlinks=False)]
    except OSError:
        return False
    for e in entries[:8]:
        try:
            meta = read_json(os.path.join(e.path, L.RANK_JSON))
        except DumpError:
            continue
        if isinstance(meta, dict) and meta.get("format") == L.FORMAT_NAME:
            return True
    return False


def why_not(path: str) -> str:
    """The missing or wrong marker, in a few words."""
    p = os.path.abspath(path)
    if not os.path.isdir(p):
        return "not a directory"
    problem = marker_problem(p)
    if L.RANK_RE.match(os.path.basename(p.rstrip(os.sep))):
        problem = marker_problem(os.path.dirname(p.rstrip(os.sep))) or problem
    return problem or "is a tdbg-h5 dump"
