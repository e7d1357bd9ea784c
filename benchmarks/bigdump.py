"""Generate a large dump in MindSpore's real layout (via tests/dumpmaker.py) for the benchmarks."""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), "tests"), os.path.dirname(HERE)]

from _util import tree_size  # noqa: E402
from dumpmaker import make_dump  # noqa: E402

# About 43 tensor files per layer and iteration (forward, backward, optimizer, Parameters).
FILES_PER_LAYER_ITERATION = 43


def make_big_dump(root: str, files: int = 50_000, layers: int = 120, width: int = 208, batch: int = 32,
                  ranks: int = 1) -> str:
    """An MLP of ``layers`` ReLU layers, enough iterations for ``files`` tensor files per rank."""
    iterations = max(1, round(files / (layers * FILES_PER_LAYER_ITERATION)))
    spec = tuple((f"l{i}", width, width, "ReLU") for i in range(layers))
    return make_dump(root, ranks=ranks, iterations=iterations, layers=spec, batch=batch)


def ensure_big_dump(root: str, **kw: int) -> str:
    """Reuse a dump generated earlier with the same parameters."""
    tag = os.path.join(root, ".params")
    want = repr(sorted(kw.items()))
    if os.path.exists(tag) and open(tag).read() == want:
        return os.path.join(root, "dump")
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    make_big_dump(os.path.join(root, "dump"), **kw)
    with open(tag, "w") as f:
        f.write(want)
    return os.path.join(root, "dump")


def bench_dump_from_args(doc: str, generate: bool = True) -> tuple[argparse.Namespace, str]:
    """The options every scan benchmark takes (--root, --jobs, --files) and its benchmark dump."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="/work/bench_data/scan")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--files", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=3, help="warm runs of each measurement (the best is kept)")
    a = p.parse_args()
    if not generate:   # the caller benchmarks a dump of its own
        return a, ""
    return a, ensure_big_dump(a.root, files=a.files, layers=120, width=208, ranks=1)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("root")
    p.add_argument("--files", type=int, default=50_000)
    p.add_argument("--layers", type=int, default=120)
    p.add_argument("--width", type=int, default=208)
    p.add_argument("--ranks", type=int, default=1)
    a = p.parse_args()
    d = ensure_big_dump(a.root, files=a.files, layers=a.layers, width=a.width, ranks=a.ranks)
    n, b = tree_size(d)
    print(f"{d}: {n} files, {b / 1e9:.2f} GB")
