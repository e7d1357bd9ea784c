"""Dumps written while a test reads them, for following a running job (tdbg scan --follow, the server's
live updates): a real PyTorch training process recording a tdbg-h5 dump (with its per-step series), and a
real MindSpore or msprobe dump's files arriving one by one, each first half-written, as their writers do."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from typing import Any

NEEDS = ("torch",)     # the processes it starts train with PyTorch (tests/tiers.py)

HERE = os.path.dirname(os.path.abspath(__file__))
MSPROBE = os.path.join(HERE, "data", "msprobe_real", "gpt2_adamw_nan_statistics")   # a real msprobe statistics dump
SINGLE = os.path.join(os.path.dirname(HERE), "dumps_sample", "single")                # a real MindSpore dump

TRAINER = textwrap.dedent("""
    import sys, time, torch
    from debugger.torch import Recorder
    out, steps, nan_at, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    lr_jump = int(sys.argv[5]) if len(sys.argv) > 5 else -1
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 8), torch.randn(32, 2)
    with Recorder(out, model, opt, save="statistics", level="parameters", series=True,
                  series_flush_seconds=0.3) as rec:
        for step in range(steps):
            if step == lr_jump:
                opt.param_groups[0]["lr"] = 50.0         # the planted fault: the learning rate jumps
            if step == nan_at:
                with torch.no_grad():
                    model[0].weight[0, 0] = float("nan")      # the planted fault
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
            rec.flush()
            time.sleep(pause)
""")


def start(tmp_path: Any, out: str, steps: int, nan_at: int, pause: float, lr_jump: int = -1) -> subprocess.Popen:
    """The training process, started: ``steps`` steps ``pause`` s apart, a NaN planted in fc1's weight at
    step ``nan_at`` and the learning rate set to 50 at ``lr_jump`` (-1: never); its stderr in train.err."""
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    with open(tmp_path / "train.err", "w") as err:
        return subprocess.Popen([sys.executable, str(script), out, str(steps), str(nan_at), str(pause), str(lr_jump)],
                                stdout=subprocess.DEVNULL, stderr=err)


def wait_for(path: str, timeout: float = 60.0) -> None:
    """Until ``path`` exists (an AssertionError after ``timeout`` seconds)."""
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)


def mindspore_arrives(root: str, pause: float) -> None:
    """The sample's iterations arrive one by one, each .npy first written in part then completed, as a
    writer does: what a follower must never call corrupt."""
    src_rank = os.path.join(SINGLE, "rank_0")
    dst_rank = os.path.join(root, "rank_0")
    shutil.copytree(src_rank, dst_rank, ignore=lambda d, names: [n for n in names if d.endswith(os.path.join("Net", "0"))])
    for it in sorted(os.listdir(os.path.join(src_rank, "Net", "0")), key=int):
        src, dst = os.path.join(src_rank, "Net", "0", it), os.path.join(dst_rank, "Net", "0", it)
        os.makedirs(dst)
        for name in sorted(os.listdir(src)):
            with open(os.path.join(src, name), "rb") as fh:
                data = fh.read()
            with open(os.path.join(dst, name), "wb") as fh:
                fh.write(data[: len(data) // 2])      # half a file on disk ...
                fh.flush()
                if name.startswith("Sigmoid"):
                    time.sleep(pause)                 # ... for a while
                fh.write(data[len(data) // 2:])
        time.sleep(pause)


def msprobe_arrives(root: str, pause: float) -> None:
    """A real msprobe statistics dump's steps arrive one by one, each JSON file first half-written."""
    for step in sorted(os.listdir(MSPROBE)):
        src, dst = os.path.join(MSPROBE, step, "proc0"), os.path.join(root, step, "proc0")
        os.makedirs(dst)
        for name in ("construct.json", "stack.json", "dump.json"):
            with open(os.path.join(src, name), "rb") as fh:
                data = fh.read()
            with open(os.path.join(dst, name), "wb") as fh:
                fh.write(data[: len(data) // 2])
                fh.flush()
                time.sleep(pause)
                fh.write(data[len(data) // 2:])
        time.sleep(pause)


def arriving(kind: str, root: str, pause: float) -> subprocess.Popen:
    """A process writing ``root`` as :func:`mindspore_arrives` or :func:`msprobe_arrives` do (``kind``
    "mindspore" or "msprobe"): a writer of its own, as a job is, not a thread starved by the reader's."""
    code = f"import sys; sys.path.insert(0, {HERE!r}); import followrun; followrun.{kind}_arrives({root!r}, {pause!r})"
    return subprocess.Popen([sys.executable, "-c", code])


def aged_copy(src: str, dst: str, age_s: float) -> None:
    """A copy of a dump whose every file and folder was last changed ``age_s`` seconds ago."""
    shutil.copytree(src, dst)
    then = time.time() - age_s
    for folder, dirs, files in os.walk(dst):
        for n in files + dirs:
            os.utime(os.path.join(folder, n), (then, then))
