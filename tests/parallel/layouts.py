"""One small training run under each PyTorch parallel layout, with or without the recorder (script).

    python layouts.py LAYOUT OUT_JSON [--dump DIR] [--save statistics|tensors|both] [--level ops|modules|parameters]
                      [--steps N] [--port P] [--plant NAME@RANK:STEP] [--dtype float32|bfloat16] [--both]
                      [--net blocks|mlp] [--corrupt-gather RANK:STEP]

LAYOUT: single (one process, the whole batch), ddp, fsdp2, fsdp1, fsdp1-units (a unit per block), tp, pp (GPipe, 2 stages x 2
micro-batches) on 2 ranks; 2d (FSDP2 over "dp" x TP over "tp") on 4 ranks. Every layout trains the
same network from the same seed on the same global batch, so their losses and logical parameters
agree up to rounding. OUT_JSON.RANK gets the loss of every step, the logical (full) parameters
after the last one and their gradients in it, gathered by plain torch; with --both, the facts of a run
without the recorder and of one with it, made by the same processes one after the other. ``--plant fc@1:2`` adds 1.0 to rank 1's
local shard of parameter ``fc`` after step 2's optimizer step (a divergence tdbg must name). ``--net mlp``: a plain
``nn.Sequential`` MLP (6 -> 16 -> 3) instead, each Linear its own FSDP unit under fsdp2 (ddp, fsdp2 and single only).
``--corrupt-gather 1:1`` (fsdp2): rank 1's first all-gather of step 1 delivers its first element +1.0 (the first unit's
first parameter, whole on that rank only), written behind the recorder's back as silent corruption would be.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

WORLD = {"single": 1, "ddp": 2, "fsdp2": 2, "fsdp1": 2, "fsdp1-units": 2, "tp": 2, "pp": 2, "2d": 4}
BATCH, STAGES, MICRO = 8, 2, 2


class Block(nn.Module):
    """A residual MLP block: TP splits ``up`` by columns and ``down`` by rows."""

    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, h)
        self.down = nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.tanh(self.up(x)))


class Net(nn.Module):
    """6 -> 8, two blocks, 8 -> 3 (3 rows: FSDP's chunks of ``head`` are uneven on 2 ranks).
    A pipeline stage keeps its own layers and sets the others to None (their names stay)."""

    def __init__(self, width: int = 8, hidden: int = 12, blocks: int = 2) -> None:
        super().__init__()
        self.inp = nn.Linear(6, width)
        self.layers = nn.ModuleDict({str(k): Block(width, hidden) for k in range(blocks)})
        self.head = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.inp is not None:
            x = self.inp(x)
        for blk in self.layers.values():
            x = blk(x)
        return self.head(x) if self.head is not None else x


def mlp() -> nn.Module:
    """The plain MLP of ``--net mlp``: parameters ``0.weight`` .. ``2.bias`` (3 output rows: uneven FSDP chunks)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of ``step`` (equal in every layout)."""
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(BATCH, 6, generator=g), torch.randint(0, 3, (BATCH,), generator=g)


def _dp_slice(t: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    n = t.shape[0] // size
    return t[rank * n:(rank + 1) * n]


def _build(layout: str, rank: int, dtype: torch.dtype, net: nn.Module | None = None) -> tuple[nn.Module, nn.Module, object]:
    """(the module the loop calls, the network, the pipeline schedule or None); ``net``: another than the
    small default (benchmarks/bench_layouts.py)."""
    torch.manual_seed(0)
    net = (net if net is not None else Net()).to(dtype)
    if layout == "ddp":
        return nn.parallel.DistributedDataParallel(net), net, None
    if layout == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for blk in (net.layers.values() if isinstance(net, Net) else [m for m in net if isinstance(m, nn.Linear)]):
            fully_shard(blk)
        fully_shard(net)
        return net, net, None
    if layout in ("fsdp1", "fsdp1-units"):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        # fsdp1-units: a unit per block inside the root's, as accelerate's and Lightning's auto-wrap make
        policy = ModuleWrapPolicy({Block}) if layout == "fsdp1-units" else None
        model = FSDP(net, use_orig_params=True, device_id=torch.device("cpu"), auto_wrap_policy=policy)
        return model, net, None
    if layout == "tp":
        _tensor_parallel(net, dist.init_device_mesh("cpu", (2,), mesh_dim_names=("tp",)))
        return net, net, None
    if layout == "2d":
        from torch.distributed.fsdp import fully_shard
        mesh = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        _tensor_parallel(net, mesh["tp"])
        for blk in net.layers.values():
            fully_shard(blk, mesh=mesh["dp"])
        fully_shard(net, mesh=mesh["dp"])
        return net, net, None
    if layout == "pp":
        return net, net, _pipeline(net, rank)
    return net, net, None


def _tensor_parallel(net: Net, mesh: object) -> None:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    plan = {}
    for k in net.layers:
        plan[f"layers.{k}.up"] = ColwiseParallel()
        plan[f"layers.{k}.down"] = RowwiseParallel()
    parallelize_module(net, mesh, plan)


def _pipeline(net: Net, rank: int) -> object:
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    if rank == 0:
        net.head = None
        del net.layers["1"]
    else:
        net.inp = None
        del net.layers["0"]
    stage = PipelineStage(net, rank, STAGES, torch.device("cpu"))
    # the schedule averages the micro-batches' gradients (scale_grads): each loss is its micro-batch's mean
    return ScheduleGPipe(stage, n_microbatches=MICRO, loss_fn=F.cross_entropy)


def _step(layout: str, model: nn.Module, schedule: object, step: int, rank: int, dtype: torch.dtype) -> float:
    """One forward and backward pass; the loss (the whole batch's mean, as one process would see it)."""
    x, y = batch(step)
    x = x.to(dtype)
    if layout == "pp":
        losses: list[torch.Tensor] = []
        if rank == 0:
            schedule.step(x)
            return float("nan")
        schedule.step(target=y, losses=losses)
        return float(sum(float(v.detach()) for v in losses)) / MICRO
    if layout in ("ddp", "fsdp2", "fsdp1", "fsdp1-units", "2d"):
        dp_rank, dp_size = (rank // 2, 2) if layout == "2d" else (rank, 2)
        x, y = _dp_slice(x, dp_rank, dp_size), _dp_slice(y, dp_rank, dp_size)
    loss = F.cross_entropy(model(x).float(), y)
    loss.backward()
    out = loss.detach().clone()
    if layout in ("ddp", "fsdp2", "fsdp1", "fsdp1-units", "2d"):       # the global batch's loss, for the facts only
        dist.all_reduce(out)
        out /= dist.get_world_size()      # 2-D: each data-parallel rank's loss counted once per TP rank
    return float(out)


def _plant(net: nn.Module, spec: str | None, rank: int, step: int) -> None:
    if not spec:
        return
    name, where = spec.split("@")
    r, s = (int(v) for v in where.split(":"))
    if r == rank and s == step:
        with torch.no_grad():
            p = dict(net.named_parameters())[name]
            local = p._local_tensor if hasattr(p, "_local_tensor") else p
            local.add_(1.0)


STEP = [0]      # the step running, for --corrupt-gather


def _corrupt_gathers(spec: str | None, rank: int) -> None:
    """--corrupt-gather RANK:STEP: FSDP2's all-gather on RANK at STEP, its result's first element + 1.0."""
    if not spec:
        return
    r, s = (int(v) for v in spec.split(":"))
    if r != rank:
        return
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather
    gather, done = DefaultAllGather.__call__, []

    def corrupted(self: object, *args: object, **kwargs: object) -> object:
        work = gather(self, *args, **kwargs)
        output = args[0] if args else kwargs["output_tensor"]
        if STEP[0] == s and not done:
            if work is not None:
                work.wait()
            done.append(True)
            output.detach().numpy()[0] += 1.0      # through numpy: no operator the recorder sees
        return work
    DefaultAllGather.__call__ = corrupted


def _full(layout: str, model: nn.Module, net: nn.Module, grads: bool = False) -> dict[str, list]:
    """Every logical parameter (or its gradient), gathered by torch itself (plain lists of floats)."""
    if layout.startswith("fsdp1"):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        with FSDP.summon_full_params(model, with_grads=grads):      # (names as the user's model has them)
            return {n.replace("_fsdp_wrapped_module.", ""): (p.grad if grads else p).detach().double().tolist()
                    for n, p in net.named_parameters() if not grads or p.grad is not None}
    out = {}
    for n, p in net.named_parameters():
        t = p.grad if grads else p
        if t is None:
            continue
        full = t.full_tensor() if hasattr(t, "full_tensor") else t
        out[n] = full.detach().double().tolist()
    return out


def run(a: argparse.Namespace, rank: int, dump: str | None) -> dict:
    """Train ``a.steps`` steps in ``a.layout`` on this rank, recorded into ``dump`` (None: not); the
    facts plain torch gives (the gradients are those of the last step)."""
    dtype = getattr(torch, a.dtype)
    model, net, schedule = _build(a.layout, rank, dtype, mlp() if a.net == "mlp" else None)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    losses = []
    rec = None
    if dump:
        from debugger.torch import Recorder
        _limit_files(a.full_disk, rank)
        rec = Recorder(dump, model, opt, save=a.save, level=a.level, pipeline=schedule)
        rec.start()
    try:
        for step in range(a.steps):
            STEP[0] = step
            opt.zero_grad()
            losses.append(_step(a.layout, model, schedule, step, rank, dtype))
            if step == a.steps - 1:
                grads = _full(a.layout, model, net, grads=True)
            opt.step()
            _plant(net, a.plant, rank, step)
            if rec is not None:
                rec.step()
    finally:
        if rec is not None:
            rec.close()
        _limit_files(None, rank)
    return {"rank": rank, "losses": losses, "params": _full(a.layout, model, net), "grads": grads}


def _limit_files(spec: str | None, rank: int) -> None:
    """``R:BYTES``: on rank R, files may not grow past BYTES while it records (a full disk, for real: the
    kernel fails the write with EFBIG); None: lift it again (the facts are written after)."""
    import resource
    import signal
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if spec is None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        return
    r, limit = (int(v) for v in spec.split(":"))
    if r == rank:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # a write past the limit fails, no signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))


def _write(a: argparse.Namespace, rank: int) -> None:
    """OUT_JSON.RANK: the facts of the run (with --both, {"plain": ..., "recorded": ...})."""
    facts = {"plain": run(a, rank, None), "recorded": run(a, rank, a.dump)} if a.both else run(a, rank, a.dump)
    with open(f"{a.out}.{rank}", "w") as f:
        json.dump(facts, f)


def _worker(rank: int, a: argparse.Namespace) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD[a.layout])
    _corrupt_gathers(a.corrupt_gather, rank)
    try:
        _write(a, rank)
    finally:
        dist.destroy_process_group()
    # Leave without the interpreter's teardown: gloo's threads abort it now and then ("terminate called
    # without an active exception", about 1 run in 10 of FSDP2 with or without the recorder), after the
    # facts are written and the ranks are done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    """Command line (see the module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("layout", choices=sorted(WORLD))
    ap.add_argument("out")
    ap.add_argument("--dump")
    ap.add_argument("--save", default="statistics")
    ap.add_argument("--level", default="ops")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--port", type=int, default=29650)
    ap.add_argument("--plant")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--both", action="store_true", help="train without the recorder, then with it")
    ap.add_argument("--net", default="blocks", choices=("blocks", "mlp"))
    ap.add_argument("--corrupt-gather")
    ap.add_argument("--full-disk", metavar="R:BYTES", help="rank R's files may not grow past BYTES while recording")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if WORLD[a.layout] == 1:
        _write(a, 0)
    else:
        torch.multiprocessing.spawn(_worker, args=(a,), nprocs=WORLD[a.layout])


if __name__ == "__main__":
    main()
