"""The device statistics path (torch reductions, no host sync) against debugger.stats, run on the CPU."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from debugger.stats.core import COUNT_NAMES, STAT_NAMES, tensor_stats  # noqa: E402
from debugger.torch.devstats import _as_float, _masked, rows_to_dicts, stats_row  # noqa: E402


def _cases() -> list:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5000, generator=g) * 3 + 1
    special = x.clone()
    special[::7] = 0.0
    special[3], special[10], special[11] = float("nan"), float("inf"), float("-inf")
    return [x, special, torch.full((10,), float("nan")), torch.zeros(0), torch.tensor(2.5),
            torch.randint(-5, 5, (300,), generator=g), torch.rand(40, generator=g) > 0.5,
            x.to(torch.float16), x.to(torch.float64).reshape(50, 100).t(), torch.tensor([3e38, 3e38, -1.0])]


@pytest.mark.parametrize("t", _cases(), ids=lambda t: f"{t.dtype}-{tuple(t.shape)}")
def test_device_rows_equal_debugger_stats(t: "torch.Tensor") -> None:
    """Every column as debugger.stats computes it over the same values (counts exactly)."""
    want = tensor_stats(t.numpy() if t.dtype != torch.bool else t.numpy()).to_dict()
    if not t.numel():
        assert want["count"] == 0
        return
    got = rows_to_dicts([_masked(_as_float(t).reshape(-1), t.numel())])[0]
    for n in STAT_NAMES:
        w, v = want[n], got[n]
        if w is None:
            assert v is None, n
        elif n in COUNT_NAMES:
            assert v == w, n
        else:
            assert v == pytest.approx(w, rel=1e-5, abs=1e-9), n


def test_cpu_rows_are_debugger_stats() -> None:
    """On the CPU stats_row is debugger.stats itself in its compiled form (bit-equal), bfloat16 widened
    to float32."""
    t = torch.randn(1000).to(torch.bfloat16)
    got = stats_row(t)
    want = tensor_stats(t.float().numpy(), compiled=True).to_dict()
    assert got == {k: want[k] for k in STAT_NAMES}
    assert math.isclose(rows_to_dicts([stats_row(torch.arange(4.0))])[0]["mean"], 1.5)
    assert np.isnan(np.float64(rows_to_dicts([_masked(torch.full((3,), float("nan")), 3)])[0]["min"] or np.nan))
