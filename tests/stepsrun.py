"""A real run recorded at level "parameters" every step and no series files (no ``series=True``), for reading
its iterations as its per-step series: a small MLP trained by SGD on mini-batches of a noisy regression; with
``plant``, that step's learning rate is x100 (the loss spikes at the step after: PLANT + 1)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from debugger.torch import Recorder

STEPS = 30
PLANT = 20
LR = 0.02


def train(root: str, steps: int = STEPS, plant: int | None = None, seed: int = 0, **options: Any) -> np.ndarray:
    """Train and record under ``root``; the losses as the loop computed them (float32), one per step."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    g = torch.Generator().manual_seed(seed + 100)
    x = torch.randn(512, 8, generator=g)
    y = x.sum(1, keepdim=True) + torch.randn(512, 1, generator=g)
    losses = []
    with Recorder(root, model, opt, **{"save": "statistics", "level": "parameters", **options}) as rec:
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"] = LR * 100 if step == plant else LR
            idx = torch.randint(0, 512, (32,), generator=g)
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            rec.step()
    return np.asarray(losses, dtype=np.float32)
