"""The triage's loss and gradient-norm curves cover every iteration of the run: a PyTorch recording's
first step (which creates the optimizer state) is a graph of its own, and the curves took only one
graph's iterations (one loss point for eight steps). Truth: the training loop's own loss and gradient
norm, computed by plain torch."""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import pytest
import torch

from debugger import StatsCache, open_dump
from debugger.views import triage
from debugger.formats.records import GraphRecord, Kind, NodeRecord
from debugger.formats.tdbg_h5.writer import DumpWriter

STEPS = 6
SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")


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
    (none,) = triage.loss_curves(open_dump(out), cache, below=0)     # a job writing its first step: the node still named
    assert none["points"] == [] and none["node"] == loss["node"]


def _triage(client: Any, dump: str = "") -> dict[str, Any]:
    """GET triage, once its background job is done."""
    deadline = time.time() + 60
    r = client.get(f"/api/triage?dump={dump}").get_json()
    while r["state"] == "running" and time.time() < deadline:
        time.sleep(0.1)
        r = client.get(f"/api/triage?dump={dump}").get_json()
    return r["result"]


def test_the_triage_page_gets_every_point(run: Any, make_app: Any) -> None:
    out, losses, norms = run
    t = _triage(make_app(out).test_client())
    assert [p[1] for p in t["loss"][0]["points"]] == pytest.approx(losses, rel=1e-5)
    assert [p[1] for p in t["grad_norm"][0]["points"]] == pytest.approx(norms, rel=1e-4)


def _graph_at(spans: list[list[int]], it: int) -> int:
    return next(g for g, first, last in spans if first <= it <= last)


def test_the_sample_with_two_ranks_and_three_graphs(make_app: Any) -> None:
    """dumps_sample/torch_dp2: graphs 0, 1 and 2 ran iterations 0, 1 and 2-3; the loss values read with
    numpy off the stored tensors of the graph that ran each iteration."""
    t = _triage(make_app(SAMPLE).test_client(), "torch_dp2")
    dump = open_dump(os.path.join(SAMPLE, "torch_dp2"))
    assert [c["rank"] for c in t["loss"]] == dump.rank_ids == [0, 1]
    for c in t["loss"]:
        rank = dump.rank(c["rank"])
        assert [p[0] for p in c["points"]] == rank.iterations() == [0, 1, 2, 3]
        for it, v in c["points"]:
            gid = _graph_at(c["graph_spans"], it)
            assert it in rank.iterations(gid)
            value = np.asarray(rank.tensor(gid, it, c["node"], "output", 0).value(), np.float64)
            assert v == pytest.approx(value.mean(), rel=1e-6)
    assert all(len(c["points"]) == 4 for c in t["grad_norm"])


def test_an_iteration_two_graphs_ran_takes_the_first_graph_holding_a_loss(tmp_path: Any) -> None:
    """As MindSpore runs several graphs a step: graphs 0 and 1 both dumped a loss at iteration 0, only
    graph 1 ran iteration 1."""
    root = str(tmp_path / "two")
    with DumpWriter(root, rank=0) as w:
        for gid in (0, 1):
            w.write_graph(GraphRecord(gid, f"g{gid}", [NodeRecord(f"loss{gid}", "Loss", "", kind=Kind.LOSS)], [], ""))
        with w.iteration(0) as it:
            it.add(0, "loss0", "Loss", "output", 0, values=np.full(4, 2.0, np.float32))
            it.add(1, "loss1", "Loss", "output", 0, values=np.full(4, 7.0, np.float32))
        with w.iteration(1) as it:
            it.add(1, "loss1", "Loss", "output", 0, values=np.full(4, 3.0, np.float32))
    (c,) = triage.loss_curves(open_dump(root), StatsCache(enabled=False))
    assert c["points"] == [[0, 2.0], [1, 3.0]]
    assert c["graph_spans"] == [[0, 0, 0], [1, 1, 1]]
