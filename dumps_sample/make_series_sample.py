"""Make dumps_sample/torch_series: a run recorded as a per-step series, with a real loss spike.

    python dumps_sample/make_series_sample.py --out dumps_sample/torch_series

The healthy network of make_torch_sample.py learns a fixed pool of 16 batches with SGD for 240 steps. Step
150 runs at 50 times the learning rate (a scheduler bug): its update is huge, the loss of step 151 jumps about
tenfold, and training recovers over the next steps. The recorder keeps every step's statistics (``series=True``),
records iterations 0-1 at "ops" (the graph), and its trigger records the 3 steps after the spike at "ops" (the
deep capture `tdbg spikes` and Trends open).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from debugger.torch import Recorder, Trigger  # noqa: E402
from make_torch_sample import build  # noqa: E402

STEPS, SPIKE, LR_TIMES = 240, 150, 50.0


def pool() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """16 fixed batches of 8 images, labels a function of the image (learnable)."""
    rng = np.random.default_rng(7)
    out = []
    for _ in range(16):
        x = rng.normal(0.0, 1.0, (8, 1, 8, 8)).astype(np.float32)
        y = (x.reshape(8, -1)[:, :10].argmax(axis=1)).astype(np.int64)
        out.append((torch.from_numpy(x), torch.from_numpy(y)))
    return out


def train(out: str) -> None:
    """Train STEPS steps under the recorder, step SPIKE at LR_TIMES the learning rate."""
    torch.manual_seed(0)
    net, opt = build(healthy=True)
    batches = pool()
    base = [g["lr"] for g in opt.param_groups]
    with Recorder(out, net, opt, save="statistics", series=True, iterations=[0, 1],
                  trigger=Trigger(loss_factor=3.0, steps=3)) as rec:
        for step in range(STEPS):
            x, y = batches[step % len(batches)]
            for g, lr in zip(opt.param_groups, base):
                g["lr"] = lr * (LR_TIMES if step == SPIKE else 1.0)
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    train(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
