"""An EMA of the weights at level "ops": diffusers' ``EMAModel`` (and the same written by hand,
``shadow.lerp_(p, 1 - decay)``) keeps shadow copies, plain tensors the loop made before the run, and
updates them after ``optimizer.step()`` from the updated weights. A shadow of a zero-initialised bias is all
zero at the first step (plain torch says so below): it was taken for a data input, "read with the model's
weights", and every such shadow was a ``tensor_all_zero`` hit on a healthy run (21 on a diffusers UNet).
An all-zero batch an evaluation forward reads with the weights is still found."""
from __future__ import annotations

import os
import sys
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
import corpus  # noqa: E402

from debugger.torch import Recorder  # noqa: E402

STEPS = 3


class _HandEma:
    """The EMA people write: shadow copies, lerped towards the weights after each step."""

    def __init__(self, model: nn.Module) -> None:
        self.shadow = [p.detach().clone() for p in model.parameters()]

    def step(self, model: nn.Module) -> None:
        with torch.no_grad():
            for s, p in zip(self.shadow, model.parameters()):
                s.lerp_(p, 0.1)


def _diffusers_ema(model: nn.Module) -> Any:
    training_utils = pytest.importorskip("diffusers.training_utils")
    ema = training_utils.EMAModel(model.parameters(), decay=0.9)
    ema.shadow = ema.shadow_params
    return ema


def _hand(model: nn.Module) -> Any:
    return _HandEma(model)


def _train(out: str, make_ema: Callable[[nn.Module], Any], eval_zeros: bool) -> list[torch.Tensor]:
    """STEPS Adam steps of a LayerNorm MLP with an EMA, recorded at "ops"; the shadows as the run began."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ema = make_ema(model)
    first = [s.clone() for s in ema.shadow]
    g = torch.Generator().manual_seed(1)
    zeros = torch.zeros(4, 8)       # made before the run: an input of each iteration, as the batches of a loader are
    with corpus.quiet_threads(), Recorder(out, model, opt, save="statistics") as rec:
        for _ in range(STEPS):
            if eval_zeros:
                with torch.no_grad():
                    model(zeros)        # an evaluation batch of zeros: a real finding
            loss = F.cross_entropy(model(torch.randn(4, 8, generator=g)), torch.randint(0, 2, (4,), generator=g))
            opt.zero_grad()
            loss.backward()
            opt.step()
            ema.step(model) if isinstance(ema, _HandEma) else ema.step(model.parameters())
            rec.step()
    return first


@pytest.mark.parametrize("make_ema", [_hand, _diffusers_ema], ids=["hand", "diffusers"])
def test_an_ema_of_the_weights_is_no_finding(tmp_path: Any, make_ema: Callable[[nn.Module], Any]) -> None:
    out = str(tmp_path / "d")
    first = _train(out, make_ema, eval_zeros=False)
    assert sum(1 for s in first if not s.any()) == 1, "the LayerNorm's bias starts at zero, and so does its shadow"
    res = corpus.scan_recommended(out)
    assert [(h.watchpoint, h.iteration, h.node) for h in res.hits] == []


def test_an_all_zero_evaluation_batch_beside_an_ema_is_still_found(tmp_path: Any) -> None:
    out = str(tmp_path / "d")
    _train(out, _hand, eval_zeros=True)
    res = corpus.scan_recommended(out)
    hits = {(h.watchpoint, h.iteration, h.node) for h in res.hits}
    # the batch is input-0 of each iteration (read first); the shadows, read after the step, are no finding
    assert hits == {("tensor_all_zero", it, "input-0") for it in range(STEPS)}, hits
