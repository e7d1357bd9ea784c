"""Scan speed against the floors: raw read (cat) and a plain np.load + min/max/mean/isfinite loop.

    python benchmarks/bench_scan.py [--root /work/bench_data/scan] [--jobs 2]

Generates (once) a dump of >= 50,000 tensor files and >= 2 GB, then times, each in a fresh process,
with the page cache dropped (cold) and not (warm): `cat` of every file, the numpy loop, a first
`tdbg scan` (recommended preset, empty statistics cache) and a re-scan with the cache. Prints a
JSON report; peak RSS includes the scan's worker processes.
"""
from __future__ import annotations

import json
import shutil
import tempfile

from _util import drop_page_cache, run_python, time_command, tree_size
from bigdump import bench_dump_from_args

NUMPY_LOOP = """
import os, numpy as np
n = 0
for d, _, fs in os.walk(DUMP):
    for f in fs:
        if f.endswith('.npy'):
            a = np.load(os.path.join(d, f))
            if a.dtype.kind == 'f' and a.size:
                a.min(); a.max(); a.mean(); np.isfinite(a).all()
            n += 1
out['files'] = n
"""

SCAN = """
from debugger import open_dump
from debugger.cache import StatsCache
from debugger.watch import preset, scan
d = open_dump(DUMP)
r = scan(d, preset('recommended'), jobs=JOBS, cache=StatsCache(CACHE, enabled=CACHE is not None))
out.update(hits=len(r.hits), errors=len(r.errors), reads=r.files_checked)
"""

INFO = """
from debugger import open_dumps
from debugger.serialize import dump_info
info = [dump_info(d) for d in open_dumps(DUMP)]
out['tensor_files'] = sum(r['tensor_files'] for i in info for r in i['ranks'])
"""


def main() -> None:
    a, dump = bench_dump_from_args(__doc__)
    n, size = tree_size(dump)
    can_drop = drop_page_cache()
    rep: dict = {"dump": dump, "files": n, "bytes": size, "jobs": a.jobs, "cold_cache_possible": can_drop}
    cat = f"find {dump} -name '*.npy' -print0 | xargs -0 cat > /dev/null"
    rep["cat_cold_s"] = time_command(cat, cold=True)
    rep["cat_warm_s"] = time_command(cat)

    rep["numpy_loop_cold"] = run_python(NUMPY_LOOP, True, DUMP=dump)
    rep["numpy_loop_warm"] = run_python(NUMPY_LOOP, False, DUMP=dump)
    rep["info_cold"] = run_python(INFO, True, DUMP=dump)
    rep["info_warm"] = run_python(INFO, False, DUMP=dump)
    cache = tempfile.mkdtemp(prefix="tdbg-bench-cache-")
    try:
        rep["scan_first_cold"] = run_python(SCAN, True, DUMP=dump, JOBS=a.jobs, CACHE=cache)
        rep["scan_cached"] = run_python(SCAN, False, DUMP=dump, JOBS=a.jobs, CACHE=cache)
        rep["scan_first_warm_nocache"] = run_python(SCAN, False, DUMP=dump, JOBS=a.jobs, CACHE=None)
        rep["scan_first_warm_1job"] = run_python(SCAN, False, DUMP=dump, JOBS=1, CACHE=None)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    rep["ratio_first_scan_vs_cat_cold"] = rep["scan_first_cold"]["seconds"] / rep["cat_cold_s"]
    rep["ratio_first_scan_vs_cat_warm"] = rep["scan_first_warm_nocache"]["seconds"] / rep["cat_warm_s"]
    rep["speedup_cached_vs_first_cold"] = rep["scan_first_cold"]["seconds"] / rep["scan_cached"]["seconds"]
    print(json.dumps(rep, indent=2))


if __name__ == "__main__":
    main()
