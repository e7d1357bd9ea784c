"""Cost of debugger.torch.Recorder per training step, side by side with plain training and msprobe.

ResNet-18 (written here: torchvision is not needed), batch 32, SGD with momentum, CPU. Each mode
runs in its own fresh subprocess (same seed, same threads), one after the other in one invocation;
inside it, steps alternate: a plain step, a step of the mode, and so on, so both halves of a pair
see the same machine load (a shared machine's load changes from minute to minute):

    python benchmarks/bench_torch_recorder.py [--size 112] [--steps 4] [--warmup 1] [--threads 2]
        [--msprobe /work/msprobe_env/bin/python] [--skip-msprobe] [--modes plain,...] [--pairs]
        [--baseline OTHER_CHECKOUT]

Modes: plain training (plain vs plain: the noise floor); two floors that any recorder seeing every
ATen operator pays ("floor:dispatch": a dispatch mode that only runs the operators; "floor:stats":
it also reads every floating output once with the compiled statistics kernel; both print how many
elements the operators put out per step); Recorder save="statistics"; the same
recording 3 steps in a row then waiting for their files ("statistics:steady": a run that records
every step, where the writer thread overlaps a step's write with the next step); Recorder
save="tensors"; msprobe PrecisionDebugger (task "statistics" and "tensor", level "mix" and "L1")
when its Python is given; with ``--baseline DIR``, the statistics recorder of another checkout and
this one installed in one process on disjoint iterations (plain, baseline and this steps interleave:
"recorder:statistics:vs-baseline"). A recorded step includes waiting for its iteration's file (no overlap
with the next step is credited). Prints per mode the median plain and mode seconds per step, the
median of the per-pair ratios and of the per-pair overheads, and the overhead of msprobe's
statistics modes over the recorder's. The goal: statistics mode within 1.5x of plain training and
at least 10x less overhead than msprobe's statistics mode.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKER = r'''
import json, os, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
cfg = json.loads(sys.argv[1])
torch.set_num_threads(cfg["threads"])
torch.manual_seed(0)

class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))

class ResNet18(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(nn.Sequential(Block(cin, cout, stride), Block(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(512, classes)
    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

model = ResNet18()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(cfg["batch"], 3, cfg["size"], cfg["size"])
y = torch.randint(0, 1000, (cfg["batch"],))
mode = cfg["mode"]

def one_step():
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

# Steps alternate: a plain step, then a step of the mode, and so on, so that both see the same
# machine load (the machine may be shared); each mode step counts its whole cost (the recorder's
# write is waited for inside the timed step, no overlap with the next step is credited).
plain, timed = [], []
n = cfg["warmup"] + cfg["steps"]
if mode == "plain":
    for _ in range(2 * n):
        t0 = time.perf_counter(); one_step(); plain.append(time.perf_counter() - t0)
    timed = plain[1::2]; plain = plain[0::2]
elif mode.startswith("recorder") and mode.endswith(":steady"):
    # Blocks of K plain steps and K recorded ones alternate; a recorded block ends with flush(), so
    # it pays for every write but the writer thread overlaps a step with the previous one's write,
    # as in a run that records every step.
    sys.path.insert(0, cfg["root"])
    from debugger.torch import Recorder
    K = 3
    selected = [i for i in range(2 * n * K) if (i // K) % 2]
    with Recorder(cfg["out"], model, opt, save=mode.split(":")[1], iterations=selected) as rec:
        for b in range(2 * n):
            t0 = time.perf_counter()
            for _ in range(K):
                one_step()
                rec.step()
            if b % 2:
                rec.flush()
            (timed if b % 2 else plain).append((time.perf_counter() - t0) / K)
elif mode == "recorder:statistics:vs-baseline":
    # Another checkout's recorder (copied in as the package tdbg_baseline) beside this one, both
    # installed in this process on disjoint iterations: plain, baseline and this steps interleave.
    import shutil
    pkg = os.path.join(cfg["out"], "pkg")
    shutil.copytree(os.path.join(cfg["baseline"], "debugger"), os.path.join(pkg, "tdbg_baseline"))
    sys.path.insert(0, pkg)
    sys.path.insert(0, cfg["root"])
    from debugger.torch import Recorder
    from tdbg_baseline.torch import Recorder as Baseline
    base = []
    with Baseline(cfg["out"] + "/base", model, opt, save="statistics", iterations=range(1, 3 * n, 3)) as rb, \
            Recorder(cfg["out"] + "/this", model, opt, save="statistics", iterations=range(2, 3 * n, 3)) as rt:
        for i in range(3 * n):
            t0 = time.perf_counter()
            one_step()
            rb.step()
            rt.step()
            rb.flush()
            rt.flush()
            (plain, base, timed)[i % 3].append(time.perf_counter() - t0)
elif mode.startswith("recorder"):
    sys.path.insert(0, cfg["root"])
    from debugger.torch import Recorder
    with Recorder(cfg["out"], model, opt, save=mode.split(":")[1], iterations=range(1, 2 * n, 2)) as rec:
        for i in range(2 * n):
            t0 = time.perf_counter()
            one_step()
            rec.step()
            if i % 2:
                rec.flush()
            (timed if i % 2 else plain).append(time.perf_counter() - t0)
elif mode.startswith("floor"):
    # What any recorder that sees every ATen operator pays at least: a dispatch mode that only runs
    # the operator ("floor:dispatch"), and one that also reads every floating output once through
    # the recorder's compiled statistics kernel, with no graph, digest or file ("floor:stats").
    sys.path.insert(0, cfg["root"])
    from torch.utils._python_dispatch import TorchDispatchMode
    from debugger.stats import compiled_kernel, tensor_stats
    read = mode == "floor:stats" and compiled_kernel() is not None
    seen = [0]

    class Floor(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    seen[0] += t.numel()
                    if read:
                        with torch._C._DisableTorchDispatch():
                            tensor_stats(t.detach().numpy(), compiled=True)
            return out

    for i in range(2 * n):
        t0 = time.perf_counter()
        if i % 2:
            with Floor():
                one_step()
        else:
            one_step()
        (timed if i % 2 else plain).append(time.perf_counter() - t0)
    extra_floor = {"elements": seen[0] / n}
elif mode.startswith("msprobe"):
    from msprobe.pytorch import PrecisionDebugger
    _, task, level = mode.split(":")
    cfgfile = os.path.join(cfg["out"], "config.json")
    os.makedirs(cfg["out"], exist_ok=True)
    with open(cfgfile, "w") as f:
        json.dump({"task": task, "dump_path": os.path.join(cfg["out"], "dump"), "rank": [], "step": [],
                   "level": level, "async_dump": False,
                   task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}, f)
    dbg = PrecisionDebugger(config_path=cfgfile)
    for i in range(2 * n):
        t0 = time.perf_counter()
        if i % 2:
            dbg.start(model)
            one_step()
            dbg.stop()
            dbg.step()
        else:
            one_step()
        (timed if i % 2 else plain).append(time.perf_counter() - t0)
w = cfg["warmup"]
extra = {"baseline": base[w:]} if mode.endswith(":vs-baseline") else {}
if mode.startswith("floor"):
    extra = extra_floor
print("RESULT " + json.dumps({"plain": plain[w:], "mode": timed[w:], **extra}))
'''


def run_mode(python: str, mode: str, a: argparse.Namespace, out: str) -> dict[str, list[float]] | str:
    """Seconds per measured plain and mode step of one mode's process, or the error text."""
    cfg = {"mode": mode, "threads": a.threads, "batch": a.batch, "size": a.size, "steps": a.steps,
           "warmup": a.warmup, "root": ROOT, "out": out, "baseline": a.baseline}
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    p = subprocess.run([python, "-c", WORKER, json.dumps(cfg)], capture_output=True, text=True, env=env,
                       timeout=a.timeout)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return (p.stderr or p.stdout).strip().splitlines()[-1] if (p.stderr or p.stdout).strip() else f"exit {p.returncode}"


