"""`tdbg scan --follow`: scan a dump that a running job is still writing, and print new hits as they come.

A folder that holds no dump yet (a job that has just started) is waited for. Each poll opens the dump
afresh (its listing is stat only) and scans the iterations not scanned yet that are settled: an
iteration is settled once a later one exists on its rank, or once the dump has not changed for a few
seconds (its files' newest mtime says so at the first poll), or when following ends
(:mod:`debugger.watch.follow`). A file still being written lies in the newest iteration of a running job,
so it is never read half-written and never reported as corrupt; the load warnings are reported once,
when the job has gone quiet (``--idle-exit``) or at the end. Watchpoints over the per-step series run
again when the series grows, and only their new hits are printed. Earlier iterations stay in the
statistics cache, so a condition that compares an iteration with the one before reads only the new
one's tensors.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from ..stats.cache import StatsCache
from ..errors import NotADumpError
from .exits import Exit
from ..model import Dump, open_dump
from ..watch.follow import Quiet, settled
from ..watch.registry import Watchpoint
from ..watch.results import ScanResult
from ..watch.session import ScanSession
from .pipes import pipe_closed
from .exits import verdict_exit
from .scan_report import coverage_lines
from .scan_series import scan_series


@dataclass
class FollowState:
    """What following has seen so far."""

    scanned: dict[int, set[int]] = field(default_factory=dict)   # rank -> iterations scanned
    changes: Quiet = field(default_factory=Quiet)
    series_seen: set[tuple[Any, ...]] = field(default_factory=set)
    series_fingerprint: str | None = None
    hits: int = 0
    warnings: list[str] = field(default_factory=list)
    cache: StatsCache | None = None
    covered: ScanResult | None = None      # the first scan's result, with every later scan's coverage added


def follow(args: argparse.Namespace, wps: list[Watchpoint], over_series: list[Watchpoint], out: TextIO) -> int:
    """Poll the dump until stopped, idle for ``--idle-exit`` seconds, or (``--fail-fast``) the first hit."""
    state = FollowState()
    stop = _on_terminate()
    try:
        _wait_for_dump(args, stop)
        while not stop():
            found = _poll(args, open_dump(args.dump), wps, over_series, state, out)
            if found and args.fail_fast:
                return Exit.FOUND
            if pipe_closed(out):      # its reader went away (`| head -1`): nobody follows any more
                return _final_verdict(args, state, out)
            if args.idle_exit is not None and state.changes.idle() >= args.idle_exit:
                break
            time.sleep(args.poll)
        # the job is over (or quiet): its newest iteration is as complete as it will be
        _poll(args, open_dump(args.dump), wps, over_series, state, out, ended=True)
    except KeyboardInterrupt:
        pass
    _final_warnings(args, state, out)
    return _final_verdict(args, state, out)


def _wait_for_dump(args: argparse.Namespace, stop: Callable[[], bool]) -> None:
    """Until the folder holds a dump (a job just started writes its first files): a missing folder, or one
    that is still no dump after ``--idle-exit`` seconds, is the usual error (exit 2)."""
    if not os.path.isdir(args.dump):
        open_dump(args.dump)        # raises the usual error
    since = time.monotonic()
    while not stop():
        try:
            open_dump(args.dump)
            return
        except NotADumpError:
            if args.idle_exit is not None and time.monotonic() - since >= args.idle_exit:
                raise
        time.sleep(args.poll)


def _poll(args: argparse.Namespace, dump: Dump, wps: list[Watchpoint], over_series: list[Watchpoint],
          state: FollowState, out: TextIO, ended: bool = False) -> int:
    """One poll: scan what is new and settled, print its hits; returns how many hits it printed."""
    state.changes.see(*dump.stamp())
    quiet = ended or state.changes.quiet()
    found = 0
    if wps:
        found += _scan_new(args, dump, wps, state, quiet, out)
    if over_series:
        found += _series_new(args, dump, over_series, state, out)
    if quiet:
        state.warnings = dump.all_warnings()
    return found


def _scan_new(args: argparse.Namespace, dump: Dump, wps: list[Watchpoint], state: FollowState, quiet: bool,
              out: TextIO) -> int:
    new = settled(dump, state.scanned, quiet)
    if not new:
        return 0
    if state.cache is None:     # one cache for the whole follow: it keeps the earlier iterations' statistics
        state.cache = StatsCache.for_dump(dump.root, args.cache_dir, enabled=not args.no_cache)
    session = ScanSession(dump, state.cache, watchpoints=wps)
    result = session.scan(ranks=sorted(new), iterations={i for its in new.values() for i in its}, jobs=args.jobs)
    hits = [h for h in sorted(result.hits, key=lambda h: h.sort_key()) if h.iteration in new.get(h.rank, ())]
    for h in hits:
        _emit(args, out, h.to_dict(), f"hit: rank {h.rank} iteration {h.iteration}: {h.watchpoint} on {h.node} "
                                      f"({h.io} {h.slot}) {_values(h.actual)}")
    for e in result.errors:
        _emit(args, out, {"error": e.to_dict()},
              f"error: rank {e.rank} iteration {e.iteration}: {e.watchpoint} on {e.node}: {e.error}")
    for rank, its in new.items():
        state.scanned.setdefault(rank, set()).update(its)
        _emit(args, out, {"scanned": {"rank": rank, "iterations": its}},
              f"scanned rank {rank} iteration(s) {', '.join(map(str, its))}")
    state.hits += len(hits)
    _add_coverage(state, result)
    return len(hits)


def _add_coverage(state: FollowState, result: ScanResult) -> None:
    """Add one poll's coverage to what following has checked so far."""
    if state.covered is None:
        state.covered = result
        return
    for order, c in result.coverage.items():
        state.covered.coverage_of(order).add(c)
    state.covered.swept += result.swept


