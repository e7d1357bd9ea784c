"""Scaling of `scan` on a Dask LocalCluster of 1, 2 and 4 worker processes, as throughput per worker.

    python benchmarks/bench_cluster.py [--root /work/bench_data/scale64] [--ranks 64] [--workers 1,2,4]

Generates (once) a 64-rank dump in MindSpore's layout (benchmarks/bigdump.py), reads it once so the
page cache is warm, then times, side by side in one run: a scan in one process (no workers), on the
local fork pool of 2 processes, and on a LocalCluster of each size (one thread per worker; the cluster
is started before the clock starts and its start-up time reported apart). Every scan starts with an
empty statistics cache and must give the same hits as the one-process scan. Throughput is tensor
files and bytes read per second, overall and per worker, and the workers' own compute seconds (from
Dask's task stream: what a worker does per second of work, apart from the client's planning). With
fewer cores than workers (the machine these figures were first taken on has 2), workers share cores
with each other and with the client, which plans, evaluates and, for a LocalCluster, runs the
scheduler: "per worker" then falls as the cores run out, which is what the figures should show.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from _util import ROOT, time_command, tree_size
from bigdump import ensure_big_dump

sys.path[:0] = [ROOT]


def _scan(dump: str, **kw: object) -> tuple[float, dict, int]:
    from debugger import open_dump
    from debugger.stats.cache import StatsCache
    from debugger.watch import preset, scan

    d = open_dump(dump)
    t0 = time.perf_counter()
    r = scan(d, preset("recommended"), cache=StatsCache(enabled=False), **kw)  # type: ignore[arg-type]
    return time.perf_counter() - t0, r.to_dict(), r.files_checked


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="/work/bench_data/scale64w")
    p.add_argument("--width", type=int, default=384, help="layer width (384: about 2.3 GB over 64 ranks)")
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--rounds", type=int, default=2, help="runs of each configuration (the best is kept)")
    a = p.parse_args()
    from distributed import Client, get_task_stream

    from debugger.common.executors import client_workers, start_local_cluster

    dump = ensure_big_dump(a.root, files=344, layers=4, width=a.width, ranks=a.ranks)
    n, size = tree_size(dump)
    time_command(f"find {dump} -name '*.npy' -print0 | xargs -0 cat > /dev/null")   # warm
    rep: dict = {"dump": dump, "ranks": a.ranks, "files": n, "bytes": size, "cores": os.cpu_count(),
                 "rounds": a.rounds, "runs": {}}
    runs = [_scan(dump, jobs=1) for _ in range(a.rounds)]
    base_s, want, reads = min(runs, key=lambda r: r[0])
    rep["runs"]["one_process"] = {"seconds": round(base_s, 3), "files_read": reads}

    def row(seconds: float, workers: int) -> dict:
        return {"seconds": round(seconds, 3), "workers": workers, "files_per_s": round(reads / seconds),
                "mb_per_s": round(size / seconds / 2**20, 1),
                "files_per_s_per_worker": round(reads / seconds / workers),
                "mb_per_s_per_worker": round(size / seconds / 2**20 / workers, 1),
                "speedup_vs_one_process": round(base_s / seconds, 2)}

    s, got, _ = min((_scan(dump, jobs=2) for _ in range(a.rounds)), key=lambda r: r[0])
    assert got == want, "the local pool's result differs"
    rep["runs"]["local_pool_2"] = row(s, 2)
    for k in (int(x) for x in a.workers.split(",")):
        t0 = time.perf_counter()
        cluster = start_local_cluster(k)
        client = Client(cluster)
        client.wait_for_workers(k)
        start = time.perf_counter() - t0
        try:
            best = None
            for _ in range(a.rounds):
                with client_workers(client) as workers, get_task_stream(client) as ts:
                    s, got, _ = _scan(dump, workers=workers)
                assert got == want, f"the result on {k} Dask worker(s) differs"
                if best is None or s < best[0]:
                    best = (s, ts)
            s, ts = best
        finally:
            client.close()
            cluster.close()
        # the workers' side alone: seconds spent computing tasks (the client plans and evaluates meanwhile)
        busy = sum(e["stop"] - e["start"] for t in ts.data for e in t["startstops"] if e["action"] == "compute")
        rep["runs"][f"dask_{k}"] = {**row(s, k), "cluster_start_s": round(start, 2), "tasks": len(ts.data),
                                    "worker_compute_s": round(busy, 3),
                                    "worker_mb_per_compute_s": round(size / busy / 2**20, 1) if busy else None}
    rep["load_average"] = os.getloadavg()   # other work on the machine slows every figure down
    print(json.dumps(rep, indent=2))


if __name__ == "__main__":
    main()
