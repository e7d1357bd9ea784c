"""Small real recordings for the triage's verdict tests (API and browser)."""
from __future__ import annotations

SPIKE_AT = 60


def record_spiked_series(dump: str) -> list[float]:
    """A real Recorder over an MLP: the per-step series only (no iteration recorded), 70 steps, the batch of
    step ``SPIKE_AT`` scaled by 1000; the losses plain torch saw."""
    import torch

    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    losses = []
    with Recorder(dump, model, opt, save="statistics", level="parameters", iterations=(), series=True) as rec:
        for step in range(70):
            loss = (model(x * (1000.0 if step == SPIKE_AT else 1.0)) - y).pow(2).mean()
            losses.append(loss.item())
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    return losses
