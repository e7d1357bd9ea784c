"""GPU check of debugger.torch.Recorder(save="statistics"): right numbers, no full-tensor copies to the host.

    python benchmarks/gpu_check_recorder.py [--device cuda] [--steps 3] [--keep DIR]

Trains a small CNN (conv, batch norm, relu, linear; SGD with momentum, which runs its foreach
kernels on CUDA, and Adam for the head) twice on the GPU, deterministically: once recorded with
save="statistics", once with save="tensors". Checks (exit 1 on any failure, 0 when all pass,
2 when no GPU):

1. every tensor of the statistics dump has the statistics that debugger.stats computes on the CPU
   from the values dump of the same run (counts exactly, values to 1e-4 relative; a NaN is planted
   in iteration 1's input so the non-finite path is checked too);
2. the final parameters' statistics equal debugger.stats over `p.cpu()` computed here;
3. device-to-host traffic of the statistics run (every Tensor.to/.cpu/.item/.tolist from a CUDA
   tensor is counted) is at most the bytes of the tensors stored with an exact digest (parameters,
   optimizer state, gradients: hashed on the host) plus the statistics tables, and far below the
   bytes of the activations: no activation is copied to the host;
4. it prints the time per step of plain training and of both recorded modes.
Runs in well under two minutes on any CUDA GPU.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")    # deterministic cuBLAS (set before CUDA starts)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from debugger.model import open_dump  # noqa: E402
from debugger.stats.core import COUNT_NAMES, STAT_NAMES, tensor_stats  # noqa: E402
from debugger.torch import Recorder  # noqa: E402


class Net(nn.Module):
    """A small CNN with big activations next to its parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = torch.tanh(self.conv2(x))
        return self.fc(x.mean((2, 3)))      # not adaptive_avg_pool2d: its CUDA backward is nondeterministic


class D2H:
    """Counts bytes copied from the device to the host through Tensor methods."""

    def __init__(self) -> None:
        self.bytes = 0
        self.calls = 0
        self.paused = False
        self._orig: dict[str, object] = {}

    def _wrap(self, name: str) -> None:
        orig = getattr(torch.Tensor, name)
        self._orig[name] = orig
        counter = self

        def wrapper(t: torch.Tensor, *a: object, **k: object) -> object:
            out = orig(t, *a, **k)
            if not counter.paused and t.device.type != "cpu":
                if name in ("item", "tolist") or (isinstance(out, torch.Tensor) and out.device.type == "cpu"):
                    counter.bytes += t.numel() * t.element_size()
                    counter.calls += 1
            return out

        setattr(torch.Tensor, name, wrapper)

    def __enter__(self) -> "D2H":
        for n in ("to", "cpu", "item", "tolist", "__float__", "__int__"):
            self._wrap(n)
        return self

    def __exit__(self, *exc: object) -> None:
        for n, f in self._orig.items():
            setattr(torch.Tensor, n, f)


def make(device: str) -> tuple[nn.Module, list[torch.optim.Optimizer]]:
    """The same initial model and optimizers every time."""
    torch.manual_seed(0)
    net = Net().to(device)
    body = [p for n, p in net.named_parameters() if not n.startswith("fc.")]
    return net, [torch.optim.SGD(body, lr=0.05, momentum=0.9), torch.optim.Adam(net.fc.parameters(), lr=1e-3)]


