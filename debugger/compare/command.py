"""`tdbg compare`: ranks of one dump against a base rank, or dump A against dump B."""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import DumpError
from ..executors import add_scheduler, cluster_workers
from ..exits import Exit
from ..report import fmt_num, table
from ..selection import lacking_iterations, present_ranks, ranges_text

if TYPE_CHECKING:   # the comparison itself (numpy) loads when it runs, not when the parser is built
    from ..model import Dump
    from .runs import CompareResult, Pair

_SHOWN = 50

HELP = """\
Ranks of one dump (DUMP alone, or --ranks): at every iteration each rank is compared with the base
rank on what data parallelism keeps equal (weights, optimizer state, all-reduce, all-gather and broadcast
outputs and what is computed from them only); --all-tensors also lists activations and local
gradients with their grade, but only the tensors that must agree set the exit status.
Two dumps (DUMP DUMP_B): the same rank and iteration in both, DUMP_B the baseline; tensors matched
by full name, then by aligned execution orders (renumbered ops), then by --mapping.

Grades (msprobe's metrics): error when (cosine < cos_error=0.99 and max_abs_err > abs_error=1e-3) or
cosine < cos_fail=0.9 or max_abs_err > abs_fail=1, or dtype/shape differ, NaN/Inf on one side only,
a tensor missing on one side; warning when cosine < cos_warn=0.999, max_abs_err > abs_warn=1e-4 or
one_thousandth < ratio_warn=0.999. A tensor with statistics but no values (a statistics-only dump)
is graded by the largest relative difference of a statistic both sides stored: error above
stat_error=1e-3, warning above stat_warn=1e-5. Exit 0 when pairs were compared and nothing counted is
an error, 1 when a counted pair is an error, 2 on bad usage, on --rank/--iterations that a dump lacks
entirely (those it lacks in part are warnings) and when nothing was compared (no pair: "Nothing compared"
says why; no pair is no evidence of agreement).
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `tdbg compare`."""
    s = subparsers.add_parser("compare", help="ranks vs a base rank, or dump A vs dump B; exit 1 on errors",
                              description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("dump", help="dump root (side a)")
    s.add_argument("dump_b", nargs="?", help="baseline dump root (side b); omit to compare ranks")
    s.add_argument("--ranks", action="store_true", help="compare the ranks of DUMP with the base rank")
    s.add_argument("--base", type=int, default=0, help="base rank of --ranks (default 0)")
    s.add_argument("--all-tensors", action="store_true",
                   help="with --ranks: also compare tensors that may differ (listed, not counted)")
    s.add_argument("--all", action="store_true", help="list every pair, passes included")
    s.add_argument("--rank", type=int, action="append",
                   help="only this rank (repeatable; with --ranks: compared with the base)")
    s.add_argument("--iterations", help="iterations, e.g. 0-5,8 (default: all)")
    s.add_argument("--mapping", metavar="FILE", help='two dumps: JSON {"a_name": "b_name"} of renamed nodes')
    s.add_argument("--jobs", type=int, default=None, help="worker processes (default: all cores)")
    add_scheduler(s)
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--no-cache", action="store_true", help="neither read nor write the comparison cache")
    s.add_argument("--cache-dir", help="cache folder (default: $TDBG_CACHE_DIR or ~/.cache/tdbg)")
    s.add_argument("--thresholds", metavar="NAME=VALUE,...",
                   help="override grade bounds: cos_error, abs_error, cos_fail, abs_fail, cos_warn, abs_warn, "
                        "ratio_warn, stat_error, stat_warn")
    s.set_defaults(func=run)
    return s


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run `tdbg compare`; returns the exit code."""
    from ..cache import StatsCache
    from ..model import open_dump
    from ..report import Progress
    from .metrics import Thresholds
    from .ranks import compare_ranks
    from .runs import compare_runs, iteration_set

    ranks_mode = args.ranks or args.dump_b is None
    if args.ranks and args.dump_b is not None:
        raise DumpError(None, "--ranks compares the ranks of one dump: give one DUMP, or drop --ranks")
    if ranks_mode and args.mapping:
        raise DumpError(None, "--mapping is for two dumps (DUMP DUMP_B)")
    if not ranks_mode and (args.all_tensors or args.base != 0):
        raise DumpError(None, "--base and --all-tensors are for --ranks (one dump)")
    if args.jobs is not None and args.jobs < 1:
        raise DumpError(None, f"--jobs needs a positive number, got {args.jobs}")
    try:
        thresholds = Thresholds.parse(args.thresholds)
    except ValueError as exc:
        raise DumpError(None, f"--thresholds: {exc}") from None
    its = iteration_set(args.iterations)
    dumps = [open_dump(args.dump)] + ([] if ranks_mode else [open_dump(args.dump_b)])
    loaded = [w for d in dumps for w in d.all_warnings()]
    ranks, notes = _selected(dumps, args.rank, its, args.base if ranks_mode else None)
    cache = StatsCache.for_dump(dumps[0].root, args.cache_dir, enabled=not args.no_cache)
    progress = Progress("comparing")
    with cluster_workers(args) as workers:
        if ranks_mode:
            result = compare_ranks(dumps[0], base=args.base, ranks=ranks, iterations=its,
                                   all_tensors=args.all_tensors, thresholds=thresholds, jobs=args.jobs, cache=cache,
                                   progress=progress, workers=workers)
        else:
            result = compare_runs(dumps[0], dumps[1], ranks=ranks, iterations=its,
                                  mapping=args.mapping, thresholds=thresholds, jobs=args.jobs, cache=cache,
                                  progress=progress, workers=workers)
    # what the selection lacks and the dumps' load problems (an unreadable graph, unparsed file names)
    # belong with the answer
    result.warnings[:0] = [w for w in notes + loaded if w not in result.warnings]
    if args.json:
        json.dump(result.to_dict(all_pairs=args.all), out, indent=2, default=str)
        out.write("\n")
    else:
        print_result(result, out, all_pairs=args.all)
    nothing = result.nothing_compared()
    if nothing is not None:
        # no pair is no evidence of agreement: never the "no divergence" of exit 0
        err: TextIO = getattr(args, "err", sys.stderr)
        err.write(f"tdbg: error: {result.a}: nothing compared: {nothing}\n")
        return Exit.USAGE
    return Exit.FOUND if result.exit_code else Exit.OK


def _selected(dumps: list[Dump], ranks: list[int] | None, its: set[int] | None,
              base: int | None) -> tuple[list[int] | None, list[str]]:
    """The requested ranks every dump holds, and warnings naming the ranks and iterations a dump lacks
    (DumpError, exit 2, when a dump holds none of them)."""
    notes: list[str] = []
    if ranks is not None:
        common = set(ranks)
        for d in dumps:
            held, lack = present_ranks(d, ranks)
            common &= set(held or ())
            notes += lack
        ranks = sorted(common)
        if not ranks:
            raise DumpError(dumps[0].root, f"nothing to read: no requested rank is in both dumps (it has ranks "
                            f"{ranges_text(dumps[0].rank_ids, ', ')}, {dumps[-1].root} has ranks "
                            f"{ranges_text(dumps[-1].rank_ids, ', ')})")
    # ranks mode reads the base rank too; run mode the ranks both dumps hold
    read = None if ranks is None else sorted(set(ranks) | ({base} if base in dumps[0].rank_ids else set()))
    for d in dumps:
        notes += lacking_iterations(d, read, its)
    return ranks, notes


# -- human output -------------------------------------------------------------------------------
def _who(p: Pair, mode: str) -> str:
    return f"{p.a.rank} vs {p.b.rank}" if mode == "ranks" else str(p.a.rank)


def _tensor(p: Pair) -> str:
    name = p.node if p.op_type == "Parameter" else _short(p.node)
    if p.node_b:
        name += f" (b: {_short(p.node_b, 40)})"
    return name


def _short(node: str, width: int = 64) -> str:
    return node if len(node) <= width else "..." + node[-(width - 3):]


def _io(p: Pair) -> str:
    return f"{'in' if p.io == 'input' else 'out'}{p.slot}"


def print_result(result: CompareResult, out: TextIO, all_pairs: bool = False) -> None:
    """The human report: header, first divergence, per-iteration summary, divergent pairs worst first."""
    from .metrics import ERROR, PASS, WARNING
    from .runs import Pair

    s = result.summary()
    its = ranges_text(result.iterations)
    if result.mode == "ranks":
        out.write(f"Compared ranks {ranges_text(result.ranks)} with base rank {result.base} of {result.a}\n"
                  f"  iterations {its}: {s['pairs']} pair(s), {s['counted']} of tensors that must agree\n")
    else:
        out.write(f"Compared {result.a} (a)\n    with {result.b} (b, baseline)\n"
                  f"  ranks {ranges_text(result.ranks)}, iterations {its}: {s['pairs']} pair(s)\n")
    f = result.first_divergence
    nothing = result.nothing_compared()
    if nothing is not None:
        out.write(f"\nNothing compared: {nothing}.\n")
    elif f is None:
        what = "every tensor that must agree does" if result.mode == "ranks" else "no pair is graded error"
        out.write(f"\nNo divergence: {what}.\n")
    else:
        ranks = f"rank {f.a.rank} vs {f.b.rank}" if result.mode == "ranks" else f"rank {f.a.rank}"
        kind = f"{f.kind}{', ' + f.param if f.param and f.param != f.node else ''}"
        out.write(f"\nFirst divergence: iteration {f.iteration}, {ranks}: {_tensor(f)} {f.io} {f.slot} "
                  f"({kind}, {f.op_type})\n  {f.grade}: {f.reason}\n  code: {f.source or 'no user code line'}\n")
    rows = [[r["iteration"], r["pairs"], r[PASS], r[WARNING], r[ERROR]]
            + ([r["counted_errors"]] if result.mode == "ranks" else []) for r in s["iterations"]]
    head = ["iter", "pairs", "pass", "warning", "error"] + (["must-agree errors"] if result.mode == "ranks" else [])
    if rows:
        out.write("\n" + table(rows, head) + "\n")
    shown = result.pairs if all_pairs else result.divergent()
    if all_pairs:
        shown = sorted(shown, key=Pair.severity_key)
    if shown:
        title = "All pairs" if all_pairs else "Divergent tensors"
        out.write(f"\n{title}, worst first ({len(shown)}):\n")
        rows = []
        for p in shown[:_SHOWN]:
            m = p.metrics
            row = [p.grade, p.iteration, _who(p, result.mode), _tensor(p), _io(p),
                   fmt_num(m.cosine) if m else "-", fmt_num(m.max_abs_err) if m else "-",
                   fmt_num(m.max_rel_err) if m else "-", p.reason, p.source or "-"]
            if result.mode == "ranks":
                row.insert(3, "yes" if p.counted else "no")
            rows.append(row)
        head = ["grade", "iter", "rank" if result.mode == "runs" else "ranks", "tensor", "io", "cosine", "max_abs",
                "max_rel", "reason", "code"]
        if result.mode == "ranks":
            head.insert(3, "must agree")
        out.write(table(rows, head) + "\n")
        if len(shown) > _SHOWN:
            out.write(f"  ... {len(shown) - _SHOWN} more (see --json)\n")
    if result.warnings:
        out.write(f"\nWarnings ({len(result.warnings)}):\n")
        for w in result.warnings[:20]:
            out.write(f"  - {w}\n")
        if len(result.warnings) > 20:
            out.write(f"  ... {len(result.warnings) - 20} more (see --json)\n")
