"""tdbg's HDF5 format against the MindSpore .npy tree it was converted from.

    python benchmarks/bench_convert.py [--root /work/bench_data/scan] [--jobs 2]

On the >= 50,000-file benchmark dump (generated once, shared with bench_scan.py), each in a fresh
process and side by side in one run: a first scan of the original (recommended preset, no cache),
`tdbg convert` (values + statistics) and `tdbg convert --statistics`, a first scan of each converted
dump, `compare` of each dump with itself, and the three sizes on disk. Cold runs drop the page cache
first (needs root). Prints a JSON report.
"""
from __future__ import annotations

import json
import os
import shutil

from _util import drop_page_cache, run_python, tree_size
from bigdump import bench_dump_from_args

SCAN = """
from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.watch import preset, scan
r = scan(open_dump(DUMP), preset('recommended'), jobs=JOBS, cache=StatsCache(enabled=False))
out.update(hits=len(r.hits), errors=len(r.errors), reads=r.files_checked,
           first=None if r.first is None else [r.first.watchpoint, r.first.iteration, r.first.node])
"""

CONVERT = """
from debugger import open_dump
from debugger.convert import convert
r = convert(open_dump(DUMP), OUT, statistics=STATS)
out.update(tensors=r.tensors, bytes_read=r.bytes_read)
"""

COMPARE = """
from debugger.stats.cache import StatsCache
from debugger.compare import compare_runs
r = compare_runs(DUMP, DUMP, jobs=JOBS, cache=StatsCache(enabled=False))
out.update(pairs=len(r.pairs), bytes=r.bytes_compared)
"""


def main() -> None:
    a, dump = bench_dump_from_args(__doc__)
    h5, stats = os.path.join(a.root, "converted-h5"), os.path.join(a.root, "converted-stats")
    for d in (h5, stats):
        shutil.rmtree(d, ignore_errors=True)
    rep: dict = {"dump": dump, "jobs": a.jobs, "cold_cache_possible": drop_page_cache()}

    rep["convert_values"] = run_python(CONVERT, True, DUMP=dump, OUT=h5, STATS=False)
    rep["convert_statistics"] = run_python(CONVERT, True, DUMP=dump, OUT=stats, STATS=True)
    for name, path in (("original", dump), ("converted", h5), ("statistics", stats)):
        files, size = tree_size(path)
        rep[f"size_{name}"] = {"files": files, "bytes": size}
        rep[f"scan_{name}_cold"] = run_python(SCAN, True, DUMP=path, JOBS=a.jobs)
        rep[f"scan_{name}_warm"] = run_python(SCAN, False, DUMP=path, JOBS=a.jobs)
    for name, path in (("original", dump), ("converted", h5)):
        rep[f"compare_{name}_warm"] = run_python(COMPARE, False, DUMP=path, JOBS=a.jobs)
    s = {k: v["seconds"] for k, v in rep.items() if isinstance(v, dict) and "seconds" in v}
    rep["speedup_first_scan_cold"] = s["scan_original_cold"] / s["scan_converted_cold"]
    rep["speedup_first_scan_warm"] = s["scan_original_warm"] / s["scan_converted_warm"]
    rep["convert_vs_first_scan_cold"] = s["convert_values"] / s["scan_original_cold"]
    rep["size_ratio_statistics"] = rep["size_original"]["bytes"] / rep["size_statistics"]["bytes"]
    print(json.dumps(rep, indent=2))


if __name__ == "__main__":
    main()
