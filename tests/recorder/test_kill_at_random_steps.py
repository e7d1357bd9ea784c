"""Issue 38 item 6: a recorded training process killed (SIGKILL) or stopped (SIGTERM) at a random step, at
each level and save mode: the losses it printed are the unrecorded run's bit for bit, SIGTERM ends it as it
would end without the recorder, and what reached the disk reads: every listed iteration, the series
contiguous from step 0. The step is drawn per case from a fixed seed (named in each assertion)."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

import debugger
from clirun import run_cli

NEEDS = ("torch",)     # the processes it starts train with PyTorch (tests/tiers.py)

# the run: a model and AdamW from a fixed seed, each step on a batch of its own (seeded by the step)
RUN = textwrap.dedent("""
    import torch
    torch.set_num_threads(1)

    def model_and_optimizer():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
        return model, torch.optim.AdamW(model.parameters(), lr=1e-2)

    def train_step(model, opt, step):
        g = torch.Generator().manual_seed(1000 + step)
        x, y = torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss)
""")

# argv: the dump, level, save; prints "step loss.hex()" after every step
SCRIPT = RUN + textwrap.dedent("""
    import sys, time
    from debugger.torch import Recorder
    model, opt = model_and_optimizer()
    with Recorder(sys.argv[1], model, opt, level=sys.argv[2], save=sys.argv[3], series=True,
                  series_flush_seconds=0.2) as rec:
        for step in range(10**6):
            loss = train_step(model, opt, step)
            rec.step()
            print(step, loss.hex(), flush=True)
            time.sleep(0.01)
""")

CASES = [("parameters", "statistics", signal.SIGKILL), ("ops", "statistics", signal.SIGKILL),
         ("parameters", "tensors", signal.SIGTERM), ("ops", "tensors", signal.SIGKILL),
         ("modules", "statistics", signal.SIGTERM)]


def _plain_losses(n: int) -> list[str]:
    """The first ``n`` losses of the same run unrecorded (in a child: the thread count must be the run's)."""
    code = RUN + f"\nm, o = model_and_optimizer()\nprint(' '.join(train_step(m, o, s).hex() for s in range({n})))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


@pytest.mark.parametrize("case", range(len(CASES)))
def test_a_run_killed_at_a_random_step_trained_as_unrecorded_and_reads(tmp_path, case):
    level, save, sig = CASES[case]
    at = random.Random(38 + case).randrange(2, 14)
    where = f"{level}/{save}, {signal.Signals(sig).name} after step {at}"
    out = str(tmp_path / "run")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, out, level, save], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    printed: list[tuple[int, str]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        step, loss = line.split()
        printed.append((int(step), loss))
        if int(step) == at:
            proc.send_signal(sig)
            break
    printed += [(int(s), v) for s, v in (ln.split() for ln in proc.stdout)]   # steps finished meanwhile
    code = proc.wait(timeout=60)
    err = proc.stderr.read() if proc.stderr else ""
    assert code == -sig, (where, code, err[-2000:])     # ends as it would without the recorder
    assert "Traceback" not in err, (where, err[-2000:])
    assert [v for _, v in printed] == _plain_losses(len(printed)), where
    info = run_cli("info", out, "--json")
    assert info.code == 0, (where, info.err)
    rank = debugger.open_dump(out).rank(0)
    its = rank.iterations()
    assert its == list(range(len(its))) and len(its) >= at - 2, (where, its)
    for gid in rank.graph_ids:     # every listed iteration reads, each tensor's statistics
        for it in rank.iterations(gid):
            for ref in rank.tensors(gid, it):
                assert ref.source.location
    scan = run_cli("scan", out, "--json", "--no-cache", "--preset", "parameters")
    assert scan.code in (0, 4) and not scan.json["errors"], (where, scan.code, scan.json["errors"][:3])
    steps = list(rank.series.steps()) if rank.series is not None else []
    assert steps == list(range(len(steps))), (where, steps)
    if sig == signal.SIGTERM:      # flushed on the way out: every finished step
        assert len(steps) == len(printed), (where, len(steps), len(printed))
