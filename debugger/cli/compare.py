"""`tdbg compare`: ranks of one dump against a base rank, or dump A against dump B."""
from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ..stats.cache import StatsCache
from ..compare.grades import GradeThresholds
from ..compare.logical_runs import compare_logical, logical_layouts_differ
from ..compare.pairs import iteration_set
from ..compare.ranks import compare_ranks
from ..compare.runs import compare_runs
from ..errors import DumpError
from .exits import Exit
from ..model import Dump, open_dump
from .report import Progress
from ..common.selection import lacking_iterations, present_ranks, ranges_text
from .common import add_json, add_scheduler, cluster_workers, print_json
from .compare_report import print_result

HELP = """\
Ranks of one dump (DUMP alone, or --ranks): at every iteration each rank is compared with the base
rank on what data parallelism keeps equal (weights, optimizer state, all-reduce, all-gather and broadcast
outputs and what is computed from them only); --all-tensors also lists activations and local
gradients with their grade, but only the tensors that must agree set the exit status.
Two dumps (DUMP DUMP_B): the same rank and iteration in both, DUMP_B the baseline; tensors matched
by full name, then by aligned execution orders (renumbered ops), then by --mapping.
Under a parallel layout (ranks that record one: FSDP, tensor or pipeline parallel), --ranks compares
a shard only with its replicas (never with another shard) and a collective's result within its
process group. Two runs laid out differently (either records a layout, and their rank counts or any
rank's layout differ: TP=2 against one process, FSDP against DDP), or any two runs with --logical,
are compared as logical tensors: each parameter, gradient and optimizer state assembled from every
rank's shard, and the loss (the mean of the ranks' losses), matched by name and kind per iteration;
activations are left out (their shapes and data split differ between layouts). --no-logical
compares rank by rank.

Grades (msprobe's metrics): error when (cosine < cos_error=0.99 and max_abs_err > abs_error=1e-3) or
cosine < cos_fail=0.9 or max_abs_err > abs_fail=1, or dtype/shape differ, NaN/Inf on one side only,
a tensor missing on one side; warning when cosine < cos_warn=0.999, max_abs_err > abs_warn=1e-4 or
one_thousandth < ratio_warn=0.999. A tensor with statistics but no values (a statistics-only dump)
is graded by the largest relative difference of a statistic both sides stored: error above
stat_error=1e-3, warning above stat_warn=1e-5. Where either side is bfloat16 or float16 (as the graph
records it; comparing runs, also either run's weights), the pair is graded at that dtype's precision
e (2^-8, 2^-11): abs_warn and stat_warn at least e, abs_error and stat_error at least 16 e, and the
float dtype difference is no error. Exit 0 when pairs were compared and nothing counted is
an error, 1 when a counted pair is an error, 2 on bad usage, on --rank/--iterations that a dump lacks
entirely (those it lacks in part are warnings) and when nothing was compared (no pair: "Nothing compared"
says why; no pair is no evidence of agreement).
"""


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The arguments of `tdbg compare`, and its long help."""
    s.description = HELP
    s.formatter_class = argparse.RawDescriptionHelpFormatter
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
    logical = s.add_mutually_exclusive_group()
    logical.add_argument("--logical", action="store_true", default=None,
                         help="two dumps: compare logical parameters, gradients, optimizer state and the loss "
                              "(default when the runs' layouts differ)")
    logical.add_argument("--no-logical", dest="logical", action="store_false",
                         help="two dumps: compare rank by rank even when the layouts differ")
    s.add_argument("--jobs", type=int, default=None, help="worker processes (default: all cores)")
    add_scheduler(s)
    add_json(s)
    s.add_argument("--no-cache", action="store_true", help="neither read nor write the comparison cache")
    s.add_argument("--cache-dir", help="cache folder (default: $TDBG_CACHE_DIR or ~/.cache/tdbg)")
    s.add_argument("--thresholds", metavar="NAME=VALUE,...",
                   help="override grade bounds: cos_error, abs_error, cos_fail, abs_fail, cos_warn, abs_warn, "
                        "ratio_warn, stat_error, stat_warn")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run `tdbg compare`; returns the exit code."""
    ranks_mode = args.ranks or args.dump_b is None
    if args.ranks and args.dump_b is not None:
        raise DumpError(None, "--ranks compares the ranks of one dump: give one DUMP, or drop --ranks")
    if ranks_mode and args.mapping:
        raise DumpError(None, "--mapping is for two dumps (DUMP DUMP_B)")
    if not ranks_mode and (args.all_tensors or args.base != 0):
        raise DumpError(None, "--base and --all-tensors are for --ranks (one dump)")
    if ranks_mode and args.logical is not None:
        raise DumpError(None, "--logical and --no-logical are for two dumps (DUMP DUMP_B)")
    if args.jobs is not None and args.jobs < 1:
        raise DumpError(None, f"--jobs needs a positive number, got {args.jobs}")
    try:
        thresholds = GradeThresholds.parse(args.thresholds)
    except ValueError as exc:
        raise DumpError(None, f"--thresholds: {exc}") from None
    its = iteration_set(args.iterations)
    dumps = [open_dump(args.dump)] + ([] if ranks_mode else [open_dump(args.dump_b)])
    ranks, notes = _selected(dumps, args.rank, its, args.base if ranks_mode else None)
    cache = StatsCache.for_dump(dumps[0].root, args.cache_dir, enabled=not args.no_cache)
    progress = Progress("comparing")
    with cluster_workers(args) as workers:
        if not ranks_mode and _logical(args, dumps):
            if args.mapping or args.rank:
                raise DumpError(None, "--mapping and --rank are for rank-by-rank comparison: the runs are compared "
                                "as logical tensors (their layouts differ; --no-logical compares rank by rank)")
            result = compare_logical(dumps[0], dumps[1], iterations=its, thresholds=thresholds, jobs=args.jobs,
                                     cache=cache, progress=progress, workers=workers)
        elif ranks_mode:
            result = compare_ranks(dumps[0], base=args.base, ranks=ranks, iterations=its,
                                   all_tensors=args.all_tensors, thresholds=thresholds, jobs=args.jobs, cache=cache,
                                   progress=progress, workers=workers, keep_passes=args.all)
        else:
            result = compare_runs(dumps[0], dumps[1], ranks=ranks, iterations=its,
                                  mapping=args.mapping, thresholds=thresholds, jobs=args.jobs, cache=cache,
                                  progress=progress, workers=workers)
    # what the selection lacks and the dumps' load problems (an unreadable graph, unparsed file names)
    # belong with the answer (after the comparison: it met most of them, a few ranks at a time)
    loaded = [w for d in dumps for w in d.all_warnings(release=True)]
    result.warnings[:0] = [w for w in notes + loaded if w not in result.warnings]
    if args.json:
        print_json(result.to_dict(all_pairs=args.all), out)
    else:
        print_result(result, out, all_pairs=args.all)
    nothing = result.nothing_compared()
    if nothing is not None:
        # no pair is no evidence of agreement: never the "no divergence" of exit 0
        err: TextIO = getattr(args, "err", sys.stderr)
        err.write(f"tdbg: error: {result.a}: nothing compared: {nothing}\n")
        return Exit.USAGE
    return Exit.FOUND if result.exit_code else Exit.OK


def _logical(args: argparse.Namespace, dumps: list[Dump]) -> bool:
    """Whether two runs are compared as logical tensors: --logical, or (unless --no-logical) layouts that differ."""
    if args.logical is not None:
        return bool(args.logical)
    return logical_layouts_differ(dumps[0], dumps[1])


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
