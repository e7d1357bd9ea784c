"""`tdbg convert`: any readable dump into tdbg's HDF5 format."""
from __future__ import annotations

import argparse
from typing import TextIO

from ..convert import ConvertResult, convert
from .exits import Exit
from ..model import open_dump
from .report import Progress, human_bytes
from ..common.selection import lacking_iterations, present_ranks, ranges_text
from .common import add_json, add_scheduler, cluster_workers, parse_selection, print_json, report_warnings


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The arguments of `tdbg convert`."""
    s.add_argument("dump", help="dump root or one rank of it")
    s.add_argument("out", help="a new (or empty) folder for the converted dump")
    s.add_argument("--statistics", action="store_true",
                   help="keep statistics and an exact digest per tensor instead of values (~100x smaller)")
    series = s.add_mutually_exclusive_group()
    series.add_argument("--series", action="store_const", const="with", dest="series",
                        help="also write each rank's per-step statistics series (one step per iteration: weights, "
                             "gradients, optimizer state, losses, activations), read by trends and `tdbg spikes`")
    series.add_argument("--series-only", action="store_const", const="only", dest="series",
                        help="write the series and the graphs but no iteration files (long runs)")
    s.add_argument("--ranks", help="ranks, e.g. 0-3,7 (default: all)")
    s.add_argument("--iterations", help="iterations, e.g. 0-5,8 (default: all)")
    add_json(s)
    add_scheduler(s)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Convert a dump into tdbg's HDF5 format."""
    its, ranks = parse_selection(args)
    dump = open_dump(args.dump)
    ranks, notes = present_ranks(dump, ranks)
    notes += lacking_iterations(dump, ranks, its)   # before a file is written: none of them is exit 2
    with cluster_workers(args) as workers:
        result = convert(dump, args.out, statistics=args.statistics, ranks=ranks, iterations=its,
                         progress=Progress("converting"), workers=workers, series=args.series)
    report_warnings(args, notes)
    if args.json:
        result.warnings[:0] = notes
        print_json(result.to_dict(), out)
        return Exit.OK
    out.write(f"Converted {result.source} -> {result.target}: ranks {ranges_text(result.ranks)}, iterations "
              f"{ranges_text(result.iterations)}, {result.graphs} graph(s), {result.tensors} tensor(s), "
              f"{human_bytes(result.bytes_read)} read; {'statistics only' if result.statistics_only else 'values and statistics'}"
              f"{_series_text(result)}\n")
    for w in result.warnings[:20]:
        out.write(f"  warning: {w}\n")
    return Exit.OK


def _series_text(result: ConvertResult) -> str:
    """What the line says of the series (nothing when none was asked for)."""
    if result.series is None:
        return ""
    files = "; no iteration files" if result.series == "only" else ""
    return f"; per-step series: {result.series_steps} step(s){files}"
