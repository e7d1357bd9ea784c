#!/usr/bin/env python
r"""Make a real MindSpore dump of a ResNet for the first-scan benchmark (issue 24): mindcv's ResNet-18
(BasicBlock stages [2, 2, 2, 2], stem, BatchNorm) at 1/WIDTH_DIVISOR width, trained in GRAPH mode on CPU
for 30 iterations on random data (mindcv's cross-entropy loss, Momentum 0.9, weight decay 1e-4), with an
e2e dump of every kernel's inputs and outputs (npy) for every iteration.

The point is a dump of mixed file sizes as real training writes them: scalars (learning rate, loss,
global step), small bias/BatchNorm vectors, weights of a few KB to MB, and activations of a few MB, in
~2,000 files an iteration; the default (width/3, batch 24, 32x32 images) writes about 60,000 files.
Too big for CI: benchmarks/bench_scan.py --resnet makes it when asked.

Usage (MindSpore 2.10.0 and mindcv installed in the interpreter given by --python):
  /work/venv-ms/bin/python benchmarks/make_resnet_dump.py --out /work/bench_data/c/resnet
Each dump is made in a child process (MINDSPORE_DUMP_CONFIG must be set before mindspore is imported).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

CLASSES = 10


def build(width_divisor: int):
    """mindcv's ResNet-18 with every stage's width divided (stem and blocks unchanged)."""
    from mindspore import nn
    from mindcv.models.resnet import BasicBlock, ResNet

    class NarrowResNet(ResNet):
        def _make_layer(self, block, channels, block_nums, stride=1):
            return super()._make_layer(block, channels // width_divisor, block_nums, stride)

    net = NarrowResNet(BasicBlock, [2, 2, 2, 2], num_classes=CLASSES)
    net.classifier = nn.Dense(512 // width_divisor, CLASSES)
    net._initialize_weights()
    return net


def child(out: str, steps: int, batch: int, size: int, width_divisor: int) -> None:
    """Train and dump (runs in its own process, MINDSPORE_DUMP_CONFIG set)."""
    import mindspore as ms
    from mindspore import Tensor, nn
    from mindcv.loss import create_loss
    from mindcv.optim import create_optimizer

    ms.set_seed(5)
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    net = build(width_divisor)
    opt = create_optimizer(net.trainable_params(), opt="momentum", lr=0.01, weight_decay=1e-4, momentum=0.9)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, create_loss(name="CE", label_smoothing=0.1)), opt)
    train.set_train()
    data = np.random.RandomState(11)
    losses = []
    for step in range(steps):
        x = data.normal(0, 1, (batch, 3, size, size)).astype(np.float32)
        y = data.randint(0, CLASSES, (batch,)).astype(np.int32)
        losses.append(float(train(Tensor(x), Tensor(y)).asnumpy()))
        print(f"step {step} loss {losses[-1]:.5f}", flush=True)
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump({"steps": steps, "batch": batch, "image_size": size, "width_divisor": width_divisor,
                   "losses": losses}, f, indent=1)


def make(out: str, steps: int, batch: int, size: int, width_divisor: int, python: str) -> int:
    """The dump at ``out`` (replaced); MindSpore's exit status."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cfg = {"common_dump_settings": {"op_debug_mode": 0, "dump_mode": 0, "path": os.path.abspath(out),
                                    "net_name": "ResNet", "iteration": "all", "saved_data": "tensor",
                                    "input_output": 0, "kernels": [], "support_device": [0]},
           "e2e_dump_settings": {"enable": True, "trans_flag": True}}
    cfg_dir = tempfile.mkdtemp(prefix="tdbg_resnet_")
    try:
        path = os.path.join(cfg_dir, "dump.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        env = dict(os.environ, MINDSPORE_DUMP_CONFIG=path, GLOG_v="3")
        args = [python, os.path.abspath(__file__), "--child", out, "--steps", str(steps), "--batch", str(batch),
                "--size", str(size), "--width-divisor", str(width_divisor)]
        return subprocess.call(args, env=env)
    finally:
        shutil.rmtree(cfg_dir, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="/work/bench_data/c/resnet")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=24)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--width-divisor", type=int, default=3)
    p.add_argument("--python", default="/work/venv-ms/bin/python", help="interpreter with MindSpore and mindcv")
    p.add_argument("--child", metavar="OUT", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a.child, a.steps, a.batch, a.size, a.width_divisor)
        return
    rc = make(a.out, a.steps, a.batch, a.size, a.width_divisor, a.python)
    sys.exit(rc)


if __name__ == "__main__":
    main()
