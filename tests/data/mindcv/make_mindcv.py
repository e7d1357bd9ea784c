#!/usr/bin/env python
r"""Make the small real MindSpore 2.10 dumps of mindcv model-zoo nets that tests/test_mindcv.py reads.

Each net is built by mindcv's own classes (random init, no download), trained in GRAPH mode on CPU
the way mindcv's configs train it (mindcv's cross-entropy loss, its Momentum optimizer with
momentum 0.9 and weight decay 1e-4), on data made here, with an e2e dump of every kernel's inputs
and outputs for iterations 0-1.

Variants (folder under --out), 4 images 3x16x16 of 4 classes, one batch trained on for 2 steps:
  resnet_healthy  mindcv's ResNet class with ResNet-18's BasicBlock stages [2, 2, 2, 2], stem and
                  BatchNorm, stage widths divided by 32; iterations 0-1; loss falls
  resnet_dead     the same with layer1.0.bn1.beta set to -50: the ReLU after it outputs only zeros;
                  iteration 0
  resnet_frozen   the same with layer2.0.conv1.weight in a parameter group of learning rate 0;
                  iteration 0
  resnet_nan      the same with a NaN planted in the input of iteration 1; iterations 0-1
  resnet18        (only with --full) mindcv's resnet18 itself, full width: ~300 MB, not committed
Beside each dump, truth.json records what the script knows apart from the dump: the trainable
parameters (MindSpore's names), the planted fault and the losses.

Why narrow: ResNet-18 holds 11.2 M parameters, 45 MB per copy of its weights, and an e2e dump
writes about ten copies per iteration (parameters, optimizer inputs and outputs, weight decay terms,
gradients): 600 MB an iteration. The narrow net keeps every pattern that matters here (conv without
bias, BatchNorm in training mode with BatchNormGrad's tuple of gradients, ReLU, the downsample
branches, global pooling, Dense, Momentum with weight decay added by AddN, mindcv's loss with label
smoothing 0.1 as its ResNet configs) at 3 MB an iteration; git stores the four dumps in about 3 MB
(identical files, such as a parameter and its optimizer kernel's input, are stored once).
Images of 16x16 at batch 4: the two last stages run on 1x1 maps, BatchNorm over 4 values; at batch 2
the full-width net's gradients grow a hundredfold per stage (batch statistics of 2 values).

Usage (MindSpore 2.10.0 and mindcv installed; from the repository root):
  python tests/data/mindcv/make_mindcv.py --out tests/data/mindcv [--full]
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

VARIANTS = ["resnet_healthy", "resnet_dead", "resnet_frozen", "resnet_nan"]
# iterations dumped (the net trains STEPS steps in every variant): a fault of the first step needs one
DUMPED = {"resnet_dead": "0", "resnet_frozen": "0"}
BATCH, CLASSES, SIZE, STEPS = 4, 4, 16, 2
WIDTH_DIVISOR = 32


def build(variant: str):
    """The net: mindcv's resnet18, or its ResNet class at 1/WIDTH_DIVISOR width."""
    from mindspore import nn
    from mindcv.models import create_model
    from mindcv.models.resnet import BasicBlock, ResNet

    if variant == "resnet18":
        return create_model("resnet18", num_classes=CLASSES, pretrained=False)

    class NarrowResNet(ResNet):
        """mindcv's ResNet-18 with every stage's width divided (its stem and blocks unchanged)."""

        def _make_layer(self, block, channels, block_nums, stride=1):
            return super()._make_layer(block, channels // WIDTH_DIVISOR, block_nums, stride)

    net = NarrowResNet(BasicBlock, [2, 2, 2, 2], num_classes=CLASSES)
    # mindcv sizes the classifier for full width; rebuild it for the last stage's width, initialised as mindcv does
    net.classifier = nn.Dense(512 // WIDTH_DIVISOR, CLASSES)
    net._initialize_weights()
    return net


def child(variant: str, out: str) -> None:
    """Train one net and dump it (runs in its own process)."""
    import mindspore as ms
    from mindspore import Tensor, nn
    from mindcv.loss import create_loss
    from mindcv.optim import create_optimizer

    ms.set_seed(5)
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    net = build(variant)
    planted = None
    if variant == "resnet_dead":
        beta = net.layer1[0].bn1.beta
        beta.set_data(Tensor(np.full(beta.shape, -50.0, np.float32)))
        planted = {"fault": "dead_relu", "parameter": beta.name}
    params = net.trainable_params()
    zero_init = [p.name for p in params if not np.any(p.asnumpy())]
    groups = params
    if variant == "resnet_frozen":
        frozen = net.layer2[0].conv1.weight
        groups = [{"params": [p for p in params if p.name != frozen.name]},
                  {"params": [frozen], "lr": 0.0}]
        planted = {"fault": "frozen", "parameter": frozen.name}
    if groups is params:
        opt = create_optimizer(params, opt="momentum", lr=0.01, weight_decay=1e-4, momentum=0.9)
    else:   # mindcv's factory takes no groups: the Momentum it would build, with a group of its own
        opt = nn.Momentum(groups, learning_rate=0.01, momentum=0.9, weight_decay=1e-4)
    loss_fn = create_loss(name="CE", label_smoothing=0.1)   # as mindcv's ResNet configs
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    train.set_train()
    data = np.random.RandomState(11)
    losses = []
    # one batch, trained on repeatedly: a healthy run's loss falls step after step
    x0 = data.normal(0, 1, (BATCH, 3, SIZE, SIZE)).astype(np.float32)
    y = data.randint(0, CLASSES, (BATCH,)).astype(np.int32)
    for step in range(STEPS):
        x = x0.copy()
        if variant == "resnet_nan" and step == 1:
            x[0, 0, 5, 5] = np.nan
            planted = {"fault": "nan_input", "iteration": 1}
        loss = float(train(Tensor(x), Tensor(y)).asnumpy())
        losses.append(loss)
        print(f"{variant} step {step} loss {loss:.5f}", flush=True)
    dumped = DUMPED.get(variant, f"0-{STEPS - 1}").split("-")
    truth = {"variant": variant, "trainable": [p.name for p in params], "zero_initialised": zero_init,
             "planted": planted, "losses": losses,
             "iterations": list(range(int(dumped[0]), int(dumped[-1]) + 1)), "width_divisor": WIDTH_DIVISOR,
             "batch": BATCH, "image_size": SIZE}
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)


def make(variant: str, out: str) -> bool:
    """One dump at ``out`` (replaced); False when MindSpore fails."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cfg = {"common_dump_settings": {"op_debug_mode": 0, "dump_mode": 0, "path": os.path.abspath(out),
                                    "net_name": "ResNet", "iteration": DUMPED.get(variant, f"0-{STEPS - 1}"), "saved_data": "tensor",
                                    "input_output": 0, "kernels": [], "support_device": [0]},
           "e2e_dump_settings": {"enable": True, "trans_flag": True}}
    cfg_dir = tempfile.mkdtemp(prefix="tdbg_mindcv_")
    try:
        path = os.path.join(cfg_dir, "dump.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        env = dict(os.environ, MINDSPORE_DUMP_CONFIG=path, GLOG_v="3")
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), "--child", variant, out], env=env)
    finally:
        shutil.rmtree(cfg_dir, ignore_errors=True)
    if rc != 0:
        shutil.rmtree(out, ignore_errors=True)
        print(f"{out}: MindSpore failed ({rc}); not kept", flush=True)
    return rc == 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--full", action="store_true", help="also mindcv's full-width resnet18 (large; not committed)")
    p.add_argument("--only", nargs="*", help="make only these variants")
    p.add_argument("--child", nargs=2, metavar=("VARIANT", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(*a.child)
        return
    variants = a.only or VARIANTS + (["resnet18"] if a.full else [])
    for v in variants:
        make(v, os.path.join(a.out, v))


if __name__ == "__main__":
    main()
