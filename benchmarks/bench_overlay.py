"""The graph overlay's timing (issue 26: under 1 s from opening a 1,000-node PyTorch recording to the
overlay drawn).

A GPT-2 with 3 blocks (transformers, from a config) trains 5 steps under tdbg's Recorder at the operator
level (tests/web/overlayrun.py: about 1,030 nodes a step, a fault planted at step 3). Then, in headless
Chromium against the real `tdbg serve` (a subprocess), on the page's own clock (navigation start =
0): the graph view opened with ``ov=max_abs`` at the last iteration until its nodes are drawn coloured.

- cold: a freshly started server for every run, with an empty statistics cache (it reads the graph and
  every tensor's statistics for the first time); the server's own start (process to listening: Python,
  the imports, the dump listed) is printed apart;
- warm: the page loaded again on a server that has served it once;
- step: the replay slider moved one iteration (the overlay redrawn for the other iteration).

Usage: python benchmarks/bench_overlay.py [--runs 5] [--root /tmp/tdbg-bench-overlay] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "web"))

# The page's own clock of the moment a coloured node is first on screen.
WATCH = """new MutationObserver(() => { if (!window.__coloured && document.querySelector('.gnode.ov-on'))
  window.__coloured = performance.now(); }).observe(document, { subtree: true, childList: true, attributes: true });"""


def _free_port() -> int:
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return int(so.getsockname()[1])


def _serve(root: str, cache_dir: str) -> tuple[subprocess.Popen, str, float]:
    """`tdbg serve root` in a subprocess, once it accepts connections; and ms it took to get there."""
    port = _free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "debugger.cli", "serve", root, "--port", str(port)], cwd=ROOT,
                            env={**os.environ, "TDBG_CACHE_DIR": cache_dir}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}/", (time.perf_counter() - t0) * 1000
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("tdbg serve did not start") from None
            time.sleep(0.02)


def _open_coloured(page: Any, url: str) -> float:
    """Load ``url`` in a fresh document; ms from navigation start until a node is drawn coloured."""
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector(".gnode.ov-on", timeout=60_000)
    return float(page.evaluate("window.__coloured"))


def _step_ms(page: Any) -> float:
    """ms from a click on 'previous iteration' until the nodes are drawn with the other iteration's values."""
    before = page.evaluate("document.querySelector('.gnode.ov-on .ov-tag-text').textContent")
    t = page.evaluate("""(before) => new Promise((done) => {
      const t0 = performance.now();
      const obs = new MutationObserver(() => { const x = document.querySelector('.gnode.ov-on .ov-tag-text');
        if (x && x.textContent !== before) { obs.disconnect(); done(performance.now() - t0); } });
      obs.observe(document, { subtree: true, childList: true, characterData: true });
      document.getElementById('it-prev').click(); })""", before)
    return float(t)


def measure(dump: str, runs: int, chromium: str) -> dict[str, Any]:
    """Cold, warm and step timings over ``runs`` runs each."""
    from playwright.sync_api import sync_playwright

    from debugger import open_dump
    rank = open_dump(dump).rank(0)
    last = rank.iterations()[-1]
    graph = next(g for g in rank.graph_ids if last in rank.iterations(g))
    nodes = len(rank.graph(graph))
    hash_ = f"#/graph?graph={graph}&it={last}&ov=max_abs"
    cold, warm, step, start = [], [], [], []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = b.new_page(viewport={"width": 1440, "height": 900})
        page.add_init_script(WATCH)
        for _ in range(runs):
            cache = tempfile.mkdtemp(prefix="tdbg-ov-cache-")
            proc, url, up = _serve(dump, cache)
            start.append(up)
            try:
                cold.append(_open_coloured(page, url + hash_))
                warm.append(_open_coloured(page, url + hash_))
                step.append(_step_ms(page))
            finally:
                proc.terminate()
                proc.wait(10)
                shutil.rmtree(cache, ignore_errors=True)
        b.close()
    med = lambda xs: round(statistics.median(xs), 1)   # noqa: E731
    return {"nodes": nodes, "graph": graph, "iteration": last, "runs": runs,
            "serve_start_ms": {"median": med(start), "max": round(max(start), 1)},
            "cold_ms": {"median": med(cold), "max": round(max(cold), 1), "all": [round(x) for x in cold]},
            "warm_ms": {"median": med(warm), "max": round(max(warm), 1)},
            "step_ms": {"median": med(step), "max": round(max(step), 1)}}


def main() -> int:
    """Record the run (once), time it, print and optionally save the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "tdbg-bench-overlay"))
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--json")
    a = ap.parse_args()
    dump = os.path.join(a.root, "gpt2-3blocks")
    if not os.path.isdir(dump):
        from overlayrun import record
        record(dump, steps=5, plant_at=3, n_layer=3)
    out = measure(dump, a.runs, a.chromium)
    print(f"GPT-2, 3 blocks: {out['nodes']} nodes in graph {out['graph']}, iteration {out['iteration']}")
    print(f"tdbg serve started (process to listening): median {out['serve_start_ms']['median']} ms")
    print(f"opened to overlay drawn, cold server: median {out['cold_ms']['median']} ms (max {out['cold_ms']['max']})")
    print(f"opened to overlay drawn, warm server: median {out['warm_ms']['median']} ms (max {out['warm_ms']['max']})")
    print(f"replay step to overlay redrawn:       median {out['step_ms']['median']} ms (max {out['step_ms']['max']})")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
