"""The recorder given what ``accelerate.Accelerator.prepare`` returns: its ``AcceleratedOptimizer`` is a torch
Optimizer that never ran ``Optimizer.__init__`` (no hook dicts), so the torch optimizer under it is recorded."""
from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from clirun import scan_quiet  # noqa: E402
from models.corpus import quiet_threads  # noqa: E402
from recorder_kit import tensors_by_iteration  # noqa: E402

STEPS, ACCUMULATE = 3, 2


def _batch(i: int) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(i)
    return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def _train(path: Any = None) -> tuple[list[float], list[Any]]:
    """accelerate's loop: prepare, accumulate, ``accelerator.backward``, ``clip_grad_norm_``; the losses and
    the first layer's weight after each optimizer step."""
    from accelerate import Accelerator

    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    acc = Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATE)
    model, opt = acc.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-2))
    rec = Recorder(path, model, opt, level="parameters", save="tensors").start() if path else None
    losses, weights = [], []
    for i in range(STEPS):
        for k in range(ACCUMULATE):
            with acc.accumulate(model):
                x, y = _batch(ACCUMULATE * i + k)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                acc.backward(loss)
                if acc.sync_gradients:
                    acc.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
                losses.append(loss.item())
        weights.append(model[0].weight.detach().clone())
        if rec is not None:
            rec.step()
    if rec is not None:
        rec.close()
    return losses, weights


def test_accelerated_optimizer_is_recorded_unchanged(tmp_path: Any) -> None:
    """The same losses bit for bit; every optimizer step is an iteration holding the weight torch saw."""
    with quiet_threads():
        plain, _ = _train()
        recorded, weights = _train(tmp_path / "d")
    assert recorded == plain
    stored = tensors_by_iteration(str(tmp_path / "d"))
    assert sorted(stored) == list(range(STEPS))
    for i, want in enumerate(weights):
        assert torch.equal(torch.from_numpy(stored[i][("0.weight", "output", 0)].value()), want)
    scan_quiet(str(tmp_path / "d"))
