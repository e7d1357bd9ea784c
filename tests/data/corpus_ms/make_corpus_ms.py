#!/usr/bin/env python
r"""Make the corpus of framework-written MindSpore 2.10 dumps (issue 37, items 3 and 9) under
tests/data/corpus_ms/<name>/, each with <name>/<name>.truth.json beside its rank_0 holding what is known
apart from tdbg: the training script's own log (losses, trainable parameters, the fault it planted) and
facts computed here with numpy on the .npy files and the execution-order csv files.

Nets (CPU, GRAPH mode unless stated, batch 4, 4 iterations, nn.Momentum unless stated):
  mlp       Sqrt on the input, Dense(8, 16), Tanh, Dense(16, 4). Its fault: the batches of iterations
            2 and 3 hold a negative value, so Sqrt makes NaN from iteration 2 (0 and 1 are clean).
  cf        Conv2d(1, 4, 3), ReLU, then `if` on a tensor and a `while` on a tensor in construct (several
            graphs), Dense(64, 4).
  resblock  a mini ResNet block: conv, BatchNorm, ReLU, conv, BatchNorm, the skip added, pooling, Dense.

Dumps:
  kernels_nan       mlp with its fault; dump_mode 1, a kernel list of the forward and backward kernels of
                    full_nan's execution order (no optimizer kernel; parameters are no kernels)
  inputs_only_nan   mlp with its fault; input_output 1 (inputs only)
  outputs_only_nan  mlp with its fault; input_output 2 (outputs only)
  full_healthy      mlp, healthy; every kernel's inputs and outputs
  full_nan          mlp with its fault; every kernel's inputs and outputs
  pynative_nan      mlp with its fault in PyNative mode
  control_flow      cf, healthy
  momentum_nowd     resblock with nn.Momentum, no weight decay
  momentum_wd       resblock with nn.Momentum, weight decay 1e-4
  functional_loop   mlp healthy, trained by value_and_grad + @jit (no TrainOneStepCell)
  train_one_step    mlp healthy, the same data and init with TrainOneStepCell (losses compared bit for bit)
  iterations_gap    mlp healthy, iteration "0|2-3"
  no_graphs_nan     a copy of full_nan without its graphs/ folder

Usage (MindSpore 2.10.0 installed, numpy < 2; from the repository root):
  python tests/data/corpus_ms/make_corpus_ms.py [--only NAME ...]
Each dump is made in a child process (MINDSPORE_DUMP_CONFIG must be set before mindspore is imported).
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, IN, HID, OUT, STEPS = 4, 8, 16, 4, 4
FAULT_FROM = 2          # the first iteration whose batch holds a negative value (mlp's fault)

# name -> (net, fault planted, mode, trainer, dump settings that differ from the defaults)
DUMPS: dict[str, dict] = {
    "full_nan": {"net": "mlp", "fault": True},
    "kernels_nan": {"net": "mlp", "fault": True, "dump": {"dump_mode": 1}},
    "inputs_only_nan": {"net": "mlp", "fault": True, "dump": {"input_output": 1}},
    "outputs_only_nan": {"net": "mlp", "fault": True, "dump": {"input_output": 2}},
    "full_healthy": {"net": "mlp"},
    "pynative_nan": {"net": "mlp", "fault": True, "mode": "pynative"},
    "control_flow": {"net": "cf"},
    "momentum_nowd": {"net": "resblock"},
    "momentum_wd": {"net": "resblock", "weight_decay": 1e-4},
    "functional_loop": {"net": "mlp", "trainer": "functional"},
    "train_one_step": {"net": "mlp"},
    "iterations_gap": {"net": "mlp", "dump": {"iteration": "0|2-3"}},
}
COPIES = {"no_graphs_nan": "full_nan"}   # made by copying another dump, less its graphs/


def build(net: str):  # type: ignore[no-untyped-def]
    """The net, initialised from fixed seeds."""
    from mindspore import Tensor, nn, ops

    rng = np.random.RandomState(7)

    def init(*shape: int, sigma: float = 0.3) -> Tensor:
        return Tensor(rng.normal(0, sigma, shape).astype(np.float32))

    if net == "mlp":
        class Mlp(nn.Cell):
            def __init__(self) -> None:
                super().__init__()
                self.sqrt = ops.Sqrt()
                self.fc1 = nn.Dense(IN, HID, weight_init=init(HID, IN), bias_init=init(HID, sigma=0.1))
                self.act = nn.Tanh()
                self.fc2 = nn.Dense(HID, OUT, weight_init=init(OUT, HID), bias_init=init(OUT, sigma=0.1))

            def construct(self, x):  # type: ignore[no-untyped-def]
                return self.fc2(self.act(self.fc1(self.sqrt(x))))
        return Mlp()
    if net == "cf":
        class ControlFlow(nn.Cell):
            def __init__(self) -> None:
                super().__init__()
                self.conv1 = nn.Conv2d(1, 4, 3, pad_mode="same", weight_init=init(4, 1, 3, 3))
                self.relu = nn.ReLU()
                self.tanh = nn.Tanh()
                self.scale = nn.Dense(64, 64, weight_init=init(64, 64, sigma=0.05), bias_init="zeros")
                self.flatten = nn.Flatten()
                self.fc = nn.Dense(64, OUT, weight_init=init(OUT, 64, sigma=0.1), bias_init="zeros")

            def construct(self, x):  # type: ignore[no-untyped-def]
                h = self.conv1(x)
                if h.sum() > 0:          # a tensor condition: a branch graph each way
                    h = self.relu(h)
                else:
                    h = self.tanh(h)
                h = self.flatten(h)
                while h.abs().max() > 0.5:   # a tensor condition: a loop graph (once: |0.4 tanh| < 0.5)
                    h = self.tanh(self.scale(h)) * 0.4
                return self.fc(h)
        return ControlFlow()

    class ResBlock(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, pad_mode="same", weight_init=init(4, 3, 3, 3))
            self.bn1 = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(4, 4, 3, pad_mode="same", weight_init=init(4, 4, 3, 3))
            self.bn2 = nn.BatchNorm2d(4)
            self.down = nn.Conv2d(3, 4, 1, weight_init=init(4, 3, 1, 1))
            self.pool = ops.ReduceMean(keep_dims=False)
            self.fc = nn.Dense(4, OUT, weight_init=init(OUT, 4), bias_init="zeros")

        def construct(self, x):  # type: ignore[no-untyped-def]
            h = self.relu(self.bn1(self.conv1(x)))
            h = self.bn2(self.conv2(h))
            h = self.relu(h + self.down(x))
            return self.fc(self.pool(h, (2, 3)))
    return ResBlock()


def batches(net: str, fault: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """The STEPS batches (x, label); the fault makes one value of iterations >= FAULT_FROM negative."""
    data = np.random.RandomState(11)
    shape = {"mlp": (BATCH, IN), "cf": (BATCH, 1, 4, 4), "resblock": (BATCH, 3, 6, 6)}[net]
    out = []
    for step in range(STEPS):
        x = data.normal(0, 1, shape).astype(np.float32)
        if net == "mlp":
            x = np.abs(x) + 0.1     # Sqrt's input: positive when healthy
            if fault and step >= FAULT_FROM:
                x[1, 3] = -1.0
        y = data.randint(0, OUT, (BATCH,)).astype(np.int32)
        out.append((x, y))
    return out


def child(name: str, out: str) -> None:
    """Train one net and dump it (runs in its own process); writes the script's log as log.json."""
    import mindspore as ms
    from mindspore import Tensor, nn

    spec = DUMPS[name]
    ms.set_seed(5)
    ms.set_context(mode=ms.PYNATIVE_MODE if spec.get("mode") == "pynative" else ms.GRAPH_MODE)
    ms.set_device("CPU")
    net = build(spec["net"])
    params = net.trainable_params()
    opt = nn.Momentum(params, learning_rate=0.05, momentum=0.9, weight_decay=spec.get("weight_decay", 0.0))
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    if spec.get("trainer") == "functional":
        def forward(x, y):  # type: ignore[no-untyped-def]
            return loss_fn(net(x), y)
        grad_fn = ms.value_and_grad(forward, None, opt.parameters)

        @ms.jit
        def step_fn(x, y):  # type: ignore[no-untyped-def]
            loss, grads = grad_fn(x, y)
            return ms.ops.depend(loss, opt(grads))
        net.set_train()
        train = step_fn
    else:
        train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
        train.set_train()
    initial = {p.name: p.asnumpy().copy() for p in params}
    losses: list[float] = []
    for step, (x, y) in enumerate(batches(spec["net"], spec.get("fault", False))):
        loss = train(Tensor(x), Tensor(y)).asnumpy()
        losses.append(np.float32(loss).item())
        print(f"{name} step {step} loss {losses[-1]:.6f}", flush=True)
    log = {"losses": losses,
           "losses_hex": [np.float32(v).tobytes().hex() for v in losses],
           "trainable": [p.name for p in params],
           "shapes": {p.name: list(p.shape) for p in params},
           "zero_initialised": [k for k, v in initial.items() if not np.any(v)],
           # MindSpore's default decay filter leaves out BatchNorm's gamma and beta
           "weight_decayed": [p.name for p, f in zip(params, opt.decay_flags) if f and opt.weight_decay],
           "non_trainable": [p.name for p in net.get_parameters() if not p.requires_grad]}
    with open(os.path.join(out, "log.json"), "w") as f:
        json.dump(log, f)


