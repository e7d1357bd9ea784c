"""tdbg-h5 against one .npy file per tensor: write, then read every tensor once (warm page cache).

20,000 float32 tensors of 45 KB (2 ranks x 10 iterations x 1,000), written with ``np.save`` and
with ``DumpWriter`` (values, and statistics only). Reads: every tensor's values once through
``NpyTensor.chunks`` and ``H5Tensor.chunks`` (and, for comparison, through h5py dataset reads,
which is what the byte offsets in the index avoid), and every tensor's stored statistics.

    python benchmarks/bench_h5_read.py [--root /tmp/bench_h5] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from debugger.formats.npy import NpyTensor  # noqa: E402
from debugger.formats.tdbg_h5.reader import FORMAT  # noqa: E402
from debugger.formats.tdbg_h5.writer import DumpWriter  # noqa: E402

RANKS, ITERATIONS, PER_ITERATION, ELEMENTS = 2, 10, 1000, 11_520   # 11,520 float32 = 45 KB


def tree_bytes(path: str) -> int:
    """Bytes of every file below ``path``."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def write_all(root: str) -> dict[str, float]:
    """The three dumps; seconds each took to write."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal(ELEMENTS).astype(np.float32)
    took = {}
    t = time.perf_counter()
    for r in range(RANKS):
        for i in range(ITERATIONS):
            d = os.path.join(root, "npy", f"rank_{r}", str(i))
            os.makedirs(d)
            for k in range(PER_ITERATION):
                np.save(os.path.join(d, f"t{k}.npy"), base + np.float32(k + i))
    took["npy"] = time.perf_counter() - t
    for mode in ("values", "statistics"):
        t = time.perf_counter()
        for r in range(RANKS):
            with DumpWriter(os.path.join(root, mode), rank=r, saved=mode) as w:
                for i in range(ITERATIONS):
                    with w.iteration(i) as it:
                        for k in range(PER_ITERATION):
                            it.add(0, f"t{k}", "Op", "output", 0, values=base + np.float32(k + i))
        took[mode] = time.perf_counter() - t
    return took


def best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    """Fastest of ``repeat`` runs after one warm-up run."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    """Write, read, print one JSON report."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="/tmp/bench_h5")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    shutil.rmtree(a.root, ignore_errors=True)
    wrote = write_all(a.root)

    npy_paths = []
    for d, _, fs in os.walk(os.path.join(a.root, "npy")):
        for f in fs:
            st = os.stat(os.path.join(d, f))
            npy_paths.append((os.path.join(d, f), st.st_size, st.st_mtime_ns))

    def npy_sources() -> list[NpyTensor]:
        return [NpyTensor(*x) for x in npy_paths]

    def h5_sources(mode: str) -> list:  # type: ignore[type-arg]
        root = os.path.join(a.root, mode)
        out = []
        for r in FORMAT.open(root, root).ranks:
            for it in r.iterations(0):
                out += [t.source for t in r.tensors(0, it, None)]
        return out

    def drain(sources: list) -> int:  # type: ignore[type-arg]
        n = 0
        for s in sources:
            for c in s.chunks(1 << 18):
                n += c.size
        return n

    def h5py_datasets(sources: list) -> int:  # type: ignore[type-arg]
        import h5py
        n = 0
        files: dict[str, h5py.File] = {}
        for s in sources:
            f = files.get(s.path) or files.setdefault(s.path, h5py.File(s.path, "r"))
            ds = f[s.dataset]
            buf = np.empty(ds.shape, ds.dtype)
            ds.read_direct(buf)
            n += buf.size
        for f in files.values():
            f.close()
        return n

    h5v = h5_sources("values")
    h5s = h5_sources("statistics")
    assert len(h5v) == len(h5s) == len(npy_paths) == RANKS * ITERATIONS * PER_ITERATION
    rep = {
        "tensors": len(npy_paths), "tensor_kb": ELEMENTS * 4 / 1024,
        "write_s": wrote,
        "bytes": {m: tree_bytes(os.path.join(a.root, m)) for m in ("npy", "values", "statistics")},
        "read_s": {
            "npy_chunks": best(lambda: drain(npy_sources()), a.repeat),
            "h5_list": best(lambda: h5_sources("values"), a.repeat),
            "h5_chunks": best(lambda: drain(h5v), a.repeat),
            "h5_list_and_chunks": best(lambda: drain(h5_sources("values")), a.repeat),
            "h5py_dataset_reads": best(lambda: h5py_datasets(h5v), a.repeat),
            "h5_stored_stats": best(lambda: [s.stored_stats() for s in h5s], a.repeat),
            "h5_list_and_stored_stats": best(lambda: [s.stored_stats() for s in h5_sources("statistics")], a.repeat),
        },
    }
    print(json.dumps(rep, indent=2))


if __name__ == "__main__":
    main()
