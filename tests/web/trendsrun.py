"""A real training run for the trends view: a two-layer MLP trained by Adam for STEPS steps with a planted
cause (fc1's weight scaled by SCALE at step PLANT, so the loss spikes there), recorded by tdbg's
Recorder: the per-step series of every step (series=True) and every operator at iteration DEEP. The
truth (each weight's, gradient's and update's statistics, the loss) is computed in the loop with plain
torch, apart from tdbg, and kept as float32 like the segments."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from debugger.stats.core import STAT_NAMES
from debugger.torch import Recorder

STEPS = 160
PLANT = 120         # fc1.weight *= SCALE before this step's forward
SCALE = 25.0
DEEP = 118          # the one iteration recorded in full (the nearest deep capture to the spike)


@dataclass
class Run:
    root: str
    truth: dict[str, np.ndarray]   # tensor name -> (steps, 13) float64 of float32 values
    loss: np.ndarray               # (steps,)


def torch_stats(t: torch.Tensor) -> list[float]:
    """The 13 statistics of STAT_NAMES, computed with plain torch (std with ddof=1, as tdbg's)."""
    x = t.detach().double().flatten()
    fin = x[torch.isfinite(x)]
    n = x.numel()
    return [n, int(torch.isnan(x).sum()), int((x == float("inf")).sum()), int((x == float("-inf")).sum()),
            int((x == 0).sum()), int((x > 0).sum()), int((x < 0).sum()), float(fin.min()), float(fin.max()),
            float(fin.mean()), float(fin.abs().mean()), float(fin.std()) if n > 1 else 0.0, float(fin.norm())]


def _stats_of(model: torch.nn.Module, before: dict[str, torch.Tensor]) -> dict[str, list[float]]:
    out = {}
    for p, w in model.named_parameters():
        out[p], out[f"{p}.grad"], out[f"{p}.update"] = torch_stats(w), torch_stats(w.grad), torch_stats(w.detach() - before[p])
    return out


def train(root: str) -> Run:
    """Train and record under ``root`` (a dump root)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(16, 32))
    model.add_module("act", torch.nn.Tanh())
    model.add_module("fc2", torch.nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    truth: dict[str, list[list[float]]] = {}
    losses = []
    with Recorder(root, model, opt, save="statistics", level="ops", iterations=[DEEP], series=True) as rec:
        for step in range(STEPS):
            if step == PLANT:
                with torch.no_grad():
                    model.fc1.weight.mul_(SCALE)
            before = {p: w.detach().clone() for p, w in model.named_parameters()}
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            for name, row in _stats_of(model, before).items():
                truth.setdefault(name, []).append(row)
            losses.append(float(loss.detach()))
            rec.step()
    f32 = {k: np.asarray(v, np.float64).astype(np.float32).astype(np.float64) for k, v in truth.items()}
    return Run(root, f32, np.asarray(losses, np.float32).astype(np.float64))


__all__ = ["Run", "train", "torch_stats", "STEPS", "PLANT", "DEEP", "STAT_NAMES"]
