"""`tdbg graph`: one scope level of a graph, as the web view shows it, as DOT, SVG or PNG."""
from __future__ import annotations

import argparse
import os
from typing import TextIO

from ..errors import DumpError
from .exits import Exit
from ..views.export import export_scope
from ..model import open_dump
from ..query import FOLD
from .report import human_bytes
from .common import report_warnings

_GRAPH_EXTS = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".png": "png"}


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The arguments of `tdbg graph`."""
    s.add_argument("dump", help="dump root or one rank of it")
    s.add_argument("--rank", type=int, help="rank (default: the first)")
    s.add_argument("--graph", type=int, help="graph id (default: the first)")
    s.add_argument("--scope", default="", metavar="PATH",
                   help="scope or folded group, as the graph view names it (default: the root)")
    s.add_argument("--format", choices=["dot", "svg", "png"],
                   help="dot (text), svg or png (these two need Graphviz); default: from -o, else dot")
    s.add_argument("--fold", type=int, default=FOLD, metavar="N",
                   help=f"fold N or more same-type siblings into one node (0: never; default {FOLD})")
    s.add_argument("--framework", action="store_true", help="show routing nodes (those that only pass values on)")
    s.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout; PNG needs a file)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Export one scope level of a graph, as the web view shows it, as DOT, SVG or PNG."""
    # -o x.svg says the format when --format does not
    fmt = args.format or _GRAPH_EXTS.get(os.path.splitext(args.output or "")[1].lower(), "dot")
    if fmt == "png" and not args.output:
        raise DumpError(None, "PNG is binary: give -o FILE")
    if args.fold < 0:
        raise DumpError(None, f"bad --fold {args.fold}: expected 0 (no folding) or more")
    dump = open_dump(args.dump)
    rank = dump.rank(args.rank if args.rank is not None else dump.rank_ids[0])
    gid = args.graph if args.graph is not None else (rank.graph_ids or [0])[0]
    report_warnings(args, rank.warnings)
    exp = export_scope(rank.graph(gid), args.scope, fmt, fold=args.fold, framework=args.framework,
                       rank=rank.rank)
    if not args.output:
        out.write(exp.data.decode("utf-8"))
        return Exit.OK
    if dump.holds(args.output):
        raise DumpError(args.output, f"is inside the dump {dump.root}; tdbg never writes there")
    try:
        with open(args.output, "wb") as f:
            f.write(exp.data)
    except OSError as exc:
        raise DumpError(args.output, f"cannot write ({exc.strerror})") from None
    out.write(f"wrote {args.output} ({fmt}, {human_bytes(len(exp.data))})\n")
    return Exit.OK
