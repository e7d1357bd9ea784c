"""The `tdbg` command: info, node, code, scan, compare, convert, graph, serve, spikes.

:data:`COMMANDS` is the command table: each command's module and its one-line help. It is the one place
where loading is lazy: a command's module (and what it imports: numpy, the engines, Flask) is imported
only when that command runs, so `tdbg --help` and a cached re-scan stay light.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import sys
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Sequence, TextIO

from ..errors import DumpError
from .exits import Exit
from ..common.gcpause import paused_gc
from .failures import internal_error_line
from .pipes import PipeSafeOutput


@dataclass(frozen=True)
class Command:
    """One command: its module under ``debugger.cli`` (``add_arguments(parser)``, ``run(args, out)``)."""

    module: str
    help: str
    pause_gc: bool = True   # serve runs for days: its collector stays on


COMMANDS: dict[str, Command] = {
    "info": Command("info", "what a dump holds"),
    "node": Command("node", "one node: kind, inputs, outputs, source stack"),
    "code": Command("code", "the nodes a source line created"),
    "scan": Command("scan", "run watchpoints; exit 1 on hits"),
    "compare": Command("compare", "ranks vs a base rank, or dump A vs dump B; exit 1 on errors"),
    "convert": Command("convert", "any readable dump into tdbg's HDF5 format"),
    "graph": Command("graph", "export one scope level of a graph (DOT, SVG, PNG)"),
    "serve": Command("serve", "the web UI", pause_gc=False),
    "spikes": Command("spikes", "loss spikes of a per-step series and what moved first; exit 1 on spikes"),
}


def load_command(name: str) -> ModuleType:
    """The module of command ``name``, imported now (the lazy boundary)."""
    return importlib.import_module(f".{COMMANDS[name].module}", __name__)


def _chosen(argv: Sequence[str]) -> str | None:
    """The command named on the line: the first word that is no option (tdbg's own options take no value)."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """tdbg's parser: every command listed with its help, the arguments of the one ``argv`` names."""
    p = argparse.ArgumentParser(prog="tdbg", description="Offline debugger for training dumps.")
    p.add_argument("--debug", action="store_true",
                   help="print the traceback of an internal error (exit status 3), e.g. tdbg --debug scan DUMP")
    sub = p.add_subparsers(dest="command", required=True)
    chosen = _chosen(argv)
    for name, command in COMMANDS.items():
        s = sub.add_parser(name, help=command.help)
        if name == chosen:
            module = load_command(name)
            module.add_arguments(s)
            s.set_defaults(run=module.run)
    return p


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run tdbg; returns the exit code."""
    out = PipeSafeOutput(out or sys.stdout)     # type: ignore[assignment]  # a closed pipe keeps the status
    err = err or sys.stderr
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(words).parse_args(words)
    except SystemExit as exc:
        return int(exc.code or 0) and Exit.USAGE
    except Exception as exc:  # the command's module failed to import: a broken install or a bug, exit 3
        err.write(internal_error_line(exc, argparse.Namespace(debug="--debug" in words)))
        return Exit.INTERNAL
    args.err = err
    try:
        if not COMMANDS[args.command].pause_gc:
            return int(args.run(args, out))
        with paused_gc():   # a command allocates many acyclic records, then exits: no collector passes over them
            code = int(args.run(args, out))
            if argv is None:
                # The tdbg command itself, about to exit: the collector's last passes over every record
                # of the dump would cost 0.1-0.2 s on a 50,000-file dump and free nothing the exit does not.
                # Frozen before the collector is enabled again, else that first young pass still runs.
                gc.freeze()
        return code
    except DumpError as exc:
        err.write(f"tdbg: error: {exc}\n")
        return Exit.USAGE
    except KeyboardInterrupt:
        err.write("tdbg: interrupted\n")
        return Exit.INTERRUPTED
    except BrokenPipeError:     # written past the command's output (sys.stdout itself): its status is unknown
        err.write("tdbg: error: the output pipe was closed before the command finished\n")
        return Exit.INTERNAL
    except Exception as exc:  # a bug, not the user's: its own status, one line, the file it was reading
        err.write(internal_error_line(exc, args))
        if args.debug:
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=err)
        return Exit.INTERNAL


__all__ = ["COMMANDS", "Command", "build_parser", "load_command", "main"]