def dump_config(out: str, over: dict, kernels: list[str]) -> dict:
    """The dump config: every kernel's inputs and outputs of every iteration, changed by ``over``."""
    common = {"op_debug_mode": 0, "dump_mode": 0, "path": os.path.abspath(out), "net_name": "Net",
              "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": kernels,
              "support_device": [0]}
    common.update(over)
    return {"common_dump_settings": common, "e2e_dump_settings": {"enable": True, "trans_flag": True}}


def run_child(name: str, out: str, cfg: dict) -> tuple[int, str]:
    """Run the child with ``cfg`` as its dump config; (exit status, the tail of what it printed)."""
    cfg_dir = tempfile.mkdtemp(prefix="tdbg_corpus_ms_")
    try:
        path = os.path.join(cfg_dir, "dump.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        env = dict(os.environ, MINDSPORE_DUMP_CONFIG=path, GLOG_v="3")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, out], env=env,
                              capture_output=True, text=True)
    finally:
        shutil.rmtree(cfg_dir, ignore_errors=True)
    text = proc.stdout + proc.stderr
    print(proc.stdout, end="", flush=True)
    return proc.returncode, text[-3000:]


def forward_backward_kernels(dump: str) -> list[str]:
    """The kernels of a dump's execution orders that are not the optimizer's (dump_mode 1's list)."""
    out: list[str] = []
    for path in sorted(glob.glob(os.path.join(dump, "rank_0", "execution_order", "ms_execution_order_graph_*.csv"))):
        out += [k for k in execution_order(path) if "optimizer" not in k.split("/")[1]]
    return out


