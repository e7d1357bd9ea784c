"""A complex-valued weight (torch.cfloat) trained with Adam beside a ParameterList and a ParameterDict.

Truth from plain torch: the same run unrecorded gives the losses and weights bit for bit; the recorded
complex weight equals torch's; the healthy run scans quiet; an inf written into the complex weight between
steps is the headline at its iteration, as a real weight's is (complex tensors are judged by their
magnitudes: their NaN and Inf are counted).
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from debugger import open_dump  # noqa: E402
from recorder_kit import train_steps  # noqa: E402
from debugger.torch import Recorder  # noqa: E402
from debugger.watch.engine import scan  # noqa: E402
from debugger.watch.registry import preset  # noqa: E402

STEPS = 4


class _Spectral(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ws = nn.ParameterList([nn.Parameter(torch.randn(8, 8) * 0.3) for _ in range(2)])
        self.bs = nn.ParameterDict({"a": nn.Parameter(torch.randn(8) * 0.1)})
        self.c = nn.Parameter(torch.randn(8, dtype=torch.cfloat) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(x @ self.ws[0] + self.bs["a"]) @ self.ws[1]
        return (torch.fft.fft(h) * self.c).abs()


def _train(path: str | None, level: str = "parameters", save: str = "tensors",
           inf_at: int | None = None) -> tuple[list[float], nn.Module]:
    torch.manual_seed(0)
    m = _Spectral()
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rec = Recorder(path, m, opt, level=level, save=save).start() if path else None

    def loss_of(i: int) -> torch.Tensor:
        if i == inf_at:
            with torch.no_grad():
                m.c[0] = complex(float("inf"), 0.0)
        x = torch.randn(16, 8, generator=torch.Generator().manual_seed(i))
        return F.mse_loss(m(x), x.abs())
    losses = train_steps(opt, loss_of, STEPS, rec)
    if rec is not None:
        rec.close()
    return losses, m


@pytest.mark.parametrize("level", ["parameters", "modules", "ops"])
def test_a_complex_weight_is_recorded_unchanged_and_quiet(tmp_path: Any, level: str) -> None:
    """Bit-identical training, the complex weight's last value as torch has it, the scan quiet."""
    path = str(tmp_path / "d")
    plain, m0 = _train(None)
    losses, m1 = _train(path, level)
    assert losses == plain
    assert all(torch.equal(a, b) for a, b in zip(m0.state_dict().values(), m1.state_dict().values()))
    r = open_dump(path).rank(0)
    gid = next(g for g in r.graphs if STEPS - 1 in r.iterations(g))
    assert np.array_equal(r.tensor_map(gid, STEPS - 1)[("c", "output", 0)].value(), m1.c.detach().numpy())
    res = scan(open_dump(path), preset("parameters" if level == "parameters" else "recommended"), jobs=1)
    assert res.hits == [], [(h.watchpoint, h.iteration, h.node) for h in res.hits]


@pytest.mark.parametrize("save", ["tensors", "statistics"])
def test_an_inf_in_a_complex_weight_is_the_headline(tmp_path: Any, save: str) -> None:
    """An inf written into the complex weight between steps 1 and 2: the first problem is that weight at
    iteration 2, read non-finite (was: the loss, the complex tensors never swept for NaN or Inf)."""
    path = str(tmp_path / "d")
    _train(path, save=save, inf_at=2)
    first = scan(open_dump(path), preset("parameters"), jobs=1).first
    assert first is not None and (first.watchpoint, first.iteration, first.param) == ("overflow", 2, "c"), first
    assert "changed outside the recorded operators" in first.note


@pytest.mark.parametrize("level", ["modules", "ops"])
def test_a_model_whose_children_are_never_called_is_not_taken_for_compiled(tmp_path: Any, level: str) -> None:
    """The model's only children are a ParameterList and a ParameterDict, which are never called: no module call
    is seen, and that is no sign of a compiled model even once this process compiled something (was: said to
    run compiled, and its later "ops" iterations recorded at "modules")."""
    torch.compile(lambda x: x * 2)(torch.ones(3))      # something compiled in this process
    path = str(tmp_path / "d")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _train(path, level)
    r = open_dump(path).rank(0)
    assert {r.graph(g).level for g in r.graphs} == {level}


def test_the_series_keeps_a_complex_weight_by_its_magnitudes(tmp_path: Any) -> None:
    """Recorder(series=True): the complex weight, its update, gradient and Adam state have rows, their statistics
    those of torch's magnitudes (was: left out of the series, and nothing said so)."""
    torch.manual_seed(0)
    m = _Spectral()
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    want: list[tuple[float, float]] = []
    with Recorder(str(tmp_path / "d"), m, opt, series=True, level="parameters", iterations=()) as rec:
        for i in range(STEPS):
            x = torch.randn(16, 8, generator=torch.Generator().manual_seed(i))
            loss = F.mse_loss(m(x), x.abs())
            opt.zero_grad()
            loss.backward()
            opt.step()
            want.append((float(m.c.detach().abs().max()), float(m.c.grad.abs().max())))
            rec.step()
    s = open_dump(str(tmp_path / "d")).rank(0).series
    names = {t.name for t in s.catalog()}
    assert {"c", "c.update", "c.grad", "exp_avg.c", "exp_avg_sq.c"} <= names, names
    _, w_max = s.curve("c", "max")
    _, g_max = s.curve("c.grad", "max")
    assert np.allclose(w_max, [w for w, _ in want], rtol=1e-6) and np.allclose(g_max, [g for _, g in want], rtol=1e-6)
