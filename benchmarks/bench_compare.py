"""Comparison speed: `compare_ranks(..., all_tensors=True)` on a 2-rank data-parallel dump of >= 2 GB.

    python benchmarks/bench_compare.py [--root /work/bench_data/compare] [--jobs 2] [--keep]

Generates (with tests/dumpmaker.py, MindSpore's real layout) a 2-rank, 2-iteration data-parallel
dump of an MLP with 4-16 MiB float32 weights: per layer and rank-iteration 13 weight-sized tensors,
of which the 2 local-gradient ones (the backward MatMul output and the AllReduce input) differ
between the ranks and the others (weights, moments, optimizer and collective tensors) agree, so
both the identical-chunk path and the full metrics run. Then times, each in a fresh process, with
the page cache dropped (cold) and not (warm):

- `cat` of every file (the raw read floor) and a plain numpy loop (np.load both files, float64
  metrics) as a reference implementation;
- "full": no cache and no identical-chunk shortcut, every metric of every pair computed;
- "normal": the default path (empty comparison cache at first), cold and warm;
- "cached": the same comparison again with the cache filled;
- the default invariant-only comparison (without all_tensors).

GB/s counts the data bytes of both files of every pair per second: ``gb_per_s`` over the whole
fresh process (interpreter start and imports included), ``compare_gb_per_s`` over the
``open_dump`` + ``compare_ranks`` calls (graph parsing, matching, the cache and the pool included). msprobe publishes 0.1-0.3 GB/s for its compare. Peak RSS includes
the worker processes. Prints a JSON report; deletes the data afterwards unless --keep.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile

from _util import drop_page_cache, run_python, time_command, tree_size

# widths chain from layer to layer: weights of 8, 16, 8, 4, 8 and 4 MiB (float32)
WIDTHS = (1024, 2048, 2048, 1024, 1024, 2048, 512)

MAKE = """
from dumpmaker import make_dump
layers = tuple((f"l{i}", WIDTHS[i], WIDTHS[i + 1], "ReLU" if i + 2 < len(WIDTHS) else None)
               for i in range(len(WIDTHS) - 1))
make_dump(DUMP, ranks=2, iterations=2, layers=layers, batch=32)
"""

COMPARE = """
from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.compare import compare_ranks
t_start = time.perf_counter()
d = open_dump(DUMP)
cache = StatsCache.for_dump(d.root, CACHE, enabled=CACHE is not None)
r = compare_ranks(d, all_tensors=ALL, jobs=JOBS, cache=cache, fast=FAST)
out['compare_seconds'] = time.perf_counter() - t_start
s = r.summary()
out.update(pairs=s['pairs'], counted=s['counted'], identical=s['identical'], warning=s['warning'],
           error=s['error'], counted_errors=s['counted_errors'], computed=s['computed'], cached=s['cached'],
           bytes_read=s['bytes_compared'],
           pair_bytes=sum(p.ref_a.stored_bytes + p.ref_b.stored_bytes for p in r.pairs if not p.missing))
"""

NUMPY_LOOP = """
import numpy as np
from debugger import open_dump
d = open_dump(DUMP)
r0, r1 = d.rank(0), d.rank(1)
n = nbytes = 0
for it in r0.iterations(0):
    m0, m1 = r0.tensor_map(0, it), r1.tensor_map(0, it)
    for k, t in m0.items():
        u = m1.get(k)
        if u is None:
            continue
        a = np.load(u.path).astype(np.float64).ravel()
        b = np.load(t.path).astype(np.float64).ravel()
        diff = a - b
        na, nb = np.linalg.norm(a), np.linalg.norm(b)
        cos = a @ b / (na * nb) if na and nb else 1.0
        ad = np.abs(diff)
        rel = ad / np.where(b == 0, np.finfo(np.float32).eps, np.abs(b))
        if ad.size:
            vals = (cos, ad.max(), rel.max(), np.linalg.norm(diff), (rel < 1e-3).mean(), (rel < 5e-3).mean())
        n += 1
        nbytes += t.stored_bytes + u.stored_bytes
out.update(pairs=n, pair_bytes=nbytes)
"""


def ensure_dump(root: str) -> str:
    """Generate the dump once (reused while its parameters are unchanged)."""
    dump = os.path.join(root, "dump")
    tag = os.path.join(root, ".params")
    want = repr(WIDTHS)
    if os.path.exists(tag) and open(tag).read() == want:
        return dump
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    res = run_python(f"DUMP = {dump!r}\nWIDTHS = {WIDTHS!r}\n" + MAKE)
    with open(tag, "w") as f:
        f.write(want)
    print(f"generated {dump} in {res['seconds']:.1f} s", flush=True)
    return dump


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="/work/bench_data/compare")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--keep", action="store_true", help="keep the generated dump")
    a = p.parse_args()
    dump = ensure_dump(a.root)
    n, size = tree_size(dump)
    can_drop = drop_page_cache()
    rep: dict = {"dump": dump, "files": n, "bytes": size, "jobs": a.jobs, "cpus": os.cpu_count(),
                 "cold_cache_possible": can_drop}

    def py(code: str, cold: bool, **names: object) -> dict:
        res = run_python(code, cold=cold, **names)
        if res.get("pair_bytes"):
            res["gb_per_s"] = res["pair_bytes"] / 1e9 / res["seconds"]
            if res.get("compare_seconds"):
                res["compare_gb_per_s"] = res["pair_bytes"] / 1e9 / res["compare_seconds"]
        print(json.dumps({k: res.get(k) for k in ("seconds", "gb_per_s", "compare_gb_per_s", "peak_rss_mb")}),
              flush=True)
        return res

    try:
        cat = f"find {dump} -name '*.npy' -print0 | xargs -0 cat > /dev/null"
        rep["cat_cold_s"] = time_command(cat, cold=True)
        rep["cat_warm_s"] = time_command(cat)
        rep["cat_cold_gb_per_s"] = size / 1e9 / rep["cat_cold_s"]
        rep["cat_warm_gb_per_s"] = size / 1e9 / rep["cat_warm_s"]
        rep["numpy_loop_warm"] = py(NUMPY_LOOP, False, DUMP=dump)
        base = dict(DUMP=dump, ALL=True, JOBS=a.jobs)
        rep["full_cold"] = py(COMPARE, True, **base, CACHE=None, FAST=False)
        rep["full_warm"] = py(COMPARE, False, **base, CACHE=None, FAST=False)
        rep["full_warm_1job"] = py(COMPARE, False, **{**base, "JOBS": 1}, CACHE=None, FAST=False)
        cache = tempfile.mkdtemp(prefix="tdbg-bench-cache-")
        try:
            rep["normal_cold"] = py(COMPARE, True, **base, CACHE=cache, FAST=True)
            rep["cached"] = py(COMPARE, False, **base, CACHE=cache, FAST=True)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        rep["normal_warm_nocache"] = py(COMPARE, False, **base, CACHE=None, FAST=True)
        rep["normal_warm_1job"] = py(COMPARE, False, **{**base, "JOBS": 1}, CACHE=None, FAST=True)
        rep["invariants_only_cold"] = py(COMPARE, True, **{**base, "ALL": False}, CACHE=None, FAST=True)
    finally:
        if not a.keep:
            shutil.rmtree(a.root, ignore_errors=True)
    rep["msprobe_published_gb_per_s"] = [0.1, 0.3]
    print(json.dumps(rep, indent=2))


if __name__ == "__main__":
    main()
