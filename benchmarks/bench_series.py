#!/usr/bin/env python
"""The per-step statistics series (issue 25) against its size and speed goals: 100,000 steps x 200 tensors
x 13 statistics written through SeriesWriter, then the size on disk (goal < 1 GB), one tensor's curve over
every step (goal < 100 ms; read in a fresh process, page cache warm) and every tensor's curve in turn.

    python benchmarks/bench_series.py [--steps 100000] [--tensors 200] [--noise] [--root DIR]

The statistics are synthetic: counts that stay constant for a tensor (as real element counts do) and six
value statistics that drift slowly (a random walk, as real ones mostly do), or with ``--noise`` are drawn
afresh every step: random mantissas, the worst case for compression.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from debugger.formats.tdbg_h5.series import SeriesWriter  # noqa: E402
from debugger.stats.core import COUNT_NAMES, STAT_NAMES  # noqa: E402

_READ = """
import json, sys, time
from debugger.formats.tdbg_h5.series import SeriesReader
t = time.perf_counter(); r = SeriesReader(sys.argv[1]); names = r.tensors()
steps, v = r.curve(names[len(names) // 2], "l2norm"); one = time.perf_counter() - t
t = time.perf_counter()
for n in names:
    r.curve(n, "l2norm")
every = time.perf_counter() - t
print(json.dumps({"curve_s": round(one, 4), "points": len(v), "every_curve_s": round(every, 3)}))
"""


def write(rank_dir: str, steps: int, tensors: int, noise: bool) -> float:
    """Write the series; seconds taken."""
    rng = np.random.default_rng(0)
    names = [f"layers.{i // 3}.{('weight', 'weight.grad', 'exp_avg_sq')[i % 3]}" for i in range(tensors)]
    row = np.zeros((tensors, len(STAT_NAMES)))
    row[:, 0] = rng.integers(1 << 10, 1 << 24, tensors)
    row[:, 5] = row[:, 0] // 2
    row[:, 6] = row[:, 0] - row[:, 5]
    start = time.perf_counter()
    with SeriesWriter(rank_dir, names) as w:
        for s in range(steps):
            step = rng.standard_normal((tensors, len(STAT_NAMES) - len(COUNT_NAMES)))
            if noise:
                row[:, len(COUNT_NAMES):] = step
            else:
                row[:, len(COUNT_NAMES):] += step * 1e-3
            w.add(s, row, {"loss": 3.0 - s * 1e-5, "lr": 3e-4})
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--tensors", type=int, default=200)
    p.add_argument("--noise", action="store_true", help="values drawn afresh every step (incompressible)")
    p.add_argument("--root", default="/tmp/tdbg-series-bench")
    a = p.parse_args()
    shutil.rmtree(a.root, ignore_errors=True)
    rank_dir = os.path.join(a.root, "rank_0")
    os.makedirs(rank_dir)
    seconds = write(rank_dir, a.steps, a.tensors, a.noise)
    folder = os.path.join(rank_dir, "series")
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    read = json.loads(subprocess.run([sys.executable, "-c", _READ, rank_dir], capture_output=True, text=True,
                                     check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT)).stdout)
    out = {"steps": a.steps, "tensors": a.tensors, "noise": a.noise, "write_s": round(seconds, 1),
           "write_us_per_step": round(seconds / a.steps * 1e6), "segments": len(os.listdir(folder)),
           "bytes": size, "mb": round(size / 1e6), **read}
    print(json.dumps(out, indent=1))
    print(f"size {out['mb']} MB (goal < 1000 MB); one curve {read['curve_s'] * 1e3:.0f} ms (goal < 100 ms)")


if __name__ == "__main__":
    main()
