"""Recorder on torch.func training: ``grad_and_value(functional_call(model, params, ...))`` and a manual SGD
update in no_grad, no torch.optim at all. At level "modules" the module hooks are handed torch.func's
wrappers (no storage): every iteration used to be dropped ("Cannot access data pointer of Tensor that
doesn't have storage"), leaving an empty dump. Truth from plain torch: the same step's module outputs
computed outside the transform with the same parameters."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.func import functional_call, grad_and_value  # noqa: E402

from debugger import open_dump  # noqa: E402
from debugger.torch import Recorder  # noqa: E402

STEPS = 3


def _train(out: str | None) -> tuple[list[float], list[dict[str, torch.Tensor]], nn.Module]:
    """STEPS functional SGD steps (recorded at "modules" into ``out`` unless None): the losses, the
    parameters each step read, the model."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    params = {k: v.detach() for k, v in model.named_parameters()}     # the model's memory, as torch.func's docs write it
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(6, 8, generator=g), torch.randint(0, 4, (6,), generator=g)) for _ in range(STEPS)]

    def loss_fn(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(model, p, (x,)), y)

    step = grad_and_value(loss_fn)
    rec = Recorder(out, model, None, save="tensors", level="modules").start() if out else None
    losses, read = [], []
    try:
        for x, y in data:
            read.append({k: v.clone() for k, v in params.items()})
            grads, loss = step(params, x, y)
            with torch.no_grad():
                for k in params:
                    params[k].sub_(0.1 * grads[k])
            losses.append(loss.item())
            if rec:
                rec.step()
    finally:
        if rec:
            rec.close()
    return losses, read, model


def test_module_calls_inside_torch_func_grad_are_recorded_with_their_values(tmp_path: Any) -> None:
    """Every iteration is in the dump, each Linear's and the Tanh's output as plain torch computes it from
    the step's parameters, and the training is bit-identical to the unrecorded run."""
    plain, read, model = _train(None)
    out = str(tmp_path / "d")
    with _NoDrop() as said:
        losses, _, _ = _train(out)
    assert losses == plain
    # no optimizer: the parameters are no trained weights, and the recorder says so once
    assert sum("no optimizer was given" in m for m in said) == 1, said
    rank = open_dump(out).rank(0)
    assert rank.iterations(0) == list(range(STEPS))
    x_of = torch.Generator().manual_seed(1)
    for it in range(STEPS):
        x = torch.randn(6, 8, generator=x_of)
        torch.randint(0, 4, (6,), generator=x_of)
        with torch.no_grad():
            h1 = F.linear(x, read[it]["0.weight"], read[it]["0.bias"])
            h2 = torch.tanh(h1)
            h3 = F.linear(h2, read[it]["2.weight"], read[it]["2.bias"])
        tm = rank.tensor_map(0, it)
        for node, want in (("model/0-Linear", h1), ("model/1-Tanh", h2), ("model/2-Linear", h3)):
            assert np.array_equal(tm[(node, "output", 0)].source.array(), want.numpy()), (it, node)


class _NoDrop:
    """Fails the test when the recorder drops an iteration (its RuntimeWarning); the warnings said, as a list."""

    def __enter__(self) -> list[str]:
        self._w = warnings.catch_warnings(record=True)
        self.caught = self._w.__enter__()
        warnings.simplefilter("always")
        self.said: list[str] = []
        return self.said

    def __exit__(self, *exc: Any) -> None:
        self._w.__exit__(*exc)
        self.said += [str(w.message) for w in self.caught]
        dropped = [m for m in self.said if "is not recorded" in m]
        assert not dropped, dropped
