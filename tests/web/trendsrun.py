"""A real training run for the trends view: a two-layer MLP trained by Adam for STEPS steps with a planted
cause (fc1's weight scaled by SCALE at step PLANT, so the loss spikes there), recorded in full (every
operator) at iteration DEEP by tdbg's Recorder, with the per-step series of every weight, gradient and
update written by SeriesWriter from statistics computed with plain torch. The truth (the same
statistics, kept as float32 like the segments) is returned beside the dump."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from debugger.formats.tdbg_h5.series import SeriesWriter
from debugger.stats import STAT_NAMES
from debugger.torch import Recorder

STEPS = 160
PLANT = 120         # fc1.weight *= SCALE before this step's forward
SCALE = 25.0
DEEP = 118          # the one iteration recorded in full (the nearest deep capture to the spike)
SEGMENT = 32        # steps per segment: four segments


@dataclass
class Run:
    root: str
    names: list[str]
    roles: list[str]
    truth: np.ndarray          # (tensors, steps, 13) float64 of float32 values
    loss: np.ndarray           # (steps,)


def torch_stats(t: torch.Tensor) -> list[float]:
    """The 13 statistics of STAT_NAMES, computed with plain torch (std with ddof=1, as tdbg's)."""
    x = t.detach().double().flatten()
    fin = x[torch.isfinite(x)]
    n = x.numel()
    return [n, int(torch.isnan(x).sum()), int((x == float("inf")).sum()), int((x == float("-inf")).sum()),
            int((x == 0).sum()), int((x > 0).sum()), int((x < 0).sum()), float(fin.min()), float(fin.max()),
            float(fin.mean()), float(fin.abs().mean()), float(fin.std()) if n > 1 else 0.0, float(fin.norm())]


def _tensors(model: torch.nn.Module) -> tuple[list[str], list[str], list[str]]:
    names, roles, params = [], [], []
    for p, _ in model.named_parameters():
        for suffix, role in (("", "weight"), (".grad", "gradient"), (".update", "update")):
            names.append(p + suffix)
            roles.append(role)
            params.append(p)
    return names, roles, params


def train(root: str) -> Run:
    """Train, record and write the series under ``root`` (a dump root)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(16, 32))
    model.add_module("act", torch.nn.Tanh())
    model.add_module("fc2", torch.nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    names, roles, params = _tensors(model)
    truth, losses = [], []
    with Recorder(root, model, opt, save="statistics", level="ops", iterations=[DEEP]) as rec, \
            SeriesWriter(os.path.join(root, "rank_0"), names, roles=roles, params=params, segment_steps=SEGMENT) as sw:
        for step in range(STEPS):
            if step == PLANT:
                with torch.no_grad():
                    model.fc1.weight.mul_(SCALE)
            before = {p: w.detach().clone() for p, w in model.named_parameters()}
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            gnorm = float(torch.sqrt(sum((w.grad.double() ** 2).sum() for w in model.parameters())))
            opt.step()
            rows = []
            for p, w in model.named_parameters():
                rows += [torch_stats(w), torch_stats(w.grad), torch_stats(w.detach() - before[p])]
            stats = np.asarray(rows, np.float64)
            sw.add(step, stats, {"loss": float(loss.detach()), "lr": 1e-2, "grad_norm": gnorm})
            truth.append(stats)
            losses.append(float(loss.detach()))
            rec.step()
    t = np.stack(truth, axis=1)
    return Run(root, names, roles, t.astype(np.float32).astype(np.float64), np.asarray(losses, np.float32).astype(np.float64))


__all__ = ["Run", "train", "torch_stats", "STEPS", "PLANT", "DEEP", "STAT_NAMES"]
