#!/usr/bin/env python
r"""Regenerate the MindSpore 2.10 dump samples of tdbg (dumps_sample/single and dumps_sample/dp2).

A tiny CNN is trained in GRAPH mode on CPU for a few steps with e2e dumping enabled.
Two problems are planted on purpose:
  (a) saturating sigmoid: fc1's weight is initialised with a huge sigma, so the sigmoid that
      follows fc1 outputs (almost) only exact 0 / 1 values in every iteration;
  (b) frozen layer: fc2 sits in an optimizer parameter group with learning_rate=0.0, so its
      weight and bias never change although ApplyMomentum kernels still run for them.

Usage (from the repo root, MindSpore 2.10.0 installed):
  python dumps_sample/make_sample.py --out dumps_sample/single
  python dumps_sample/make_sample.py --out dumps_sample/dp2 --ranks 2 --steps 3
The second form launches `msrun` on this script itself (one worker per rank) and removes the
msrun logs afterwards. Running msrun yourself also works (then empty --out first):
  msrun --worker_num=2 --local_worker_num=2 --master_port=8129 --log_dir=/tmp/msrun_logs --join=True \
         dumps_sample/make_sample.py --out dumps_sample/dp2 --ranks 2 --steps 3
(msrun starts `python` from PATH: put the venv's bin/ first in PATH.)
The dp2 sample uses 3 steps only to keep dumps_sample small: with ~160-190 tiny files per
iteration and rank, the 4 KiB file-system blocks dominate the size.
The script writes its own dump config JSON to a temporary directory and
sets MINDSPORE_DUMP_CONFIG before importing mindspore.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

NUM_CLASSES = 10
IMG = 8          # images are 1 x IMG x IMG
CONV_CH = 2
HIDDEN = 16


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="dump root (rank_N/ folders are created inside)")
    p.add_argument("--ranks", type=int, default=1, help="1: single process; 2: data parallel via msrun")
    p.add_argument("--steps", type=int, default=8, help="training iterations (all dumped)")
    p.add_argument("--batch", type=int, default=4, help="per-rank batch size")
    p.add_argument("--lr", type=float, default=0.02, help="learning rate of the healthy layers")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--fc1-sigma", type=float, default=50.0,
                   help="std of fc1's initial weight (huge on purpose: saturates the sigmoid)")
    p.add_argument("--seed", type=int, default=3, help="seed of weights and data (same on all ranks)")
    p.add_argument("--master-port", type=int, default=8129, help="msrun master port (--ranks > 1)")
    p.add_argument("--net-name", default="Net")
    p.add_argument("--keep-logs", action="store_true", help="keep msrun logs (in a temp dir)")
    return p.parse_args()


def under_msrun():
    return "MS_WORKER_NUM" in os.environ or "MS_ROLE" in os.environ


def launch_msrun(args):
    """Clean the dump root, run this script on `args.ranks` workers with msrun, drop the logs."""
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    log_dir = tempfile.mkdtemp(prefix="tdbg_msrun_logs_")
    msrun = shutil.which("msrun") or os.path.join(os.path.dirname(sys.executable), "msrun")
    worker_args = list(sys.argv[1:])
    cmd = [msrun, f"--worker_num={args.ranks}", f"--local_worker_num={args.ranks}",
           f"--master_port={args.master_port}", f"--log_dir={log_dir}", "--join=True",
           os.path.abspath(__file__)] + worker_args
    print("running:", " ".join(cmd), flush=True)
    env = dict(os.environ)
    # msrun starts the workers with `python` from PATH: make it this interpreter (the venv).
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    rc = subprocess.call(cmd, env=env)
    if rc != 0 or args.keep_logs:
        print(f"msrun exit code {rc}; logs kept in {log_dir}", flush=True)
    else:
        shutil.rmtree(log_dir, ignore_errors=True)
    sys.exit(rc)


def write_dump_config(args):
    out = os.path.abspath(args.out)
    cfg = {
        "common_dump_settings": {
            "op_debug_mode": 0,
            "dump_mode": 0,
            "path": out,
            "net_name": args.net_name,
            "iteration": "all",
            "saved_data": "tensor",
            "input_output": 0,
            "kernels": [],
            "support_device": [0, 1, 2, 3, 4, 5, 6, 7],
        },
        "e2e_dump_settings": {"enable": True, "trans_flag": True},
    }
    cfg_dir = tempfile.mkdtemp(prefix="tdbg_dump_cfg_")
    path = os.path.join(cfg_dir, "dump_config.json")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    os.environ["MINDSPORE_DUMP_CONFIG"] = path
    return cfg_dir


POOL = 256      # fixed pool of synthetic samples (independent of --steps / --ranks)


def make_data(args):
    """Deterministic synthetic data: a fixed pool of POOL samples (images N(0,1), random labels)."""
    rng = np.random.RandomState(args.seed + 1000)
    x = rng.normal(0.0, 1.0, size=(POOL, 1, IMG, IMG)).astype(np.float32)
    y = rng.randint(0, NUM_CLASSES, size=(POOL,)).astype(np.int32)
    return x, y


def shard(step, rank, world, batch):
    """Global batch `step` is samples [step*batch*world, (step+1)*batch*world); rank r takes
    the r-th slice of it, so every rank trains on different samples and rank 0 of a
    data-parallel run sees exactly the batches of the single-rank run."""
    start = step * batch * world + rank * batch
    return slice(start, start + batch)


def make_init(args):
    """Initial weights from numpy with a fixed seed: identical on every rank."""
    rng = np.random.RandomState(args.seed)
    flat = CONV_CH * IMG * IMG
    def he(shape, fan_in):
        return rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape).astype(np.float32)
    return {
        "conv1.weight": he((CONV_CH, 1, 3, 3), 9),
        "fc1.weight": rng.normal(0.0, args.fc1_sigma, size=(HIDDEN, flat)).astype(np.float32),  # planted (a)
        "fc1.bias": np.full((HIDDEN,), 0.01, np.float32),
        "fc2.weight": rng.normal(0.0, np.sqrt(1.0 / HIDDEN), size=(HIDDEN, HIDDEN)).astype(np.float32),
        "fc2.bias": np.full((HIDDEN,), 0.01, np.float32),
        "fc3.weight": rng.normal(0.0, np.sqrt(1.0 / HIDDEN), size=(NUM_CLASSES, HIDDEN)).astype(np.float32),
        "fc3.bias": np.full((NUM_CLASSES,), 0.01, np.float32),
    }


def main():
    args = parse_args()
    if args.ranks > 1 and not under_msrun():
        launch_msrun(args)
        return
    if args.ranks == 1:
        out = os.path.abspath(args.out)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)

    # The msrun scheduler process runs this script too but computes nothing: no dump config.
    cfg_dir = None if os.environ.get("MS_ROLE") == "MS_SCHED" else write_dump_config(args)
    # (the config must exist before mindspore is imported)
    try:
        train_net(args)
    finally:
        if cfg_dir:
            shutil.rmtree(cfg_dir, ignore_errors=True)


def train_net(args):
    import mindspore as ms
    from mindspore import nn, Tensor
    from mindspore.context import ParallelMode

    ms.set_seed(args.seed)
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")

    rank, world = 0, 1
    if args.ranks > 1:
        from mindspore.communication import init, get_rank, get_group_size
        init()
        rank, world = get_rank(), get_group_size()
        ms.set_auto_parallel_context(parallel_mode=ParallelMode.DATA_PARALLEL, gradients_mean=True)

    w = make_init(args)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, CONV_CH, 3, pad_mode="same", has_bias=False,
                                   weight_init=Tensor(w["conv1.weight"]))
            self.relu = nn.ReLU()
            self.flatten = nn.Flatten()
            self.fc1 = nn.Dense(CONV_CH * IMG * IMG, HIDDEN,
                                weight_init=Tensor(w["fc1.weight"]), bias_init=Tensor(w["fc1.bias"]))
            self.sigmoid = nn.Sigmoid()
            self.fc2 = nn.Dense(HIDDEN, HIDDEN,
                                weight_init=Tensor(w["fc2.weight"]), bias_init=Tensor(w["fc2.bias"]))
            self.fc3 = nn.Dense(HIDDEN, NUM_CLASSES,
                                weight_init=Tensor(w["fc3.weight"]), bias_init=Tensor(w["fc3.bias"]))

        def construct(self, x):
            x = self.relu(self.conv1(x))
            x = self.flatten(x)
            x = self.sigmoid(self.fc1(x))
            x = self.fc2(x)
            x = self.fc3(x)
            return x

    net = Net()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    frozen = list(net.fc2.trainable_params())                       # planted (b)
    others = [p for p in net.trainable_params() if not p.name.startswith("fc2.")]
    groups = [{"params": others},
              {"params": frozen, "lr": 0.0, "weight_decay": 0.0},
              {"order_params": net.trainable_params()}]
    opt = nn.Momentum(groups, learning_rate=args.lr, momentum=args.momentum, weight_decay=0.0)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    train.set_train()

    x, y = make_data(args)
    assert args.steps * args.batch * world <= POOL, "not enough synthetic samples"
    for step in range(args.steps):
        sl = shard(step, rank, world, args.batch)
        loss = train(Tensor(x[sl]), Tensor(y[sl]))
        print(f"rank {rank} step {step} loss {float(loss.asnumpy()):.6f}", flush=True)


if __name__ == "__main__":
    main()
