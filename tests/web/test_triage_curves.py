"""The triage's loss and gradient-norm curves cover every iteration of the run: a PyTorch recording's
first step (which creates the optimizer state) is a graph of its own, and the curves took only one
graph's iterations (one loss point for eight steps). Truth: the training loop's own loss and gradient
norm, computed by plain torch."""
from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from debugger import StatsCache, open_dump, triage

STEPS = 6


def _train(out: str) -> tuple[list[float], list[float]]:
    """A small MLP trained with SGD and momentum under the Recorder; the loop's losses and gradient norms."""
    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses, norms = [], []
    with Recorder(out, model, opt, save="statistics") as rec:
        for i in range(STEPS):
            g = torch.Generator().manual_seed(i)
            x, y = torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            losses.append(float(loss.detach()))
            norms.append(float(torch.sqrt(sum(p.grad.double().pow(2).sum() for p in model.parameters()))))
            opt.step()
            rec.step()
    return losses, norms


@pytest.fixture(scope="module")
def run(tmp_path_factory: Any) -> tuple[str, list[float], list[float]]:
    out = str(tmp_path_factory.mktemp("curves") / "run")
    losses, norms = _train(out)
    return out, losses, norms


def test_the_curves_take_each_iteration_from_the_graph_that_ran_it(run: Any) -> None:
    out, losses, norms = run
    rank = open_dump(out).rank(0)
    assert len(rank.graph_ids) > 1 and rank.iterations(rank.graph_ids[0]) == [0]    # step 0 is a graph of its own
    cache = StatsCache(enabled=False)
    (loss,) = triage.loss_curves(open_dump(out), cache)
    assert [p[0] for p in loss["points"]] == list(range(STEPS))
    assert [p[1] for p in loss["points"]] == pytest.approx(losses, rel=1e-5)
    spans = loss["graph_spans"]
    assert spans[0] == [rank.graph_ids[0], 0, 0] and spans[-1][2] == STEPS - 1
    for gid, first, last in spans:
        assert all(it in rank.iterations(gid) for it in range(first, last + 1))
    (grad,) = triage.grad_norm_curves(open_dump(out), cache)
    assert [p[0] for p in grad["points"]] == list(range(STEPS))
    assert [p[1] for p in grad["points"]] == pytest.approx(norms, rel=1e-4)
    # below a running job's newest iteration
    (part,) = triage.loss_curves(open_dump(out), cache, below=3)
    assert [p[0] for p in part["points"]] == [0, 1, 2]


def test_the_triage_page_gets_every_point(run: Any, make_app: Any) -> None:
    out, losses, norms = run
    client = make_app(out).test_client()
    deadline = time.time() + 60
    r = client.get("/api/triage").get_json()
    while r["state"] == "running" and time.time() < deadline:
        time.sleep(0.1)
        r = client.get("/api/triage").get_json()
    t = r["result"]
    assert [p[1] for p in t["loss"][0]["points"]] == pytest.approx(losses, rel=1e-5)
    assert [p[1] for p in t["grad_norm"][0]["points"]] == pytest.approx(norms, rel=1e-4)
