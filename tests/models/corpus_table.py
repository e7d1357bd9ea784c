"""Print the corpus table (model x loop x mode: the recommended preset's hits, error records and skipped
checks) for a closing note: ``python tests/models/corpus_table.py [--only NAME]``. Not a test."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402


def main() -> None:
    """Run every healthy variant and print one markdown row per model, loop and mode."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append")
    args = ap.parse_args()
    print("| model | loop | mode | loss (torch) | hits (by watchpoint) | error records | skipped checks | s |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp, corpus.quiet_threads():
        for name, loop, modes in corpus.HEALTHY:
            if args.only and name not in args.only:
                continue
            for save in modes:
                t = time.perf_counter()
                path = os.path.join(tmp, f"{name}-{save}")
                truth = corpus.train(path, corpus.build(name), loop, save=save)
                s = corpus.summary(corpus.scan_recommended(path))
                errors, skipped = s.pop("errors"), s.pop("skipped")
                hits = ", ".join(f"{k} {v}" for k, v in sorted(s.items())) or "0"
                loss = f"{truth.losses[0]:.3g} -> {truth.losses[-1]:.3g}"
                print(f"| {name} | {corpus.loop_label(loop)} | {save} | {loss} | {hits} | {errors} | {skipped} | "
                      f"{time.perf_counter() - t:.1f} |", flush=True)


if __name__ == "__main__":
    main()
