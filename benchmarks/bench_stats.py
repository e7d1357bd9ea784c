"""Cost of debugger.stats per 256 Ki-element float32 chunk, by the kind of data: numpy's passes (what
scans use), the compiled one-pass kernel (``compiled=True``, the recorder's), and another checkout's
stats.py (``--baseline DIR``), in the same process, rounds interleaved.

    python benchmarks/bench_stats.py [--rounds 7] [--repeat 200] [--baseline OTHER_CHECKOUT]

Kinds: "mixed" (normal values: weights, gradients, conv outputs), "relu" (half exact zeros, none
negative: ReLU outputs), "positive" (no zero at all: softmax, Adam's second moment). Prints the median
of the rounds' microseconds per chunk (a chunk is what every reader, convert and the recorder hand to
it), so ratios are taken under the same machine load.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load_stats(checkout: str, name: str):  # type: ignore[no-untyped-def]
    """The statistics module of a checkout (``debugger/stats/core.py``, ``debugger/stats.py`` before the
    stats package), as a module of its own (it imports only numpy)."""
    path = os.path.join(checkout, "debugger", "stats", "core.py")
    if not os.path.exists(path):
        path = os.path.join(checkout, "debugger", "stats.py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod     # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def chunks() -> dict[str, np.ndarray]:
    """One chunk of each kind of data."""
    a = np.random.default_rng(0).standard_normal(1 << 18).astype(np.float32)
    return {"mixed": a, "relu": np.maximum(a, 0), "positive": np.abs(a) + 1e-3}


def per_chunk_us(stats_of, a: np.ndarray, repeat: int) -> float:  # type: ignore[no-untyped-def]
    """Microseconds for the statistics of ``a`` (one chunk)."""
    stats_of(a)
    t0 = time.perf_counter()
    for _ in range(repeat):
        stats_of(a)
    return (time.perf_counter() - t0) / repeat * 1e6


def main() -> int:
    """Time every kind for this checkout and the baseline, interleaved, and print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--baseline", help="another checkout of tdbg, timed in the same rounds")
    a = p.parse_args()
    sys.path.insert(0, ROOT)
    from debugger import stats
    if stats.compiled_kernel() is None:
        print("numba is not installed: the compiled column is numpy's passes again", file=sys.stderr)
    mods = {"numpy": stats.tensor_stats, "compiled": lambda x: stats.tensor_stats(x, compiled=True)}
    if a.baseline:
        mods["baseline"] = load_stats(a.baseline, "stats_baseline").tensor_stats
    data = chunks()
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(a.rounds):
        for kind, x in data.items():
            for label, stats_of in mods.items():
                times.setdefault((label, kind), []).append(per_chunk_us(stats_of, x, a.repeat))
    print(f"debugger.stats, float32 chunk of {1 << 18} elements, median of {a.rounds} rounds; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"  {'data':10s} " + " ".join(f"{label + ' us':>12s}" for label in mods)
          + "  compiled/numpy" + ("  numpy/baseline" if a.baseline else ""))
    for kind in data:
        med = {label: statistics.median(times[(label, kind)]) for label in mods}
        line = f"  {kind:10s} " + " ".join(f"{med[label]:12.1f}" for label in mods)
        line += f"  {med['compiled'] / med['numpy']:14.2f}"
        if a.baseline:
            line += f"  {med['numpy'] / med['baseline']:14.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
