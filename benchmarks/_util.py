"""Shared by the benchmarks: timing in a fresh process, page-cache control, peak memory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def drop_page_cache() -> bool:
    """Drop the OS page cache (needs root); False when not allowed."""
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def run_python(code: str, cold: bool = False, **names: object) -> dict:
    """Run ``code`` in a fresh interpreter, ``names`` set as globals; it fills the dict ``out``, printed as
    JSON with the wall time and peak RSS added."""
    code = "".join(f"{k} = {v!r}\n" for k, v in names.items()) + code
    if cold:
        drop_page_cache()
    wrapper = (
        "import json, resource, time, sys\n"
        f"sys.path[:0] = [{HERE!r}, {os.path.join(ROOT, 'tests')!r}, {ROOT!r}]\n"
        "t0 = time.perf_counter()\n"
        "out = {}\n"
        f"exec(compile({code!r}, 'bench', 'exec'))\n"
        "out['seconds'] = time.perf_counter() - t0\n"
        "self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "out['peak_rss_mb'] = max(self_kb, child_kb) / 1024\n"
        "print(json.dumps(out))\n"
    )
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["process_seconds"] = time.perf_counter() - t0
    return res


def time_command(cmd: str, cold: bool = False) -> float:
    """Wall time of a shell command."""
    if cold:
        drop_page_cache()
    t0 = time.perf_counter()
    subprocess.run(cmd, shell=True, check=True)
    return time.perf_counter() - t0


def tree_size(root: str) -> tuple[int, int]:
    """(files, bytes) under root."""
    n = b = 0
    for d, _, fs in os.walk(root):
        for f in fs:
            n += 1
            b += os.path.getsize(os.path.join(d, f))
    return n, b
