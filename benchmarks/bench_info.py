"""`tdbg info` end to end (a fresh `tdbg` process) on the sample and on a 50,000-file dump.

    python benchmarks/bench_info.py [--root /work/bench_data/scan] [--repeat 5] [--baseline OTHER_CHECKOUT]
                                    [--as-found]

``--baseline DIR`` times another checkout of tdbg (``main``, say) in the same run, interleaved with this
one, so both see the same load. Bytecode of each checkout is compiled first (what ``pip install`` does;
with ``PYTHONDONTWRITEBYTECODE`` set, every run would otherwise compile each module it imports);
``--as-found`` leaves it as it is. Prints medians and minimums (other work on the machine only ever
slows a run down) and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

from _util import ROOT, time_command, tree_size
from bigdump import ensure_big_dump


def _compile(checkout: str) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(checkout, "debugger")], check=True,
                   stdout=subprocess.DEVNULL)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="/work/bench_data/scan")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--baseline", help="another checkout of tdbg, timed side by side")
    p.add_argument("--as-found", action="store_true", help="do not compile bytecode first")
    a = p.parse_args()
    big = ensure_big_dump(a.root, files=50_000, layers=120, width=208, ranks=1)
    checkouts = {"tdbg": ROOT, **({"baseline": a.baseline} if a.baseline else {})}
    if not a.as_found:
        for checkout in checkouts.values():
            _compile(checkout)
    rep: dict = {"bytecode": "as found" if a.as_found else "compiled", "checkouts": checkouts}
    for name, path in (("sample", os.path.join(ROOT, "dumps_sample")), ("files_50k", big)):
        cmds = {k: f"cd {shlex.quote(c)} && PYTHONPATH={shlex.quote(c)} {shlex.quote(sys.executable)} -m debugger.cli "
                   f"info {shlex.quote(path)} --json > /dev/null" for k, c in checkouts.items()}
        warm: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(a.repeat):
            for k, cmd in cmds.items():
                warm[k].append(round(time_command(cmd), 3))
        row: dict = {"files": tree_size(path)[0], "cold_s": time_command(cmds["tdbg"], cold=True)}
        for k, times in warm.items():
            prefix = "" if k == "tdbg" else f"{k}_"
            row.update({f"{prefix}warm_median_s": statistics.median(times), f"{prefix}warm_min_s": min(times),
                        f"{prefix}warm_all_s": times})
        rep[name] = row
    rep["load_average"] = os.getloadavg()
    print(json.dumps(rep, indent=2))


if __name__ == "__main__":
    main()
