"""torch's other optimizers and schedulers: Adagrad, RMSprop with momentum, NAdam, RAdam with decoupled weight
decay, Adamax and Muon (2-D weights, AdamW for the rest), under CosineAnnealingWarmRestarts or ReduceLROnPlateau.

Truth from plain torch: the same run unrecorded gives the losses and weights bit for bit; the healthy run
scans quiet; a weight multiplied by 1e4 between steps is the headline at its iteration even where the
optimizer's step then moves other weights by as much (RAdam's first, unadapted steps).
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from debugger import open_dump  # noqa: E402
from debugger.torch import Recorder  # noqa: E402
from debugger.watch.engine import scan  # noqa: E402
from debugger.watch.registry import preset  # noqa: E402

STEPS = 6
Opt = torch.optim


def _muon(m: nn.Module) -> list[Any]:
    two_d = [p for p in m.parameters() if p.ndim == 2]
    return [Opt.Muon(two_d, lr=2e-2), Opt.AdamW([p for p in m.parameters() if p.ndim != 2], lr=1e-3)]


OPTIMIZERS: dict[str, Callable[[nn.Module], list[Any]]] = {
    "adagrad": lambda m: [Opt.Adagrad(m.parameters(), lr=1e-2)],
    "rmsprop": lambda m: [Opt.RMSprop(m.parameters(), lr=1e-3, momentum=0.9)],
    "nadam": lambda m: [Opt.NAdam(m.parameters(), lr=1e-3)],
    "radam": lambda m: [Opt.RAdam(m.parameters(), lr=1e-3, weight_decay=1e-2, decoupled_weight_decay=True)],
    "adamax": lambda m: [Opt.Adamax(m.parameters(), lr=2e-3)],
}
if hasattr(Opt, "Muon"):
    OPTIMIZERS["muon"] = _muon


def _train(name: str, path: str | None, scale_at: int | None = None) -> tuple[list[float], nn.Module]:
    """A LayerNorm MLP trained ``STEPS`` steps by optimizer ``name`` (recorded at "parameters" into ``path``)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    opts = OPTIMIZERS[name](m)
    plateau = name in ("rmsprop", "radam", "adamax")
    scheds = [Opt.lr_scheduler.ReduceLROnPlateau(o, patience=1, factor=0.5) if plateau
              else Opt.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3) for o in opts]
    rec = Recorder(path, m, opts, level="parameters", save="statistics").start() if path else None
    losses = []
    for i in range(STEPS):
        if i == scale_at:
            with torch.no_grad():
                m[3].weight.mul_(1e4)
        g = torch.Generator().manual_seed(i)
        loss = F.cross_entropy(m(torch.randn(16, 8, generator=g)), torch.randint(0, 4, (16,), generator=g))
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()
        for s in scheds:
            s.step(loss.item()) if plateau else s.step()
        losses.append(loss.item())
        if rec is not None:
            rec.step()
    if rec is not None:
        rec.close()
    return losses, m


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_other_optimizers_are_recorded_unchanged_and_quiet(tmp_path: Any, name: str) -> None:
    """Every optimizer's weights and state recorded, the training bit-identical, the healthy run quiet."""
    path = str(tmp_path / "d")
    plain, m0 = _train(name, None)
    losses, m1 = _train(name, path)
    assert losses == plain
    assert all(torch.equal(a, b) for a, b in zip(m0.state_dict().values(), m1.state_dict().values()))
    res = scan(open_dump(path), preset("parameters"), jobs=1)
    assert res.hits == [] and res.errors == [], [(h.watchpoint, h.iteration, h.node) for h in res.hits]


def test_a_weight_scaled_between_steps_heads_the_weights_its_step_then_moves(tmp_path: Any) -> None:
    """RAdam's first steps are unadapted (momentum SGD): with a weight scaled by 1e4 between steps 2 and 3,
    step 3's gradients move the LayerNorm's bias by some 100 times its size too (per torch), a true hit at the
    same iteration. The scaled weight is the cause and the headline, said to have changed between the steps
    (was: the bias, first in execution order)."""
    path = str(tmp_path / "d")
    _train("radam", path, scale_at=3)
    res = scan(open_dump(path), preset("parameters"), jobs=1)
    at_3 = {h.node for h in res.hits if h.watchpoint == "weight_change_too_large" and h.iteration == 3}
    assert {"3.weight", "2.bias"} <= at_3, res.hits
    first = res.first
    assert (first.watchpoint, first.iteration, first.node) == ("weight_change_too_large", 3, "3.weight")
    assert "changed between iterations 2 and 3, outside the optimizer" in first.note
    assert [h.node for h in res.hits if h.note] == ["3.weight"]