def du(path: str) -> int:
    """Bytes of the files under ``path``."""
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(path) for n in ns)


def main(argv: list[str] | None = None) -> int:
    """Run every mode and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=112, help="image side (default 112)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--msprobe", default="/work/msprobe_env/bin/python")
    ap.add_argument("--skip-msprobe", action="store_true")
    ap.add_argument("--modes", default="", help="comma-separated subset of the modes")
    ap.add_argument("--pairs", action="store_true", help="also print every measured (plain, mode) pair")
    ap.add_argument("--baseline", help="another checkout of tdbg: its statistics recorder, interleaved with this one")
    a = ap.parse_args(argv)
    modes = [("plain", sys.executable), ("floor:dispatch", sys.executable), ("floor:stats", sys.executable),
             ("recorder:statistics", sys.executable),
             ("recorder:statistics:steady", sys.executable), ("recorder:tensors", sys.executable)]
    if not a.skip_msprobe and os.path.exists(a.msprobe):
        modes += [(f"msprobe:{t}:{lv}", a.msprobe) for t in ("statistics", "tensor") for lv in ("mix", "L1")]
    if a.baseline:
        modes.append(("recorder:statistics:vs-baseline", sys.executable))
    if a.modes:
        keep = set(a.modes.split(","))
        modes = [m for m in modes if m[0] in keep]
    print(f"ResNet-18, batch {a.batch}, {a.size}x{a.size}, CPU, {a.threads} threads; per mode one process "
          f"alternating plain and mode steps, {a.steps} measured pairs after {a.warmup} warm-up; load {os.getloadavg()[0]:.1f}")
    print(f"  {'mode':32s} {'plain s/step':>12s} {'mode s/step':>12s} {'ratio':>7s} {'overhead s':>11s} {'dump MiB':>9s}")
    over: dict[str, float] = {}
    for mode, py in modes:
        tmp = tempfile.mkdtemp(prefix="tdbg-bench-")
        try:
            res = run_mode(py, mode, a, os.path.join(tmp, "dump"))
            size = du(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(res, str):
            print(f"  {mode:32s} failed: {res}", flush=True)
            continue
        # per pair ratios: the two steps of a pair ran under the same load
        ratios = [m / p for p, m in zip(res["plain"], res["mode"])]
        p_med, m_med, r_med = statistics.median(res["plain"]), statistics.median(res["mode"]), statistics.median(ratios)
        over[mode] = statistics.median(m - p for p, m in zip(res["plain"], res["mode"]))
        print(f"  {mode:32s} {p_med:12.3f} {m_med:12.3f} {r_med:6.2f}x {over[mode]:+11.3f} {size / 2**20:9.1f}",
              flush=True)
        if "elements" in res:
            print(f"      floating-point elements out of the operators per step: {res['elements'] / 1e6:.0f} M")
        if a.pairs:
            print("      pairs (plain, mode): " + ", ".join(f"({p:.2f}, {m:.2f})" for p, m in zip(res["plain"], res["mode"])))
        if "baseline" in res:
            b_over = statistics.median(b - p for p, b in zip(res["plain"], res["baseline"]))
            b_ratio = statistics.median(b / p for p, b in zip(res["plain"], res["baseline"]))
            print(f"  {'  the baseline, same steps':32s} {p_med:12.3f} {statistics.median(res['baseline']):12.3f} "
                  f"{b_ratio:6.2f}x {b_over:+11.3f}   (overhead this / baseline = {over[mode] / b_over:.2f})",
                  flush=True)
    base = over.get("recorder:statistics")
    if base is not None:
        for m in [m for m in over if m.startswith("msprobe:statistics")]:
            r = over[m] / base if base > 0 else float("inf")
            print(f"  overhead of {m} / overhead of recorder:statistics = {r:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
