"""The one line an internal error (a bug in tdbg, exit 3) prints: what failed and the file it was reading."""
from __future__ import annotations

import argparse
import os


def internal_error_line(exc: BaseException, args: argparse.Namespace) -> str:
    """``tdbg: internal error while reading PATH: Type: message (run with --debug ...)``, newline-ended."""
    where = _path_being_read(exc) or _dump_argument(args)
    return (f"tdbg: internal error{' while reading ' + _one_line(where) if where else ''}: "
            f"{type(exc).__name__}: {_one_line(str(exc))}"
            f"{'' if args.debug else ' (run with --debug for the traceback)'}\n")


def _path_being_read(exc: BaseException) -> str | None:
    """The innermost ``path`` a frame of the traceback was working on (str locals named path/location)."""
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for name in ("path", "location", "root"):
            v = frame.f_locals.get(name)
            # only an absolute path: a local named path can also be a scope path inside a graph
            if isinstance(v, str) and os.path.isabs(v):
                return v
    return None


def _dump_argument(args: argparse.Namespace) -> str | None:
    """The dump the command was given, when no frame names a file (the message names at least that)."""
    dump = getattr(args, "dump", None)
    dump = dump[0] if isinstance(dump, list) and dump else dump
    return os.path.abspath(dump) if isinstance(dump, str) else None


def _one_line(text: str, limit: int = 400) -> str:
    """``text`` on one line, clipped: the message of an internal error stays one readable line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."
