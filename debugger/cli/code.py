"""`tdbg code`: every node a source line created, forward and backward marked."""
from __future__ import annotations

import argparse
from typing import TextIO

from .exits import Exit
from ..model import Dump, open_dump
from .report import table
from ..model.source import parse_location
from ..model.sourceroots import SourceRoots
from .common import add_json, add_source_root, print_json, report_warnings, source_roots


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The arguments of `tdbg code`."""
    s.add_argument("dump", help="dump root or one rank of it")
    s.add_argument("location", help="FILE:LINE; FILE matches by path suffix (train.py:14)")
    s.add_argument("--rank", type=int, help="only this rank")
    add_json(s)
    add_source_root(s)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Every node created by a source line, forward and backward marked."""
    dump = open_dump(args.dump)
    file, line = parse_location(args.location)
    roots = source_roots(args, [dump.root])
    nodes = [n for n in dump.nodes_at(file, line, roots.statement_lines, roots.assigned_attribute)
             if args.rank is None or n["rank"] == args.rank]
    files = sorted({n.pop("file") for n in nodes})
    report_warnings(args, dump.all_warnings())
    found = {f: roots.describe(f)["found"] for f in files}
    if args.json:
        print_json({"location": args.location, "files": files, "found": found, "nodes": nodes}, out)
        return Exit.OK
    if not nodes:
        _print_nothing(dump, args.location, out)
        return Exit.OK
    code = _code_text(dump, roots, files[0], line) if files else ""
    out.write(f"{args.location}  {code}\n")
    for f in files:
        if found[f] and found[f] != f:
            out.write(f"  {f}\n    found at {found[f]}\n")
    for direction in ("forward", "backward", "definition"):
        rows = [[n["rank"], n["graph"], n["op_type"], n["kind"], n["node"]] for n in nodes if n["direction"] == direction]
        if rows:
            out.write(f"  {direction} ({len(rows)}):\n" + table(rows, ["rank", "graph", "op", "kind", "node"], indent="    ") + "\n")
    return Exit.OK


def _code_text(dump: Dump, roots: SourceRoots, file: str, line: int) -> str:
    """The line's code as the stacks recorded it, else as the file under the source roots holds it (a line the
    stacks never named: the second line of a statement that defines a layer); '' when neither has it."""
    code = dump.source_index.code(file, line)
    if code:
        return code
    text = roots.read(file)["text"]
    lines = text.splitlines() if text is not None else []
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _print_nothing(dump: Dump, location: str, out: TextIO) -> None:
    """No node: say so, and which user files the stacks do name."""
    out.write(f"No node was created by {location}.\n")
    known = [f for f in dump.source_index.all_files() if not dump.source_index.is_framework(f)]
    if known:
        out.write("User source files in the stacks:\n" + "\n".join(f"  {f}" for f in known[:20]) + "\n")
