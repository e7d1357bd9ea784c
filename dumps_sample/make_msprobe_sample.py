"""Write the small msprobe (mindstudio-probe 26.2.0) PyTorch dumps under dumps_sample/ (see README.md).

Run with the Python that has torch and msprobe:  /work/msprobe_env/bin/python dumps_sample/make_msprobe_sample.py
Every dump is made in a fresh process (msprobe's PrecisionDebugger is a per-process singleton).
tdbg and its tests read the results without torch or msprobe.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "msprobe")

# name -> (task, level, steps, variant)
DUMPS = {
    "tensor_mix": ("tensor", "mix", 2, "plain"),
    "statistics_mix": ("statistics", "mix", 3, "plain"),
    "statistics_L0": ("statistics", "L0", 2, "plain"),
    "statistics_L1": ("statistics", "L1", 2, "plain"),
    "nan_statistics": ("statistics", "mix", 2, "nan"),
    "pair_baseline": ("tensor", "mix", 2, "plain"),
    "pair_perturbed": ("tensor", "mix", 2, "perturbed"),
    "ddp_2rank_tensor": ("tensor", "mix", 2, "ddp"),
    # statistics with summary_mode md5 (a CRC32 of each tensor's bytes): comparable without values
    "md5_baseline": ("statistics-md5", "mix", 2, "plain"),
    "md5_perturbed": ("statistics-md5", "mix", 2, "perturbed"),
}


def _model():  # type: ignore[no-untyped-def]
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(16, 32)
            self.act = nn.ReLU()
            self.block = nn.Sequential(nn.Linear(32, 32), nn.Tanh())
            self.head = nn.Linear(32, 4)
            self.nan_at_step = -1
            self.step = 0

        def forward(self, x):  # type: ignore[no-untyped-def]
            h = self.act(self.fc1(x))
            h = self.block(h)
            if self.step == self.nan_at_step:
                h = torch.log(h)           # planted: tanh outputs < 0 give NaN here (Torch.log.0.forward)
            return self.head(h)

    torch.manual_seed(0)
    return Net()


def _batches(steps: int, rank: int = 0):  # type: ignore[no-untyped-def]
    import torch

    g = torch.Generator().manual_seed(1234 + rank)
    return [(torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(steps)]


def _train(name: str, rank: int = 0, world: int = 1) -> None:
    import torch
    import torch.nn.functional as F
    from msprobe.pytorch import PrecisionDebugger

    task, level, steps, variant = DUMPS[name]
    model = _model()
    if variant == "perturbed":
        with torch.no_grad():   # planted: block.0.weight (the second Linear) off by noise of 0.2 x its std (cosine ~0.98)
            w = model.block[0].weight
            w.add_(0.2 * w.std() * torch.randn(w.shape, generator=torch.Generator().manual_seed(7)))
    if variant == "nan":
        model.nan_at_step = 1
    net = model
    if variant == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    if task == "statistics-md5":
        import json
        import tempfile

        cfg = os.path.join(tempfile.mkdtemp(), "config.json")
        with open(cfg, "w") as f:
            json.dump({"task": "statistics", "dump_path": os.path.join(OUT, name), "rank": [], "step": [],
                       "level": level, "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                      "summary_mode": "md5"}}, f)
        dbg = PrecisionDebugger(config_path=cfg)
    else:
        dbg = PrecisionDebugger(task=task, dump_path=os.path.join(OUT, name), level=level)
    for x, y in _batches(steps, rank):
        dbg.start(net)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        dbg.stop()
        dbg.step()
        model.step += 1


def _ddp_worker(rank: int, world: int) -> None:
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        _train("ddp_2rank_tensor", rank, world)
    finally:
        dist.destroy_process_group()


def main() -> None:
    """Make every dump (or the one named on the command line, in this process)."""
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        name = sys.argv[2]
        if DUMPS[name][3] == "ddp":
            import torch.multiprocessing as mp

            mp.spawn(_ddp_worker, args=(2,), nprocs=2, join=True)
        else:
            _train(name)
        return
    names = sys.argv[1:] or list(DUMPS)
    for name in names:
        shutil.rmtree(os.path.join(OUT, name), ignore_errors=True)
        env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        _normalise(os.path.join(OUT, name))
        print("wrote", os.path.relpath(os.path.join(OUT, name), HERE))


def _normalise(root: str) -> None:
    """proc{PID} folders get a fixed name (proc0) so the committed tree does not change with every run;
    absolute paths msprobe writes (dump_data_dir) stay as written."""
    for step in sorted(os.listdir(root)):
        sdir = os.path.join(root, step)
        for d in os.listdir(sdir):
            if d.startswith("proc") and d != "proc0":
                os.rename(os.path.join(sdir, d), os.path.join(sdir, "proc0"))


if __name__ == "__main__":
    main()
