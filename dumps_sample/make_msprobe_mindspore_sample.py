"""Write small msprobe dumps of a MindSpore PyNative run under dumps_sample/msprobe/ (see README.md).

    /work/msenv/bin/python dumps_sample/make_msprobe_mindspore_sample.py

Needs MindSpore 2.10 (CPU) and mindstudio-probe 26.2.0 in that Python (installed there with
``pip install --no-deps mindstudio-probe==26.2.0`` plus pandas, pyyaml, tqdm, matplotlib, pytz). Each
dump is made in a fresh process (msprobe's debugger is a per-process singleton). tdbg and its
tests read the results without MindSpore or msprobe.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "msprobe")
DUMPS = {"mindspore_pynative_tensor": "tensor", "mindspore_pynative_statistics": "statistics"}


def _train(name: str) -> None:
    import numpy as np
    import mindspore as ms
    from mindspore import mint, nn

    # MindSpore 2.10 on CPU has no LinalgVectorNorm kernel, which msprobe calls for "Norm": the same value from numpy
    mint.norm = lambda t, *a, **k: ms.Tensor(np.array(np.linalg.norm(t.asnumpy().astype(np.float64).ravel()),
                                                      dtype=np.float32))
    from msprobe.mindspore import PrecisionDebugger

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    ms.set_seed(0)

    class Net(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Dense(16, 32)
            self.act = nn.ReLU()
            self.head = nn.Dense(32, 4)

        def construct(self, x):  # type: ignore[no-untyped-def]
            return self.head(self.act(self.fc1(x)))

    net = Net()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), learning_rate=0.1)

    def forward(x, y):  # type: ignore[no-untyped-def]
        return loss_fn(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, opt.parameters)
    task = DUMPS[name]
    cfg = os.path.join(tempfile.mkdtemp(), "config.json")
    with open(cfg, "w") as f:   # the task is read from a config file (the task= argument kept "statistics")
        json.dump({"task": task, "dump_path": os.path.join(OUT, name), "rank": [], "step": [], "level": "mix",
                   task: {"scope": [], "list": [], "data_mode": ["all"]}}, f)
    dbg = PrecisionDebugger(config_path=cfg)
    rng = np.random.default_rng(0)
    for _ in range(2):
        x = ms.Tensor(rng.standard_normal((8, 16)).astype(np.float32))
        y = ms.Tensor(rng.integers(0, 4, 8).astype(np.int32))
        dbg.start(net)
        loss, grads = grad_fn(x, y)
        opt(grads)
        dbg.stop()
        dbg.step()


def main() -> None:
    """Make every dump (or run one, ``--one NAME``, in this process)."""
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        _train(sys.argv[2])
        return
    for name in sys.argv[1:] or list(DUMPS):
        root = os.path.join(OUT, name)
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for step in sorted(os.listdir(root)):   # proc{PID} -> proc0: the tree does not change with every run
            sdir = os.path.join(root, step)
            for d in os.listdir(sdir):
                if d.startswith("proc") and d != "proc0":
                    os.rename(os.path.join(sdir, d), os.path.join(sdir, "proc0"))
        print("wrote", os.path.relpath(root, HERE))


if __name__ == "__main__":
    main()
