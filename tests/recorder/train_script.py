"""A small training run under the recorder, for the tests (run as a script or imported).

    python train_script.py OUT [--save tensors|statistics] [--steps N] [--kill-at I]
                              [--nan-at I] [--ranks 2 --port P] [--expect FILE] [--optim NAME]

Writes the dump to OUT and, with --expect, what plain torch says (per iteration: gradient means
per parameter, parameters unchanged by the step, rank equality under DDP) as JSON.
--kill-at I SIGKILLs the process in the middle of iteration I's forward pass.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from debugger.torch import Recorder  # noqa: E402


class Net(nn.Module):
    """Two linear layers; fc2 is frozen through its parameter group."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 8)
        self.fc3 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc1(x))                     # LINE_FC1
        h = torch.sqrt(self.fc2(h).abs() + x.sum())    # LINE_SQRT: NaN once x sums below 0
        return self.fc3(h)


def data(step: int, rank: int, nan_at: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s batch of iteration ``step``; from ``nan_at`` on the inputs make sqrt NaN."""
    g = torch.Generator().manual_seed(100 * step + rank)
    x = torch.rand(4, 6, generator=g) + 0.1
    if 0 <= nan_at <= step:
        x = x - 100.0
    return x, torch.randint(0, 3, (4,), generator=g)


def run(out: str, save: str, steps: int, kill_at: int, nan_at: int, rank: int, world: int,
        expect: str | None, optim: str = "sgd") -> None:
    """Train under the recorder, collecting plain-torch expectations as it goes."""
    torch.manual_seed(0)
    net = Net()
    model: nn.Module = nn.parallel.DistributedDataParallel(net) if world > 1 else net
    groups = [{"params": [p for n, p in net.named_parameters() if not n.startswith("fc2.")]},
              {"params": list(net.fc2.parameters()), "lr": 0.0}]
    if optim == "adam-foreach":
        opt: torch.optim.Optimizer = torch.optim.Adam(groups, lr=0.01, foreach=True)
    else:
        opt = torch.optim.SGD(groups, lr=0.1, momentum=0.9, foreach=optim == "sgd-foreach")
    facts: list[dict] = []
    with Recorder(out, model, opt, save=save) as rec:
        for step in range(steps):
            x, y = data(step, rank, nan_at)
            if step == kill_at:
                time.sleep(1.0)          # the writer thread finishes the previous iteration
                model(x)
                os.kill(os.getpid(), signal.SIGKILL)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            before = {n: p.detach().clone() for n, p in net.named_parameters()}
            grads = {n: float(p.grad.double().mean()) for n, p in net.named_parameters()}
            opt.step()
            rec.step()
            fact = {"grad_mean": grads, "loss": float(loss.detach()),
                    "unchanged": sorted(n for n, p in net.named_parameters() if torch.equal(p, before[n]))}
            if world > 1:
                flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
                gflat = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
                got = [torch.empty_like(flat) for _ in range(world)]
                ggot = [torch.empty_like(gflat) for _ in range(world)]
                torch.distributed.all_gather(got, flat)
                torch.distributed.all_gather(ggot, gflat)
                fact["params_equal_across_ranks"] = all(torch.equal(got[0], g) for g in got)
                fact["grads_equal_across_ranks"] = all(torch.equal(ggot[0], g) for g in ggot)
            facts.append(fact)
    if expect:
        with open(f"{expect}.{rank}", "w") as f:
            json.dump(facts, f)


def _worker(rank: int, a: argparse.Namespace) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=a.ranks)
    try:
        run(a.out, a.save, a.steps, a.kill_at, a.nan_at, rank, a.ranks, a.expect, a.optim)
    finally:
        torch.distributed.destroy_process_group()


def main() -> None:
    """Command line (see the module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--save", default="tensors")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--kill-at", type=int, default=-1)
    ap.add_argument("--nan-at", type=int, default=-1)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--port", type=int, default=29611)
    ap.add_argument("--expect")
    ap.add_argument("--optim", default="sgd", choices=("sgd", "sgd-foreach", "adam-foreach"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.ranks > 1:
        torch.multiprocessing.spawn(_worker, args=(a,), nprocs=a.ranks)
    else:
        run(a.out, a.save, a.steps, a.kill_at, a.nan_at, 0, 1, a.expect, a.optim)


if __name__ == "__main__":
    main()
