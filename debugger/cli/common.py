"""What several commands share: their common options, JSON output, load warnings on stderr, source roots,
the Dask cluster of ``--scheduler``."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any, Sequence, TextIO

from ..errors import DumpError
from ..common.executors import connect
from ..common.selection import parse_iterations, parse_ranks
from ..model.sourceroots import SourceRoots


def print_json(obj: Any, out: TextIO) -> None:
    """``obj`` as indented JSON, newline-ended."""
    out.write(json.dumps(obj, indent=2, default=str) + "\n")   # one write: json.dump writes each token


def report_warnings(args: argparse.Namespace, warnings: Sequence[str], limit: int = 20) -> None:
    """A dump's load problems on stderr (every command shows them; ``--json`` carries them too)."""
    err: TextIO = getattr(args, "err", sys.stderr)
    for w in warnings[:limit]:
        err.write(f"tdbg: warning: {w}\n")
    if len(warnings) > limit:
        err.write(f"tdbg: warning: ... {len(warnings) - limit} more\n")


def parse_selection(args: argparse.Namespace) -> tuple[set[int] | None, list[int] | None]:
    """``--iterations`` and ``--ranks`` (None: all); a malformed one is a DumpError (exit 2) naming it."""
    try:
        return parse_iterations(args.iterations), parse_ranks(args.ranks)
    except ValueError as exc:
        raise DumpError(None, str(exc)) from None


def source_roots(args: argparse.Namespace, dump_paths: Sequence[str]) -> SourceRoots:
    """The folders source files are looked up in: ``--source-root``, ``$TDBG_SOURCE_ROOTS``, the dump, and (the
    command line reads for its own user) the recorded path itself."""
    return SourceRoots(list(dump_paths), list(getattr(args, "source_root", None) or []), trust_recorded=True)


def add_json(s: argparse.ArgumentParser) -> None:
    """``--json``."""
    s.add_argument("--json", action="store_true", help="machine-readable output")


def add_source_root(s: argparse.ArgumentParser) -> None:
    """``--source-root`` (repeatable)."""
    s.add_argument("--source-root", action="append", metavar="DIR|OLD=NEW",
                   help="where the recorded source files are on this machine (repeatable; also "
                        "$TDBG_SOURCE_ROOTS, os.pathsep-separated): DIR is searched for the longest "
                        "trailing part of a recorded path, OLD=NEW rewrites a recorded prefix")


def add_cache(s: argparse.ArgumentParser) -> None:
    """``--no-cache`` and ``--cache-dir``."""
    s.add_argument("--no-cache", action="store_true", help="neither read nor write the statistics cache")
    s.add_argument("--cache-dir", help="statistics cache folder (default: $TDBG_CACHE_DIR or ~/.cache/tdbg)")


def add_scheduler(parser: argparse.ArgumentParser) -> None:
    """The ``--scheduler`` option of the commands that read tensors."""
    parser.add_argument("--scheduler", metavar="ADDRESS|local[:N]",
                        help="run the tensor work on a Dask cluster: a scheduler's address (tcp://host:8786; its "
                             "workers must see the dump path) or local[:N] for N local worker processes "
                             "(needs tdbg[dask])")


def cluster_workers(args: argparse.Namespace) -> Any:
    """The Dask cluster of ``--scheduler`` as a context manager (None without the flag: the local pool)."""
    spec = getattr(args, "scheduler", None)
    if not spec:
        return contextlib.nullcontext(None)
    try:
        return connect(spec, getattr(args, "jobs", None))
    except ValueError as exc:
        raise DumpError(None, str(exc)) from None
