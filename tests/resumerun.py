"""A training run restarted from a checkpoint, recorded into one dump (``Recorder(resume=True)``): the first
process trains 6 steps at level "parameters" with a series, saving a checkpoint after step 4, and ends; the
restart loads that checkpoint and trains 4 more steps at level "ops". Each part runs in a process of its
own, as a restart does; the losses each printed come back, with those of the same sequence unrecorded."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

NEEDS = ("torch",)     # the processes it starts train with PyTorch (tests/tiers.py)

# argv: dump ("-": unrecorded), checkpoint path, "first" | "restart"; prints one loss.hex() per step
SCRIPT = textwrap.dedent("""
    import sys, torch
    from debugger.torch import Recorder
    torch.set_num_threads(1)
    dump, ckpt, part = sys.argv[1:4]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = 0
    if part == "restart":
        state = torch.load(ckpt)
        model.load_state_dict(state["model"]); opt.load_state_dict(state["opt"]); first = state["step"] + 1
    steps = range(first, first + (6 if part == "first" else 4))
    opts = dict(level="parameters") if part == "first" else dict(level="ops", resume=True)
    rec = Recorder(dump, model, opt, save="statistics", series=True, **opts).start() if dump != "-" else None
    for step in steps:
        g = torch.Generator().manual_seed(step)
        x = torch.randn(8, 4, generator=g)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if rec is not None:
            rec.step()
        print(float(loss).hex(), flush=True)
        if part == "first" and step == 4:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, ckpt)
    if rec is not None:
        rec.close()
""")


def _part(dump: str, ckpt: str, part: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, dump, ckpt, part], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def record_restarted(dump: str, work: str, plain: bool = True) -> tuple[list[str], list[str]]:
    """(losses recorded: 6 then 4 after the restart, the same unrecorded: [] when not ``plain``); the dump
    holds both runs."""
    recorded = _part(dump, os.path.join(work, "a.pt"), "first") + _part(dump, os.path.join(work, "a.pt"), "restart")
    if not plain:
        return recorded, []
    unrecorded = _part("-", os.path.join(work, "b.pt"), "first") + _part("-", os.path.join(work, "b.pt"), "restart")
    return recorded, unrecorded