def batch(step: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic data; iteration 1's input holds one NaN."""
    g = torch.Generator().manual_seed(step)
    x = torch.randn(32, 3, 48, 48, generator=g)
    if step == 1:
        x[0, 0, 0, 0] = float("nan")
    return x.to(device), torch.randint(0, 10, (32,), generator=g).to(device)


def train(device: str, steps: int, save: str | None, out: str, counter: D2H | None = None) -> tuple[float, nn.Module]:
    """Seconds per step (after the first) and the trained model."""
    net, opts = make(device)
    times = []
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def one(step: int) -> None:
        x, y = batch(step, device)
        loss = F.cross_entropy(net(x), y)
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()

    if save is None:
        for s in range(steps):
            sync()
            t0 = time.perf_counter()
            one(s)
            sync()
            times.append(time.perf_counter() - t0)
    else:
        with Recorder(out, net, opts, save=save) as rec:
            for s in range(steps):
                sync()
                t0 = time.perf_counter()
                one(s)
                rec.step()
                rec.flush()
                sync()
                times.append(time.perf_counter() - t0)
    return float(np.median(times[1:] if len(times) > 1 else times)), net


def _deterministic() -> None:
    """Same numbers in both recorded runs: deterministic kernels, no TF32."""
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _stat_matches(name: str, want: float | None, got: float | None) -> bool:
    """A stored statistic against debugger.stats: counts exactly, values to 1e-4 relative."""
    if want is None:
        return got is None or math.isnan(got)
    if name in COUNT_NAMES:
        return got == want
    return got is not None and math.isclose(got, want, rel_tol=1e-4, abs_tol=1e-6)


def _check_statistics(rs: Any, rv: Any, failures: list[str]) -> tuple[int, int, int]:
    """Check 1: every stored statistic against debugger.stats over the values run's tensor; returns the bytes
    of tensors with a digest, of the others (activations), and the number of tensors compared."""
    digest_bytes = act_bytes = compared = 0
    for gid in rv.graphs:
        for it in rv.iterations(gid):
            tv, ts = rv.tensor_map(gid, it), rs.tensor_map(gid, it) if gid in rs.graphs else {}
            if set(tv) != set(ts):
                failures.append(f"graph {gid} iteration {it}: tensor sets differ ({len(tv)} vs {len(ts)})")
                continue
            for key, ref in tv.items():
                src = ts[key].source
                want = tensor_stats(ref.source.array()).to_dict()
                got = src.stored_stats() or {}
                nbytes = src.header().nbytes if hasattr(src.header(), "nbytes") else 0
                if src.digest():
                    digest_bytes += nbytes
                else:
                    act_bytes += nbytes
                failures.extend(f"it {it} {key}: {n} stored {got.get(n)} vs debugger.stats {want[n]}"
                                for n in STAT_NAMES if not _stat_matches(n, want[n], got.get(n)))
                compared += 1
    print(f"statistics compared with debugger.stats on the CPU: {compared} tensors")
    nan_rows = sum(1 for gid in rs.graphs for it in rs.iterations(gid)
                   for r in rs.tensor_map(gid, it).values() if (r.source.stored_stats() or {}).get("nan"))
    if nan_rows == 0:
        failures.append("the planted NaN is in no tensor's statistics")
    return digest_bytes, act_bytes, compared


def _check_parameters(rs: Any, net: nn.Module, failures: list[str]) -> None:
    """Check 2: the last iteration's parameters against plain torch."""
    last = max(rs.iterations(max(rs.graphs)))
    tmap = rs.tensor_map(max(rs.graphs), last)
    for name, p in net.named_parameters():
        ref = tmap.get((name, "output", 0))
        if ref is None:
            failures.append(f"{name}: not in the last iteration")
            continue
        want = tensor_stats(p.detach().cpu().numpy()).to_dict()
        got = ref.source.stored_stats() or {}
        for n in ("count", "nan", "min", "max", "mean", "l2norm"):
            if want[n] is not None and not math.isclose(got.get(n, math.nan), want[n], rel_tol=1e-5, abs_tol=1e-7):
                failures.append(f"{name}: {n} {got.get(n)} vs {want[n]}")


def _check_traffic(counter: D2H, digest_bytes: int, act_bytes: int, rows: int, failures: list[str]) -> None:
    """Check 3: device-to-host bytes within the digest tensors and the statistics tables, far below activations."""
    table = rows * len(STAT_NAMES) * 8
    limit = digest_bytes + table + (1 << 20)
    print(f"device->host: {counter.bytes / 2**20:.2f} MiB in {counter.calls} calls; tensors with exact digest "
          f"{digest_bytes / 2**20:.2f} MiB, statistics tables {table / 2**20:.3f} MiB, "
          f"activations (never copied) {act_bytes / 2**20:.1f} MiB")
    if counter.bytes > limit:
        failures.append(f"device->host copies {counter.bytes} bytes > {limit} (digest tensors + tables + 1 MiB)")
    if act_bytes and counter.bytes > 0.5 * act_bytes:
        failures.append("device->host copies are not far below the activations' bytes")


def main(argv: list[str] | None = None) -> int:
    """Run the checks; print a report."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (cpu only dry-runs the script: no traffic to count)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--keep", help="write the two dumps here and keep them")
    a = ap.parse_args(argv)
    a.steps = max(a.steps, 2)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: nothing checked")
        return 2
    _deterministic()
    root = a.keep or tempfile.mkdtemp(prefix="tdbg-gpu-check-")
    failures: list[str] = []
    try:
        st_dir, val_dir = os.path.join(root, "statistics"), os.path.join(root, "tensors")
        for d in (st_dir, val_dir):
            shutil.rmtree(d, ignore_errors=True)
        t_plain, _ = train(a.device, a.steps, None, "")
        with D2H() as counter:
            t_stats, net = train(a.device, a.steps, "statistics", st_dir, counter)
            counter.paused = True
        t_vals, _ = train(a.device, a.steps, "tensors", val_dir)
        print(f"per step: plain {t_plain * 1e3:.1f} ms, statistics {t_stats * 1e3:.1f} ms "
              f"({t_stats / t_plain:.2f}x), tensors {t_vals * 1e3:.1f} ms ({t_vals / t_plain:.2f}x)")
        rs, rv = open_dump(st_dir).rank(0), open_dump(val_dir).rank(0)
        digest_bytes, act_bytes, rows = _check_statistics(rs, rv, failures)
        _check_parameters(rs, net, failures)
        _check_traffic(counter, digest_bytes, act_bytes, rows, failures)
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    for f in failures[:40]:
        print("FAIL", f)
    print("OK" if not failures else f"{len(failures)} failure(s)")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
