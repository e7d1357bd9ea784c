"""The README's screenshots, taken in headless Chromium on the real `tdbg serve`, each at 1440x900 (NAME.png)
and at 1024x700 (NAME-1024x700.png, the smallest window every view is laid out for):

- triage.png: the triage page of dumps_sample/torch_dp2 in the folder of sample dumps;
- graph-overlay.png: a GPT-2 recording (tests/web/overlayrun.py, a fault planted at step 3) in the graph
  view coloured by max |x| at step 4, opened at the planted block's MLP, the planted layer selected;
- code.png: the code view of dumps_sample/torch_single, a line that made nodes chosen.

Usage: python docs/screenshots/make_screenshots.py   (writes the PNGs beside this file)
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "tests", "web"))

from bench_overlay import _serve  # noqa: E402

MLP = "model/transformer-GPT2Model/h.1-GPT2Block/mlp-GPT2MLP"
SIZES = (((1440, 900), ""), ((1024, 700), "-1024x700"))      # (viewport, suffix of the file name)


def _shot(page, url: str, ready: str, out: str, settle: float = 1.0) -> None:   # type: ignore[no-untyped-def]
    """``out`` (NAME.png) at each of SIZES: the page opened afresh at that size."""
    for (width, height), suffix in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.goto("about:blank")
        page.goto(url)
        page.wait_for_selector(ready, timeout=60_000)
        time.sleep(settle)
        path = os.path.join(HERE, out.replace(".png", f"{suffix}.png"))
        page.screenshot(path=path)
        print("wrote", path)


def main() -> int:
    """Serve the samples and the GPT-2 recording; take the three screenshots at both sizes."""
    from playwright.sync_api import sync_playwright

    from overlayrun import record
    work = tempfile.mkdtemp(prefix="tdbg-shots-")
    gpt2 = os.path.join(work, "gpt2")
    record(gpt2, steps=5, plant_at=3)
    samples, url_s, _ = _serve(os.path.join(ROOT, "dumps_sample"), os.path.join(work, "c1"))
    run, url_g, _ = _serve(gpt2, os.path.join(work, "c2"))
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
            page = b.new_page(viewport={"width": 1440, "height": 900})
            _shot(page, url_s + "#/triage?dump=torch_dp2", ".triage-grid .loss-card svg", "triage.png", 2.0)
            _shot(page, f"{url_g}#/graph?graph=1&it=4&ov=max_abs&scope={MLP}",
                  ".gnode.ov-on", "graph-overlay.png", 2.0)
            _shot(page, url_s + "#/code?dump=torch_single&it=3&node=model/fc1-Linear/addmm-0", ".src-lines .gut-mark", "code.png", 2.0)
            b.close()
    finally:
        for proc in (samples, run):
            proc.terminate()
            proc.wait(10)
        subprocess.run(["rm", "-rf", work], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
