"""Recording cost under parallel layouts: time per training step without and with the Recorder, on 2
spawned gloo ranks (CPU).

    python benchmarks/bench_layouts.py [--layouts ddp,fsdp2,tp] [--levels ops,modules,parameters]
                                       [--steps 10] [--width 512] [--hidden 2048] [--blocks 4] [--batch 256]

Each rank trains tests/parallel/layouts.py's network (``--blocks`` residual MLP blocks ``width ->
hidden -> width``, Adam) at the given size, first without the recorder, then (same processes, a fresh
network) with ``Recorder(save="statistics", level=LEVEL)`` for each level. A step is forward, backward,
optimizer step and ``rec.step()``, timed on rank 0 between barriers; the medians of ``--steps`` steps
after 3 warm-up steps are compared (the plain run is timed again between levels: the machine is noisy).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), "tests", "parallel"), os.path.dirname(HERE)]

import layouts  # noqa: E402
from debugger.torch import Recorder  # noqa: E402

WARMUP = 3


def _data(a: argparse.Namespace, layout: str, rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(a.batch, 6, generator=g), torch.randint(0, 3, (a.batch,), generator=g)
    if layout in ("ddp", "fsdp2"):
        n = a.batch // 2
        x, y = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
    return x, y


def _times(a: argparse.Namespace, layout: str, rank: int, level: str | None) -> list[float]:
    """Seconds per step of ``--steps`` steps after the warm-up (rank 0's clock)."""
    net = layouts.Net(a.width, a.hidden, a.blocks)
    model, net, _ = layouts._build(layout, rank, torch.float32, net)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(tmp, model, opt, save="statistics", level=level) if level else None
        if rec is not None:
            rec.start()
        try:
            for step in range(WARMUP + a.steps):
                x, y = _data(a, layout, rank, step)
                dist.barrier()
                t0 = time.perf_counter()
                F.cross_entropy(model(x), y).backward()
                opt.step()
                opt.zero_grad()
                if rec is not None:
                    rec.step()
                dist.barrier()
                if step >= WARMUP:
                    out.append(time.perf_counter() - t0)
        finally:
            if rec is not None:
                rec.close()
    return out


def _worker(rank: int, a: argparse.Namespace, port: int, layout: str, result: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    rows = []
    try:
        for level in a.levels.split(","):
            plain = statistics.median(_times(a, layout, rank, None))
            mode = statistics.median(_times(a, layout, rank, level))
            rows.append({"layout": layout, "level": level, "plain_ms": 1e3 * plain, "mode_ms": 1e3 * mode,
                         "ratio": mode / plain})
    finally:
        dist.destroy_process_group()
    if rank == 0:
        with open(result, "w") as f:
            json.dump(rows, f)


def main() -> None:
    """Command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layouts", default="ddp,fsdp2,tp")
    ap.add_argument("--levels", default="ops,modules,parameters")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--port", type=int, default=29870)
    ap.add_argument("--json", help="write every number to this file")
    a = ap.parse_args()
    rows = []
    t0 = time.time()
    for k, layout in enumerate(a.layouts.split(",")):
        with tempfile.NamedTemporaryFile(suffix=".json") as res:
            torch.multiprocessing.spawn(_worker, args=(a, a.port + k, layout, res.name), nprocs=2)
            with open(res.name) as f:
                rows += json.load(f)
    print(f"wall time {time.time() - t0:.0f} s; network {a.blocks} blocks {a.width}->{a.hidden}, batch {a.batch}, "
          f"2 ranks, statistics\n")
    print("| layout | level | plain ms/step | recorded ms/step | ratio |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['layout']} | {r['level']} | {r['plain_ms']:.1f} | {r['mode_ms']:.1f} | {r['ratio']:.2f}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
