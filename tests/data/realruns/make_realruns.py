#!/usr/bin/env python
r"""Make the small real MindSpore 2.10 dumps the watchpoint tests read (tests/data/realruns/).

Two families, each a tiny net trained in GRAPH mode on CPU with e2e dumping, 2 iterations:

- optimizers/<name>: a healthy MLP (8 -> 16 Tanh -> 4) trained with one of MindSpore's optimizers.
  The recommended preset must find nothing in any of them.
- batch<N>/ (N = 4, 8, 16, 32, 64): one net with five parallel branches on the same input, each
  Dense(8, 16) + activation, concatenated into the classifier:
    tanh_sat  Tanh after a weight of std 40: >= 90 % of its outputs within 1e-3 of +-1
    sig_sat   Sigmoid after a weight of std 60: >= 90 % of its outputs within 1e-3 of 0 or 1
    tanh_ok   Tanh after a weight of std 0.1: < 10 % saturated
    relu_dead ReLU after a bias of -50: every output 0
    relu_ok   ReLU after a weight of std 0.5 and bias 0.1: about half of its outputs positive
  The planted layers must fire at every batch size, the healthy ones never.

Usage (MindSpore 2.10.0 installed; from the repository root):
  python tests/data/realruns/make_realruns.py --out tests/data/realruns
Each dump is made in a child process (MINDSPORE_DUMP_CONFIG must be set before mindspore is
imported); the dump config asks for iterations 0-1 and inputs and outputs of every kernel.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

OPTIMIZERS = ["SGD", "Momentum", "Adam", "AdamWeightDecay", "Adagrad", "RMSProp", "FTRL", "Lamb"]
BATCHES = [4, 8, 16, 32, 64]
IN, HID, OUT = 8, 16, 4


def child(kind: str, name: str, batch: int, out: str) -> None:
    """Train one net and dump it (runs in its own process)."""
    import mindspore as ms
    from mindspore import Tensor, nn, ops

    ms.set_seed(5)
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    rng = np.random.RandomState(7)

    def dense(i, o, sigma, bias=0.0):
        return nn.Dense(i, o, weight_init=Tensor(rng.normal(0, sigma, (o, i)).astype(np.float32)),
                        bias_init=Tensor(np.full((o,), bias, np.float32)))

    if kind == "optimizer":
        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.fc1 = dense(IN, HID, 0.3)
                self.act = nn.Tanh()
                self.fc2 = dense(HID, OUT, 0.3)

            def construct(self, x):
                x = self.act(self.fc1(x))
                return self.fc2(x)
    else:
        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.tanh_sat = dense(IN, HID, 40.0)
                self.tanh_sat_act = nn.Tanh()
                self.sig_sat = dense(IN, HID, 60.0)
                self.sig_sat_act = nn.Sigmoid()
                self.tanh_ok = dense(IN, HID, 0.1)
                self.tanh_ok_act = nn.Tanh()
                self.relu_dead = dense(IN, HID, 0.5, -50.0)
                self.relu_dead_act = nn.ReLU()
                self.relu_ok = dense(IN, HID, 0.5, 0.1)
                self.relu_ok_act = nn.ReLU()
                self.concat = ops.Concat(axis=1)
                self.head = dense(5 * HID, OUT, 0.1)

            def construct(self, x):
                a = self.tanh_sat_act(self.tanh_sat(x))
                b = self.sig_sat_act(self.sig_sat(x))
                c = self.tanh_ok_act(self.tanh_ok(x))
                d = self.relu_dead_act(self.relu_dead(x))
                e = self.relu_ok_act(self.relu_ok(x))
                return self.head(self.concat((a, b, c, d, e)))

    net = Net()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    params = net.trainable_params()
    opt = {"SGD": lambda: nn.SGD(params, learning_rate=0.05),
           "Momentum": lambda: nn.Momentum(params, learning_rate=0.05, momentum=0.9),
           "Adam": lambda: nn.Adam(params, learning_rate=0.01),
           "AdamWeightDecay": lambda: nn.AdamWeightDecay(params, learning_rate=0.01, weight_decay=0.01),
           "Adagrad": lambda: nn.Adagrad(params, learning_rate=0.05),
           "RMSProp": lambda: nn.RMSProp(params, learning_rate=0.01),
           "FTRL": lambda: nn.FTRL(params, learning_rate=0.05),
           "Lamb": lambda: nn.Lamb(params, learning_rate=0.01)}[name]()
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    train.set_train()
    data = np.random.RandomState(11)
    for step in range(2):
        x = data.normal(0, 1, (batch, IN)).astype(np.float32)
        y = data.randint(0, OUT, (batch,)).astype(np.int32)
        loss = train(Tensor(x), Tensor(y))
        print(f"{out} step {step} loss {float(loss.asnumpy()):.5f}", flush=True)


def make(kind: str, name: str, batch: int, out: str) -> bool:
    """One dump at ``out`` (replaced); False when MindSpore refuses the configuration."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cfg = {"common_dump_settings": {"op_debug_mode": 0, "dump_mode": 0, "path": os.path.abspath(out),
                                    "net_name": "Net", "iteration": "0-1", "saved_data": "tensor",
                                    "input_output": 0, "kernels": [], "support_device": [0]},
           "e2e_dump_settings": {"enable": True, "trans_flag": True}}
    cfg_dir = tempfile.mkdtemp(prefix="tdbg_realruns_")
    try:
        path = os.path.join(cfg_dir, "dump.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        env = dict(os.environ, MINDSPORE_DUMP_CONFIG=path, GLOG_v="3")
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), "--child", kind, name, str(batch), out],
                             env=env)
    finally:
        shutil.rmtree(cfg_dir, ignore_errors=True)
    if rc != 0:
        shutil.rmtree(out, ignore_errors=True)
        print(f"{out}: MindSpore failed ({rc}); not kept", flush=True)
    return rc == 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--child", nargs=4, metavar=("KIND", "NAME", "BATCH", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        kind, name, batch, out = a.child
        child(kind, name, int(batch), out)
        return
    for name in OPTIMIZERS:
        make("optimizer", name, 8, os.path.join(a.out, "optimizers", name))
    for batch in BATCHES:
        make("activations", "Momentum", batch, os.path.join(a.out, f"batch{batch}"))


if __name__ == "__main__":
    main()
