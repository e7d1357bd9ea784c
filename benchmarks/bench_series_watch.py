#!/usr/bin/env python
"""Watchpoints over time against their speed goal: a watchpoint over all steps of all tensors within 2x of
reading the series. A 100,000-step x 200-tensor series (weights, gradients, Adam's exp_avg_sq; statistics
drifting as bench_series.py writes them) is read, then watched, each in a fresh process (page cache
warm; the best of --repeat alternated runs; imports included in both):

- read: what the watchpoints read (the l2norm matrix of every tensor, the loss and learning rate);
- watch: the same reads plus the conditions (loss_spike, norm_growth, lr_change, loss_scale_change);
- spikes: find_spikes on the same series (the loss's trailing z, then the causes of each spike).

    python benchmarks/bench_series_watch.py [--steps 100000] [--tensors 200] [--root DIR] [--reuse] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

from _util import run_python  # noqa: E402

from debugger.formats.tdbg_h5.series import SeriesWriter  # noqa: E402
from debugger.stats.core import COUNT_NAMES, STAT_NAMES  # noqa: E402

ROLES = ("weight", "gradient", "optimizer_state")
SUFFIX = ("", ".grad", ".exp_avg_sq")

_READ = """
from debugger.formats.tdbg_h5.series import SeriesReader
r = SeriesReader(rank_dir)
r.matrix("l2norm"); r.scalar("loss"); r.scalar("lr"); r.scalar("loss_scale")
"""
_WATCH = """
from debugger.formats.tdbg_h5.series import SeriesReader
from debugger.watch.registry import Watchpoint
from debugger.watch.series_conditions import run_series
wps = [Watchpoint.parse(s) for s in ("loss_spike", "norm_growth", "lr_change", "loss_scale_change")]
hits = run_series(0, SeriesReader(rank_dir), wps)
out["hits"] = len(hits)
out["by_condition"] = {w.name: sum(h.condition == w.name for h in hits) for w in wps}
"""
_SPIKES = """
from debugger.formats.tdbg_h5.series import SeriesReader
from debugger.watch import spikes
class _Rank:   # find_spikes asks a Rank for .series and its deep captures: a series-only rank has none
    series = SeriesReader(rank_dir)
    def iterations(self): return []
    graphs = {}
found = spikes.find_spikes(_Rank())
out["spikes"] = [(s.step, s.causes[0].tensor if s.causes else None) for s in found]
"""


def write(rank_dir: str, steps: int, tensors: int, spike_at: int) -> float:
    """The series (a loss spike planted at ``spike_at``, the gradient of layer 7 jumping the step before);
    seconds taken."""
    rng = np.random.default_rng(0)
    names = [f"layers.{i // 3}.weight{SUFFIX[i % 3]}" for i in range(tensors)]
    roles = [ROLES[i % 3] for i in range(tensors)]
    params = [f"layers.{i // 3}.weight" for i in range(tensors)]
    row = np.zeros((tensors, len(STAT_NAMES)))
    row[:, 0] = rng.integers(1 << 10, 1 << 24, tensors)
    row[:, len(COUNT_NAMES):] = 1.0 + rng.random((tensors, len(STAT_NAMES) - len(COUNT_NAMES)))
    start = time.perf_counter()
    with SeriesWriter(rank_dir, names, roles=roles, params=params) as w:
        for s in range(steps):
            row[:, len(COUNT_NAMES):] += rng.standard_normal((tensors, len(STAT_NAMES) - len(COUNT_NAMES))) * 1e-3
            stats = row
            if s == spike_at - 1:
                stats = row.copy()
                stats[7 * 3 + 1, len(COUNT_NAMES):] *= 100
            loss = 3.0 - s * 1e-5 + 0.01 * rng.standard_normal() + (5.0 if s == spike_at else 0.0)
            w.add(s, stats, {"loss": loss, "lr": 3e-4, "loss_scale": 65536.0})
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--tensors", type=int, default=200)
    p.add_argument("--root", default="/tmp/tdbg-series-watch-bench")
    p.add_argument("--repeat", type=int, default=3, help="runs of each, the best kept (3)")
    p.add_argument("--reuse", action="store_true", help="keep a series already written under --root")
    a = p.parse_args()
    rank_dir = os.path.join(a.root, "rank_0")
    out: dict = {"steps": a.steps, "tensors": a.tensors}
    if not (a.reuse and os.path.isdir(rank_dir)):
        shutil.rmtree(a.root, ignore_errors=True)
        os.makedirs(rank_dir)
        out["write_s"] = round(write(rank_dir, a.steps, a.tensors, spike_at=a.steps * 3 // 4), 1)
    run_python(_READ, rank_dir=rank_dir)                        # warm the page cache
    reads, watches = [], []
    for _ in range(a.repeat):             # alternated, the best of each: a shared machine is noisy
        reads.append(run_python(_READ, rank_dir=rank_dir))
        watches.append(run_python(_WATCH, rank_dir=rank_dir))
    read = min(reads, key=lambda r: r["seconds"])
    watch = min(watches, key=lambda r: r["seconds"])
    spikes = run_python(_SPIKES, rank_dir=rank_dir)
    out.update(read_s=round(read["seconds"], 3), watch_s=round(watch["seconds"], 3),
               ratio=round(watch["seconds"] / read["seconds"], 2), hits=watch["hits"],
               by_condition=watch["by_condition"], spikes_s=round(spikes["seconds"], 3), spikes=spikes["spikes"])
    print(json.dumps(out, indent=1))
    print(f"read {out['read_s']:.2f} s, watch {out['watch_s']:.2f} s: {out['ratio']:.2f}x (goal <= 2x)")


if __name__ == "__main__":
    main()
