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


def children_cpu() -> float:
    """User + system CPU seconds of every child process waited for so far (and of their own waited children)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tree_size(root: str) -> tuple[int, int]:
    """(files, bytes) under root."""
    n = b = 0
    for d, _, fs in os.walk(root):
        for f in fs:
            n += 1
            b += os.path.getsize(os.path.join(d, f))
    return n, b


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc/*/stat."""
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _tree_memory(pid: int) -> tuple[int, int]:
    """(PSS, RSS) in kB summed over ``pid`` and its descendants (PSS counts a page shared by n forked
    processes 1/n times each, so the sum is what the tree really holds)."""
    kids = _children()
    todo, pss, rss = [pid], 0, 0
    while todo:
        p = todo.pop()
        todo.extend(kids.get(p, ()))
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            continue
    return pss, rss


def run_tree(cmd: list[str], cold: bool = False, interval: float = 0.05, env: dict | None = None) -> dict:
    """Run ``cmd``; its wall time, exit status and the peak memory of its whole process tree, sampled."""
    import threading

    if cold:
        drop_page_cache()
    peak = [0, 0]
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            pss, rss = _tree_memory(p.pid)
            peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)
            done.wait(interval)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    _, err = p.communicate()
    seconds = time.perf_counter() - t0
    done.set()
    th.join()
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {err.decode()[-2000:]}")
    return {"seconds": round(seconds, 3), "cpu_s": round(children_cpu() - cpu0, 3), "rc": p.returncode,
            "peak_tree_pss_mb": round(peak[0] / 1024, 1),
            "peak_tree_rss_mb": round(peak[1] / 1024, 1)}
