"""`tdbg spikes`: the loss spikes of a run's per-step series, each with the tensors that moved first. The
series is the one recorded (Recorder(series=True)), else the rank's recorded iterations when they are every
step or most (any level: debugger.model.stepseries). The window adapts to short runs (debugger.watch.spikes.spike_window).

Exit status: 0 no spike, 1 spikes found, 2 unreadable dump or no series.
"""
from __future__ import annotations

import argparse
from typing import TextIO

from ..errors import DumpError
from .exits import Exit
from ..model import open_dump
from ..watch.spikes import LOOKBACK, Spike, find_spikes, spike_window
from .common import add_json, print_json, report_warnings
from .scan_series import no_series


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The arguments of `tdbg spikes`."""
    s.add_argument("dump", help="dump root or one rank of it")
    s.add_argument("--rank", type=int, default=None, help="the rank (default: the first with a series)")
    s.add_argument("--window", type=int, default=None,
                   help="steps of recent behaviour a step is scored against (default: min(50, max(10, steps // 2)): "
                        "50 for a long run, half a short run's steps; the output says the window used)")
    s.add_argument("--z", type=float, default=6.0, help="robust z-score above which the loss spikes (6)")
    s.add_argument("--top", type=int, default=10, help="the biggest N spikes (10)")
    s.add_argument("--causes", type=int, default=5, help="causes shown per spike in text (5; --json: all)")
    add_json(s)

def run(args: argparse.Namespace, out: TextIO) -> int:
    """Find the loss spikes and their causes."""
    if (args.window is not None and args.window < 3) or args.top < 1 or not args.z > 0:
        raise DumpError(None, "--window needs at least 3 steps, --top at least 1, --z a positive number")
    dump = open_dump(args.dump)
    ranks = [dump.rank(args.rank)] if args.rank is not None else dump.ranks
    rank = next((r for r in ranks if r.series is not None), None)
    if rank is None:
        raise DumpError(args.dump, no_series(ranks))
    series = rank.series
    steps = int(len(series.steps())) if series is not None else 0
    window = args.window if args.window is not None else spike_window(steps)
    try:
        spikes = find_spikes(rank, window=window, z=args.z, top=args.top)
    except ValueError as exc:
        raise DumpError(args.dump, f"rank {rank.rank}: {exc}") from None
    notes = list(series.warnings) if series is not None else []
    notes += [f"rank {rank.rank}: the series holds {steps} steps: a step is scored against the {window} "
             f"before it, so none can spike (--window)"] if steps <= window else []
    origin = series.origin if series is not None else "recorded"
    if args.json:
        print_json({"rank": rank.rank, "window": window, "z": args.z, "lookback": LOOKBACK, "steps": steps,
                    "series": origin, "spikes": [s.as_dict() for s in spikes], "warnings": notes}, out)
        return Exit.FOUND if spikes else Exit.OK
    report_warnings(args, notes)
    if origin == "iterations":
        out.write(f"rank {rank.rank}: no series recorded: the {steps} recorded iterations are its steps\n")
    _print_spikes(rank.rank, spikes, window, args, out)
    return Exit.FOUND if spikes else Exit.OK

def _print_spikes(rank: int, spikes: list[Spike], window: int, args: argparse.Namespace, out: TextIO) -> None:
    """The text report: one block per spike, its causes ranked."""
    if not spikes:
        out.write(f"rank {rank}: no loss spike (robust z > {args.z:g} over a {window}-step window)\n")
        return
    out.write(f"rank {rank}: {len(spikes)} loss spike{'s' if len(spikes) != 1 else ''} "
              f"(robust z > {args.z:g} over a {window}-step window)\n")
    for s in spikes:
        deep = f"; nearest deep capture: step {s.deep_step}" if s.deep_step is not None else "; no deep capture"
        out.write(f"\nstep {s.step}: loss {s.loss:.6g} (expected {s.baseline:.6g}, z {s.z:.1f}){deep}\n")
        if not s.causes:
            out.write(f"  no tensor departed from its recent behaviour in the {LOOKBACK} steps before\n")
        for i, c in enumerate(s.causes[:args.causes], 1):
            where = f" layer {c.layer}" if c.layer else ""
            code = f" at {c.source}" if c.source else ""
            edited = ", changed outside the optimizer" if c.outside_optimizer else ""
            out.write(f"  {i}. {c.tensor} ({c.role}{edited}) {c.stat} departed at step {c.first_step} "
                      f"({c.lead} before), |z| {c.score:.1f}{where}{code}\n")
        if len(s.causes) > args.causes:
            out.write(f"  ... {len(s.causes) - args.causes} more (--causes N, or --json)\n")