def execution_order(path: str) -> list[str]:
    """Kernel full names of one ms_execution_order_graph_N.csv, in order."""
    with open(path) as f:
        rows = [r for r in csv.reader(f) if r]
    return [r[-1].strip() for r in rows if not r[0].startswith("NodeExecutionOrder")]


FILE_RE = re.compile(r"^(?P<op_type>[^.]+)\.(?P<op_name>.+)\.\d+\.\d+\.\d+\.(?P<io>input|output)\.(?P<slot>\d+)\.")


def npy_facts(dump: str) -> dict:
    """What numpy says of the .npy files: per graph, iteration: file count, distinct (op, io, slot),
    non-finite files, the first kernel (in execution order) with a non-finite output, else input."""
    rank = os.path.join(dump, "rank_0")
    graphs: dict[str, dict] = {}
    for gdir in sorted(glob.glob(os.path.join(rank, "Net", "*"))):
        gid = os.path.basename(gdir)
        order_path = os.path.join(rank, "execution_order", f"ms_execution_order_graph_{gid}.csv")
        order = [k.replace("/", "_") for k in execution_order(order_path)] if os.path.exists(order_path) else []
        its: dict[str, dict] = {}
        for idir in sorted(glob.glob(os.path.join(gdir, "*")), key=lambda p: (not p.endswith("constants"), p)):
            it = os.path.basename(idir)
            if not it.isdigit():
                continue
            files = sorted(os.listdir(idir))
            npys = [f for f in files if f.endswith(".npy")]
            bad = [f for f in npys if not np.all(np.isfinite(np.load(os.path.join(idir, f)).astype(np.float64)))]
            # a graph that runs twice in an iteration (a while loop's condition) writes a file per run
            distinct = {(m["op_name"], m["io"], m["slot"]) for m in map(FILE_RE.match, npys) if m}
            its[it] = {"npy_files": len(npys), "distinct_tensors": len(distinct), "nonfinite_files": len(bad),
                       "parameter_files": sorted(f.split(".")[1] for f in npys if f.startswith("Parameter.")),
                       "first_nonfinite": first_in_order(bad, order)}
        graphs[gid] = {"iterations": sorted(int(i) for i in its), "per_iteration": its,
                       "execution_order_kernels": len(order),
                       "run_history": run_history(os.path.join(rank, "execution_order",
                                                               f"ms_global_execution_order_graph_{gid}.csv"))}
    return graphs


def first_in_order(files: list[str], order: list[str]) -> dict | None:
    """The first file's kernel in execution order (outputs before inputs of the same kernel); Parameters
    and kernels missing from the order come last."""
    best = None
    for f in files:
        m = FILE_RE.match(f)
        if not m:
            continue
        pos = order.index(m["op_name"]) if m["op_name"] in order else len(order)
        key = (pos, m["io"] != "output", int(m["slot"]))
        if best is None or key < best[0]:
            best = (key, {"op_type": m["op_type"], "file_op_name": m["op_name"], "io": m["io"],
                          "slot": int(m["slot"]), "in_execution_order": pos < len(order)})
    return best[1] if best else None


