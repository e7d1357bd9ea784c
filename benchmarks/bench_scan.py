"""A first scan against the floors, side by side in one run: `cat` of every file, a plain numpy loop,
`tdbg scan --no-cache`, a cached re-scan and `tdbg info`, cold (page cache dropped) and warm.

    python benchmarks/bench_scan.py [--root /work/bench_data/scan] [--jobs 2] [--rounds 3]

Generates (once) a dump of >= 50,000 tensor files and >= 2 GB (benchmarks/bigdump.py), then runs
each command as its own process: cold once each (the page cache dropped before each; without root,
cold figures are missing), warm ``--rounds`` times interleaved (best of the rounds: other work on the
machine only ever slows a run down). Peak memory is the sum over the command's whole process tree
(PSS, so pages forked workers share count once), sampled every 50 ms. Prints a JSON report with the
ratios against the goals of issue 13.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

from _util import ROOT, children_cpu, drop_page_cache, run_tree, time_command, tree_size
from bigdump import bench_dump_from_args

NUMPY_LOOP = """
import os, sys, numpy as np
n = 0
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        if f.endswith('.npy'):
            a = np.load(os.path.join(d, f))
            if a.dtype.kind == 'f' and a.size:
                a.min(); a.max(); a.mean(); np.isfinite(a).all()
            n += 1
"""

GOALS = {"first_scan_vs_cat_warm": 1.5, "first_scan_vs_cat_cold": 1.3, "cached_rescan_s": 0.2,
         "cached_vs_first": 0.05, "info_s": 1.0, "peak_tree_pss_mb": 500}
# CPU seconds (user + system, the whole process tree) are printed too: they vary less than wall time
# when other work shares the machine.


def main() -> None:
    a, dump = bench_dump_from_args(__doc__)
    n, size = tree_size(dump)
    tdbg = [sys.executable, "-m", "debugger.cli"]
    cat = f"find {dump} -name '*.npy' -print0 | xargs -0 cat > /dev/null"
    numpy_loop = [sys.executable, "-c", NUMPY_LOOP, dump]
    scan = [*tdbg, "scan", "--no-cache", "--jobs", str(a.jobs), dump]
    cache = tempfile.mkdtemp(prefix="tdbg-bench-cache-")
    cached = [*tdbg, "scan", "--cache-dir", cache, "--jobs", str(a.jobs), dump]
    info = [*tdbg, "info", dump]
    rep: dict = {"dump": dump, "files": n, "bytes": size, "jobs": a.jobs, "rounds": a.rounds,
                 "cold_cache_possible": drop_page_cache()}
    try:
        if rep["cold_cache_possible"]:
            rep["cat_cold_s"] = round(time_command(cat, cold=True), 3)
            rep["numpy_loop_cold"] = run_tree(numpy_loop, cold=True)
            rep["scan_first_cold"] = run_tree(scan, cold=True)
        run_tree(cached)   # fills the cache (the cached re-scans below read it)
        warm: dict[str, list] = {"cat": [], "numpy_loop": [], "scan_first": [], "scan_cached": [], "info": []}
        for _ in range(a.rounds):
            cpu0 = children_cpu()
            warm["cat"].append(round(time_command(cat), 3))
            warm.setdefault("cat_cpu", []).append(round(children_cpu() - cpu0, 3))
            warm["numpy_loop"].append(run_tree(numpy_loop))
            warm["scan_first"].append(run_tree(scan))
            warm["scan_cached"].append(run_tree(cached))
            warm["info"].append(run_tree(info))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    rep["cat_warm_s"] = min(warm["cat"])
    for k in ("numpy_loop", "scan_first", "scan_cached", "info"):
        rep[f"{k}_warm"] = min(warm[k], key=lambda r: r["seconds"])
        rep[f"{k}_warm_all_s"] = [r["seconds"] for r in warm[k]]
    rep["cat_warm_all_s"] = warm["cat"]
    rep["cat_warm_cpu_s"] = min(warm["cat_cpu"])
    rep["load_average"] = os.getloadavg()   # other work on the machine: the figures are best-of-rounds
    first = rep["scan_first_warm"]["seconds"]
    got = {"first_scan_vs_cat_warm": first / rep["cat_warm_s"],
           "cached_rescan_s": rep["scan_cached_warm"]["seconds"],
           "cached_vs_first": rep["scan_cached_warm"]["seconds"] / first,
           "info_s": rep["info_warm"]["seconds"],
           "peak_tree_pss_mb": max(r["peak_tree_pss_mb"] for k in ("scan_first", "scan_cached", "info")
                                   for r in warm[k])}
    if rep["cold_cache_possible"]:
        got["first_scan_vs_cat_cold"] = rep["scan_first_cold"]["seconds"] / rep["cat_cold_s"]
        got["peak_tree_pss_mb"] = max(got["peak_tree_pss_mb"], rep["scan_first_cold"]["peak_tree_pss_mb"])
    rep["goals"] = {k: {"goal": GOALS[k], "measured": round(v, 3), "met": v <= GOALS[k]} for k, v in got.items()}
    rep["tdbg"] = ROOT
    print(json.dumps(rep, indent=2))


if __name__ == "__main__":
    main()
