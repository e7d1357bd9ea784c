"""A training process killed with SIGKILL mid-run leaves readable series segments and no torn one."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np

import debugger

SCRIPT = textwrap.dedent("""
    import sys, time, torch
    from debugger.torch import Recorder
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with Recorder(sys.argv[1], model, opt, series=True, iterations=(), series_flush_seconds=0.1) as rec:
        for step in range(10**9):
            x = torch.randn(16, 8)
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
            rec.step()
            time.sleep(0.002)
""")


def test_sigkill_leaves_readable_segments(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(out)], env=env)
    folder = out / "rank_0" / "series"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if folder.is_dir() and len([n for n in os.listdir(folder) if n.startswith("steps_")]) >= 3:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the training wrote no series segments in 60 s")
        time.sleep(0.15)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    dump = debugger.open_dump(str(out))
    series = dump.rank(0).series
    assert series is not None and len(series.segments) >= 3
    steps = series.steps()
    assert list(steps) == list(range(len(steps)))        # contiguous from 0: no segment lost in the middle
    _, loss = series.scalar("loss")
    assert np.isfinite(loss).all()
    _, l2 = series.matrix("l2norm")                       # every segment reads whole
    assert l2.shape[1] == len(steps) and np.isfinite(l2).all()
    assert all("incomplete segment" in w for w in series.warnings)     # a temp file at most, never "corrupt"