def _final_verdict(args: argparse.Namespace, state: FollowState, out: TextIO) -> int:
    """What the followed iterations' watchpoints checked, and the exit status: 1 on a hit; 4 (1 with
    --strict) when a watchpoint checked nothing, as `tdbg scan` (a verdict is never clean by silence)."""
    if state.covered is None:
        return Exit.FOUND if state.hits else Exit.OK
    strict = bool(getattr(args, "strict", False))
    verdict = "found" if state.hits else "incomplete" if state.covered.status(strict) == "incomplete" else "clean"
    unanswered = state.covered.unanswered()
    text = "\n".join(coverage_lines(state.covered) + [f"verdict: {verdict}"]
                     + [f"  not checked: {u}" for u in unanswered if verdict == "incomplete"])
    _emit(args, out, {"coverage": state.covered.coverage_dict(strict), "verdict": verdict}, text)
    return verdict_exit(verdict, strict)


def _series_new(args: argparse.Namespace, dump: Dump, wps: list[Watchpoint], state: FollowState,
                out: TextIO) -> int:
    """The series watchpoints again when a series grew; only hits not printed before."""
    fp = "".join(r.series.fingerprint() for r in dump.ranks if r.series is not None)
    if not fp or fp == state.series_fingerprint:
        return 0
    state.series_fingerprint = fp
    hits, _ = scan_series(dump, None, wps, alone=False)
    fresh = []
    for h in hits:
        key = (h.rank, h.step, h.condition, h.tensor, h.stat)
        if key not in state.series_seen:
            state.series_seen.add(key)
            fresh.append(h)
    for h in fresh:
        _emit(args, out, {"series_hit": h.as_dict()},
              f"series hit: rank {h.rank} step {h.step}: {h.condition} {h.tensor} {h.stat}={h.value:.6g}: {h.detail}")
    state.hits += len(fresh)
    return len(fresh)


def _emit(args: argparse.Namespace, out: TextIO, doc: dict[str, Any], text: str) -> None:
    """One line: a JSON object with --json, else the text; flushed at once (a reader follows it)."""
    out.write((json.dumps(doc, default=str) if args.json else text) + "\n")
    out.flush()


def _values(actual: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in actual.items())


def _final_warnings(args: argparse.Namespace, state: FollowState, out: TextIO) -> None:
    """The dump's warnings as it was left: a file still broken once the job went quiet is reported."""
    for w in state.warnings:
        _emit(args, out, {"warning": w}, f"warning: {w}")


def _on_terminate() -> Callable[[], bool]:
    """A SIGTERM ends following as Ctrl-C does: between polls, with the usual exit status."""
    stopped = [False]

    def handler(signum: int, frame: Any) -> None:
        stopped[0] = True

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:      # not the main thread (a test calling main()): Ctrl-C only
        pass
    return lambda: stopped[0]
