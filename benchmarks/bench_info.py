"""`tdbg info` end to end (a fresh `tdbg` process) on the sample and on a 50,000-file dump.

    python benchmarks/bench_info.py [--root /work/bench_data/scan]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from _util import ROOT, time_command, tree_size
from bigdump import ensure_big_dump


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="/work/bench_data/scan")
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    big = ensure_big_dump(a.root, files=50_000, layers=120, width=208, ranks=1)
    tdbg = f"{sys.executable} -m debugger.cli"
    rep = {}
    for name, path in (("sample", os.path.join(ROOT, "dumps_sample")), ("files_50k", big)):
        cmd = f"cd {ROOT} && {tdbg} info {path} --json > /dev/null"
        warm = [time_command(cmd) for _ in range(a.repeat)]
        rep[name] = {"files": tree_size(path)[0], "cold_s": time_command(cmd, cold=True),
                     "warm_median_s": statistics.median(warm), "warm_min_s": min(warm)}
    print(json.dumps(rep, indent=2))


if __name__ == "__main__":
    main()
