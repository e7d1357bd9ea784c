"""A real PyTorch training process that records a tdbg-h5 dump (with its per-step series) while a test reads
it: for following a running job (tdbg scan --follow, the trends view's live update)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from typing import Any

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
