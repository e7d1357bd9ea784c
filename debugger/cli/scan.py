"""`tdbg scan`: run watchpoints over a dump; exit 1 on hits.

A re-scan of an unchanged dump is answered from the stored result: this module and what it imports at
the top load none of numpy, h5py, networkx or a process pool (tests/test_lazy_imports.py); the engine
imports its tensor work after its stored-result lookup.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from ..stats.cache import StatsCache
from ..errors import DumpError
from .exits import Exit, verdict_exit
from ..model import Dump, open_dump
from .report import Progress
from ..common.selection import lacking_iterations, present_ranks, ranges_text
from ..watch.engine import scan_warnings
from ..watch.registry import Watchpoint, describe_conditions, preset
from ..watch.session import ScanSession
from .common import add_cache, add_json, add_scheduler, cluster_workers, parse_selection, print_json, report_warnings
from .scan_report import print_conditions, print_scan
from .scan_series import print_series_hits, scan_series, split


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The arguments of `tdbg scan`."""
    s.add_argument("dump", nargs="?", help="dump root or one rank of it")
    s.add_argument("--watch", action="append", metavar="NAME[:param=value,...]", help="a watchpoint (repeatable)")
    s.add_argument("--preset", help="a preset of watchpoints (recommended)")
    s.add_argument("--config", help="JSON or YAML list of {name, params} watchpoints")
    s.add_argument("--ranks", help="ranks, e.g. 0-3,7 (default: all)")
    s.add_argument("--iterations", help="iterations, e.g. 0-5,8 (default: all)")
    s.add_argument("--where", metavar="FILE:LINE", help="only nodes created by this code line")
    s.add_argument("--node", help="only nodes or parameters matching this glob")
    s.add_argument("--scope", help="only nodes under this scope prefix")
    s.add_argument("--series", action="store_true",
                   help="also run the watchpoints that compare iterations over every step of the per-step series "
                        "where it answers them (update ratios, loss_not_decreasing)")
    s.add_argument("--follow", action="store_true",
                   help="keep scanning a dump a running job writes: new settled iterations (and series steps) as they "
                        "come, one line per new hit (one JSON object per line with --json); Ctrl-C or SIGTERM ends it")
    s.add_argument("--poll", type=float, default=1.0, metavar="S", help="--follow: seconds between looks (default 1)")
    s.add_argument("--fail-fast", action="store_true", help="--follow: exit 1 at the first hit")
    s.add_argument("--idle-exit", type=float, default=None, metavar="S",
                   help="--follow: stop once the dump has not changed for S seconds")
    s.add_argument("--jobs", type=int, default=None, help="worker processes (default: all cores)")
    add_scheduler(s)
    add_json(s)
    add_cache(s)
    s.add_argument("--strict", action="store_true",
                   help="treat any check that could not run (not only a watchpoint that checked nothing) as an "
                        "incomplete scan, and an incomplete scan as a failure: exit 1 instead of 4")
    s.add_argument("--list-conditions", action="store_true", help="list the conditions and exit")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run watchpoints over a dump."""
    if args.list_conditions:
        conds = describe_conditions()
        if args.json:
            print_json(conds, out)
        else:
            print_conditions(conds, out)
        return Exit.OK
    if not args.dump:
        raise DumpError(None, "scan needs a DUMP path")
    try:
        wps = build_watchpoints(args)
    except ValueError as exc:
        raise DumpError(None, str(exc)) from None
    its, ranks = parse_selection(args)
    wps, over_series = split(wps, args.series)
    if args.follow:
        from .scan_follow import follow
        if its is not None or ranks is not None or args.where:
            raise DumpError(None, "--follow scans every rank and iteration as it comes: no --ranks, --iterations or --where")
        if args.poll <= 0 or (args.idle_exit is not None and args.idle_exit < 0):
            raise DumpError(None, "--poll must be above 0 and --idle-exit at least 0 seconds")
        return follow(args, wps, over_series, out)
    dump = open_dump(args.dump)
    series_hits, warnings = scan_series(dump, ranks, over_series, not wps, its) if over_series else ([], [])
    result = None
    if wps:
        result, dump_warnings = _scan_dump(args, dump, ranks, its, wps, warnings)
        warnings = dump_warnings + warnings
        series_hits += result.series_sweep
    verdict = scan_verdict(result, series_hits, args.strict)
    if args.json:
        doc = {**(result.to_dict() if result is not None else {}), "warnings": warnings, "verdict": verdict}
        if result is not None:
            doc["coverage"] = result.coverage_dict(args.strict)
        if over_series or series_hits:
            doc["series_hits"] = [h.as_dict() for h in series_hits]
        print_json(doc, out)
    else:
        report_warnings(args, warnings)
        if result is not None:
            print_scan(result, out, args.strict, bool(series_hits))
        if over_series or series_hits:
            print_series_hits(series_hits, out)
    return verdict_exit(verdict, args.strict)


def scan_verdict(result: Any, series_hits: list, strict: bool) -> str:
    """found (a hit), incomplete (none, but not everything could be checked: README "Coverage") or clean."""
    if (result is not None and result.hits) or series_hits:
        return "found"
    if result is not None and result.status(strict) == "incomplete":
        return "incomplete"
    return "clean"


def _scan_dump(args: argparse.Namespace, dump: Dump, ranks: list[int] | None, its: Any,
               wps: list[Watchpoint], earlier: list[str]) -> tuple[Any, list[str]]:
    """(result, warnings) of the watchpoints over the dumped iterations (``earlier``: warnings shown
    too when nothing could be scanned)."""
    ranks, selection_notes = present_ranks(dump, ranks)
    cache = StatsCache.for_dump(dump.root, args.cache_dir, enabled=not args.no_cache)
    session = ScanSession(dump, cache, watchpoints=wps)   # no store: a command line's scan is its own
    with cluster_workers(args) as workers:
        result = session.scan(ranks=ranks, iterations=its, where=args.where, jobs=args.jobs,
                              progress=Progress("scanning"), workers=workers)
    warnings = scan_warnings(dump, result)
    try:
        # after the scan, from what it found: a stored result is answered without listing the iterations
        selection_notes += lacking_iterations(dump, ranks, its, result.iterations)
        if not result.iterations:
            raise DumpError(dump.root, f"nothing scanned: {_nothing_dumped(dump, ranks)}")
    except DumpError:
        report_warnings(args, selection_notes + warnings + earlier)   # the load problems may say why
        raise
    return result, selection_notes + warnings


def build_watchpoints(args: argparse.Namespace) -> list[Watchpoint]:
    """Watchpoints from --watch, --config and --preset (recommended when none is given)."""
    wps = [Watchpoint.parse(w) for w in args.watch or []]
    if args.config:
        wps += [Watchpoint.from_dict(d) for d in load_config(args.config)]
    if args.preset or not wps:
        wps += preset(args.preset or "recommended")
    if args.node or args.scope:
        wps = [type(w)(w.condition, w.params, w.node or args.node, w.scope or args.scope) for w in wps]
    return wps


def load_config(path: str) -> list[dict]:
    """The watchpoints of a JSON or YAML config file (a list, or ``{"watchpoints": [...]}``)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise DumpError(path, f"cannot read watchpoint config ({exc.strerror})") from exc
    try:
        data = json.loads(text)
    except ValueError:
        data = _yaml(path, text)
    if isinstance(data, dict) and "watchpoints" in data:
        data = data["watchpoints"]
    if not isinstance(data, list):
        raise DumpError(path, "expected a list of watchpoints ({name, params})")
    return data


def _yaml(path: str, text: str) -> Any:
    try:
        import yaml   # optional (not a dependency of tdbg): only a config that is not JSON needs it
    except ImportError:
        raise DumpError(path, "not JSON (install pyyaml to read YAML configs)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DumpError(path, f"neither JSON nor YAML ({exc.__class__.__name__})") from None


def _nothing_dumped(dump: Dump, ranks: list[int] | None) -> str:
    """Why a dump (its selected ranks) gave nothing to read: it dumped no iteration."""
    ids = ranks if ranks is not None else dump.rank_ids
    who = f"rank {ids[0]}" if len(ids) == 1 else f"ranks {ranges_text(ids, ', ')}"
    return f"{who} dumped no iteration (a recording that captured nothing, or an empty dump)"
