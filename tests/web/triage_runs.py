"""Small real recordings for the triage's verdict tests (API and browser)."""
from __future__ import annotations

from typing import Any, Callable

SPIKE_AT = 60


def train_recorded(dump: str, steps: int, batch: Callable[[int], tuple[Any, Any]], **options: Any) -> list[float]:
    """A real Recorder (``options``: save, level, iterations, series ...) over a small MLP trained with SGD for
    ``steps`` steps on ``batch(step)`` = (x, y); the losses plain torch saw."""
    import torch

    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    with Recorder(dump, model, opt, **options) as rec:
        for step in range(steps):
            x, y = batch(step)
            loss = (model(x) - y).pow(2).mean()
            losses.append(loss.item())
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    return losses


def record_spiked_series(dump: str) -> list[float]:
    """The per-step series only (no iteration recorded), 70 steps, the batch of step ``SPIKE_AT`` scaled by
    1000; the losses plain torch saw."""
    import torch

    x, y = torch.randn(32, 8, generator=torch.Generator().manual_seed(1)), torch.zeros(32, 1)
    return train_recorded(dump, 70, lambda step: (x * (1000.0 if step == SPIKE_AT else 1.0), y),
                          save="statistics", level="parameters", iterations=(), series=True)


def record_healthy_every_step(dump: str) -> list[float]:
    """Every step recorded at level "parameters" with the series, 8 healthy steps."""
    import torch

    g = torch.Generator().manual_seed(1)
    return train_recorded(dump, 8, lambda step: (torch.randn(16, 8, generator=g), torch.zeros(16, 1)),
                          save="statistics", level="parameters", series=True)
