"""Two optimizers stepping in turn: a GAN's generator and discriminator (D's loss reads G's output detached).

Truth from plain torch: the same run unrecorded gives the losses and weights bit for bit; the labels the
loop makes with ``torch.zeros_like`` / ``torch.ones`` are all zero (one) by construction, the code's own
constants, no finding; a weight made inf between steps is the headline at its iteration.
"""
from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from debugger import open_dump  # noqa: E402
from debugger.formats.records import Kind  # noqa: E402
from debugger.torch import Recorder  # noqa: E402
from debugger.watch.engine import scan  # noqa: E402
from debugger.watch.registry import preset  # noqa: E402

STEPS = 4


def _gan(path: str | None, level: str = "ops", inf_at: int | None = None) -> tuple[list[tuple[float, float]], Any]:
    """A small GAN trained ``STEPS`` steps (recorded into ``path`` when given): the losses and the model."""
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    D = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    model = nn.ModuleDict({"G": G, "D": D})
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    rec = Recorder(path, model, [opt_g, opt_d], level=level).start() if path else None
    losses = []
    for i in range(STEPS):
        if i == inf_at:
            with torch.no_grad():
                G[2].weight[0, 0] = float("inf")
        g = torch.Generator().manual_seed(i)
        real, z = torch.randn(16, 4, generator=g) + 2, torch.randn(16, 8, generator=g)
        fake = G(z)
        d_real, d_fake = D(real), D(fake.detach())
        loss_d = F.binary_cross_entropy_with_logits(d_real, torch.ones(16, 1)) + \
            F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        d_out = D(fake)
        loss_g = F.binary_cross_entropy_with_logits(d_out, d_out.new_ones(16, 1))
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        losses.append((loss_d.item(), loss_g.item()))
        if rec is not None:
            rec.step()
    if rec is not None:
        rec.close()
    return losses, model


@pytest.mark.parametrize("level", ["ops", "modules", "parameters"])
def test_a_gan_is_recorded_unchanged_and_its_labels_are_no_finding(tmp_path: Any, level: str) -> None:
    """Both optimizers' weights, gradients and state recorded, the training bit-identical, and the scan
    quiet: the labels made by ``torch.zeros_like`` (all zero, per torch) are the code's constants, not
    all-zero tensors to report (was: a tensor_all_zero hit per label per step at "ops")."""
    path = str(tmp_path / "d")
    plain, m0 = _gan(None)
    losses, m1 = _gan(path, level)
    assert losses == plain
    assert all(torch.equal(a, b) for a, b in zip(m0.state_dict().values(), m1.state_dict().values()))
    res = scan(open_dump(path), preset("recommended" if level != "parameters" else "parameters"), jobs=1)
    assert res.hits == [], [(h.watchpoint, h.iteration, h.node) for h in res.hits][:4]
    g = open_dump(path).rank(0).graphs[0]
    assert {n.param for n in g.nodes() if n.kind == Kind.GRADIENT} == {n for n, _ in m1.named_parameters()}
    if level == "ops":
        labels = [n for n in g.nodes() if n.scope == "global" and n.op_type in ("ones", "zeros_like", "new_ones")]
        assert len(labels) == 3 and all(n.kind == Kind.CONSTANT for n in labels), [(n.name, n.kind) for n in labels]


def test_an_inf_in_the_generator_is_the_headline(tmp_path: Any) -> None:
    """An inf written into G's last weight at step 2: the first problem, at iteration 2, at the write."""
    path = str(tmp_path / "d")
    _gan(path, "ops", inf_at=2)
    res = scan(open_dump(path), preset("recommended"), jobs=1)
    assert res.first is not None and res.first.iteration == 2 and res.first.watchpoint == "overflow", res.first
