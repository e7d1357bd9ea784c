"""Make the PyTorch samples of dumps_sample/ with debugger.torch.Recorder (CPU, deterministic).

    python dumps_sample/make_torch_sample.py --out dumps_sample/torch_single
    python dumps_sample/make_torch_sample.py --out dumps_sample/torch_dp2 --ranks 2 --steps 4

The network and planted problems copy the MindSpore sample (make_sample.py): fc1 initialised with
N(0, 50^2) saturates the sigmoid after it, and fc2 sits in its own parameter group with lr 0 (frozen).
``--healthy`` trains the same network without the planted problems. ``--ranks 2`` runs
DistributedDataParallel over gloo in two processes (torch.multiprocessing, or under
``torchrun --nproc-per-node 2`` when RANK is set); each rank writes its own rank_R folder.
``TDBG_SAMPLE_SAVE=statistics`` records statistics instead of values (the samples hold values).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from debugger.torch import Recorder  # noqa: E402


class Net(nn.Module):
    """conv1 -> relu -> flatten -> fc1 -> sigmoid -> fc2 -> fc3."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 2, 3, padding=1, bias=False)
        self.fc1 = nn.Linear(128, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = torch.flatten(x, 1)
        x = torch.sigmoid(self.fc1(x))
        x = self.fc2(x)
        return self.fc3(x)


def build(healthy: bool) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The network with its initial weights (numpy seeded, equal on every rank) and the optimizer."""
    torch.manual_seed(0)
    net = Net()
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for name, p in net.named_parameters():
            std = 50.0 if (name == "fc1.weight" and not healthy) else 1.0 / np.sqrt(max(p[0].numel(), 1))
            p.copy_(torch.from_numpy(rng.normal(0.0, std, tuple(p.shape)).astype(np.float32)))
    frozen = [net.fc2.weight, net.fc2.bias]
    rest = [p for n, p in net.named_parameters() if not n.startswith("fc2.")]
    groups = [{"params": rest}, {"params": frozen, "lr": 0.0 if not healthy else 0.02}]
    return net, torch.optim.SGD(groups, lr=0.02, momentum=0.9)


def batch(step: int, rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s slice of global batch ``step`` (4 images per rank)."""
    rng = np.random.default_rng(1000 + step)
    x = rng.normal(0.0, 1.0, (4 * world, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, 4 * world)
    s = slice(4 * rank, 4 * rank + 4)
    return torch.from_numpy(x[s].copy()), torch.from_numpy(y[s].copy())


def train(out: str, steps: int, healthy: bool, rank: int = 0, world: int = 1) -> None:
    """Train ``steps`` steps under the recorder."""
    net, opt = build(healthy)
    model: nn.Module = net
    if world > 1:
        model = nn.parallel.DistributedDataParallel(net)
    with Recorder(out, model, opt, save=os.environ.get("TDBG_SAMPLE_SAVE", "tensors")) as rec:
        for step in range(steps):
            x, y = batch(step, rank, world)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()


def _worker(rank: int, out: str, steps: int, healthy: bool, world: int, port: int) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        train(out, steps, healthy, rank, world)
    finally:
        torch.distributed.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--healthy", action="store_true", help="no planted problems")
    ap.add_argument("--port", type=int, default=29533)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:     # under torchrun
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if rank == 0 and os.path.exists(a.out):
            shutil.rmtree(a.out)
        torch.distributed.init_process_group("gloo")
        torch.distributed.barrier()
        try:
            train(a.out, a.steps, a.healthy, rank, world)
        finally:
            torch.distributed.destroy_process_group()
        return 0
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    if a.ranks == 1:
        train(a.out, a.steps, a.healthy)
    else:
        torch.multiprocessing.spawn(_worker, args=(a.out, a.steps, a.healthy, a.ranks, a.port), nprocs=a.ranks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