def run_history(path: str) -> list[int]:
    """The iterations a graph ran, from ms_global_execution_order_graph_N.csv."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return sorted({int(line.split(",")[0]) for line in f if line.strip().split(",")[0].isdigit()})


def truth(name: str, out: str, cfg: dict, log: dict) -> dict:
    """The truth file's contents: the script's log, the dump settings and numpy's facts."""
    spec = DUMPS.get(name, {})
    graphs = npy_facts(out)
    nonfinite = sorted({int(i) for g in graphs.values() for i, v in g["per_iteration"].items() if v["nonfinite_files"]})
    first = None
    for it in nonfinite[:1]:
        cands = [(gid, g["per_iteration"][str(it)]["first_nonfinite"]) for gid, g in graphs.items()
                 if g["per_iteration"].get(str(it), {}).get("first_nonfinite")]
        first = {"iteration": it, "graph": int(cands[0][0]), **cands[0][1]} if cands else None
    fault = None
    if spec.get("fault"):
        fault = {"kind": "sqrt_of_negative", "op_type": "Sqrt", "from_iteration": FAULT_FROM,
                 "input_value": "x[1, 3] = -1.0 of the batch"}
    settings = cfg["common_dump_settings"]
    return {"name": name, "net": spec.get("net"), "mode": spec.get("mode", "graph"),
            "trainer": spec.get("trainer", "TrainOneStepCell"), "optimizer": "Momentum",
            "weight_decay": spec.get("weight_decay", 0.0), "steps_trained": STEPS,
            "dump": {k: settings[k] for k in ("dump_mode", "input_output", "iteration")},
            "kernels": settings["kernels"], "fault": fault, **log,
            "loss_nonfinite_iterations": [i for i, v in enumerate(log["losses"]) if not np.isfinite(v)],
            "nonfinite_iterations": nonfinite, "first_nonfinite": first, "graphs": graphs,
            "has_graph_files": os.path.isdir(os.path.join(out, "rank_0", "graphs"))}


def make(name: str, root: str) -> bool:
    """One dump at root/name (replaced) with its truth file; False when MindSpore refuses it."""
    out = os.path.join(root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    spec = DUMPS[name]
    kernels = forward_backward_kernels(os.path.join(root, "full_nan")) if spec.get("dump", {}).get("dump_mode") == 1 else []
    cfg = dump_config(out, spec.get("dump", {}), kernels)
    rc, text = run_child(name, out, cfg)
    log_path = os.path.join(out, "log.json")
    if rc != 0 or not os.path.exists(log_path) or not os.path.isdir(os.path.join(out, "rank_0")):
        shutil.rmtree(out, ignore_errors=True)
        print(f"{name}: MindSpore failed ({rc}); not kept\n{text}", flush=True)
        return False
    with open(log_path) as f:
        log = json.load(f)
    os.remove(log_path)
    write_truth(out, truth(name, out, cfg, log))
    return True


def write_truth(out: str, data: dict) -> None:
    """<out>/<name>.truth.json."""
    with open(os.path.join(out, os.path.basename(out) + ".truth.json"), "w") as f:
        json.dump(data, f, indent=1)


def copy_without_graphs(name: str, source: str, root: str) -> None:
    """root/name: a copy of root/source less rank_0/graphs, its truth file renamed and marked."""
    src, out = os.path.join(root, source), os.path.join(root, name)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns(f"{source}.truth.json"))
    shutil.rmtree(os.path.join(out, "rank_0", "graphs"))
    with open(os.path.join(src, f"{source}.truth.json")) as f:
        data = json.load(f)
    data.update(name=name, copied_from=source, has_graph_files=False)
    write_truth(out, data)


def compare_losses(root: str, a: str, b: str) -> None:
    """Record in both truth files whether their losses are bit-identical."""
    paths = [os.path.join(root, n, f"{n}.truth.json") for n in (a, b)]
    if not all(os.path.exists(p) for p in paths):
        return
    data = []
    for p in paths:
        with open(p) as f:
            data.append(json.load(f))
    same = data[0]["losses_hex"] == data[1]["losses_hex"]
    for d, other, p in zip(data, (b, a), paths):
        d["losses_bit_identical_to"] = {other: same}
        write_truth(os.path.dirname(p), d)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=HERE)
    p.add_argument("--only", nargs="*", help="make only these dumps (kernels_nan needs full_nan)")
    p.add_argument("--child", nargs=2, metavar=("NAME", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(*a.child)
        return
    names = a.only or list(DUMPS) + list(COPIES)
    for name in names:
        if name in COPIES:
            copy_without_graphs(name, COPIES[name], a.out)
        else:
            make(name, a.out)
    compare_losses(a.out, "functional_loop", "train_one_step")


if __name__ == "__main__":
    main()
