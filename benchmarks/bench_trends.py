#!/usr/bin/env python
"""The trends view's requests on a long run: 100,000 steps x 200 tensors (bench_series.py's synthetic series,
written once under --root and reused), each answered through the web app's test client (JSON included):
the catalog, one tensor's curve over every step and zoomed to 1,000 steps (800 min/max buckets), the four
scalars, and the heatmap of every tensor (300 step buckets) over the run and zoomed. The goal is the
issue's: one curve in under 100 ms; the other answers are measured beside it.

    python benchmarks/bench_trends.py [--steps 100000] [--tensors 200] [--root DIR] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]

import bench_series  # noqa: E402

from debugger.formats.tdbg_h5.writer import DumpWriter  # noqa: E402


def ensure(root: str, steps: int, tensors: int) -> None:
    """Write the dump (an empty tdbg-h5 rank with the series) unless a run of that size is there."""
    mark = os.path.join(root, f"made-{steps}x{tensors}")
    if os.path.exists(mark):
        return
    DumpWriter(root, 0, "statistics", framework="PyTorch").close()
    bench_series.write(os.path.join(root, "rank_0"), steps, tensors, noise=False)
    open(mark, "w").close()


def timed(client, url: str, repeat: int) -> dict:
    """The first answer's time (nothing of it kept yet) and the best of ``repeat``, in ms, and its size."""
    times, size = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        r = client.get(url)
        times.append(time.perf_counter() - t)
        assert r.status_code == 200, r.get_json()
        size = len(r.data)
    return {"first_ms": round(times[0] * 1e3, 1), "ms": round(min(times) * 1e3, 1), "bytes": size}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--tensors", type=int, default=200)
    p.add_argument("--root", default="/tmp/tdbg-trends-bench")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    ensure(a.root, a.steps, a.tensors)
    from tdbg_web import create_app

    client = create_app(a.root, {"TESTING": True, "STATS_CACHE": False}).test_client()
    mid, z0 = "layers.30.weight.grad", a.steps // 2
    zoom = f"start={z0}&stop={z0 + 999}"
    urls = {"catalog": "/api/ranks/0/series",
            "curve_all": f"/api/ranks/0/series/curve?tensor={mid}&stat=l2norm&points=800",
            "curve_zoom": f"/api/ranks/0/series/curve?tensor={mid}&stat=l2norm&points=800&{zoom}",
            "scalars_all": "/api/ranks/0/series/scalars?points=800",
            "heatmap_all": "/api/ranks/0/series/heatmap?stat=l2norm&role=all&columns=300",
            "heatmap_zoom": f"/api/ranks/0/series/heatmap?stat=l2norm&role=all&columns=300&{zoom}"}
    out = {"steps": a.steps, "tensors": a.tensors, **{k: timed(client, u, a.repeat) for k, u in urls.items()}}
    print(json.dumps(out, indent=1))
    print(f"one curve over {a.steps:,} steps: first {out['curve_all']['first_ms']:.0f} ms, best {out['curve_all']['ms']:.0f} ms (goal < 100 ms)")


if __name__ == "__main__":
    main()
