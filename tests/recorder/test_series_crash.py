"""A training process killed with SIGKILL mid-run leaves readable series segments and no torn one, and loses
about a second of steps at most; SIGTERM and SIGINT first write every finished step, then end the process
as they would without the recorder."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import debugger

NEEDS = ("torch",)     # the processes it starts train with PyTorch (tests/tiers.py)

# argv: the dump, series_flush_seconds ("default": the recorder's), "user" to set a SIGTERM handler first
SCRIPT = textwrap.dedent("""
    import signal, sys, time, torch
    from debugger.torch import Recorder
    if sys.argv[3] == "user":            # a handler of the user's (or a launcher's), set before the recorder
        def handler(sig, frame):
            open(sys.argv[1] + ".user", "w").write("called")
            sys.exit(7)
        signal.signal(signal.SIGTERM, handler)
    flush = {} if sys.argv[2] == "default" else {"series_flush_seconds": float(sys.argv[2])}
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with Recorder(sys.argv[1], model, opt, series=True, iterations=(), **flush) as rec:
        for step in range(10**9):
            x = torch.randn(16, 8)
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
            rec.step()
            print(step, time.monotonic(), flush=True)
            time.sleep(0.002)
""")


def _child(out, flush: str, user: str = "none", stdout=None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(out), flush, user], env=env, stdout=stdout, text=True)


def _running(out, flush: str, steps: int) -> subprocess.Popen:
    """The training child, once it has finished ``steps`` steps (its stdout a pipe)."""
    proc = _child(out, flush, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    for _ in range(steps):
        proc.stdout.readline()
    return proc


def test_sigkill_leaves_readable_segments(tmp_path):
    out = tmp_path / "run"
    proc = _child(out, "0.1", stdout=subprocess.DEVNULL)
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


def test_sigkill_loses_about_a_second_of_the_series_at_most(tmp_path):
    """With the default flush a crash loses the steps of about the last second, not ten: the steps on disk
    reach to within 1.5 s of the last step the process finished before it was killed."""
    out = tmp_path / "run"
    proc = _child(out, "default", stdout=subprocess.PIPE)
    done: list[tuple[int, float]] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            step, at = line.split()
            done.append((int(step), float(at)))
            if done[-1][1] - done[0][1] > 4.0:         # 4 s of training after the first step
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    last_step, last_at = done[-1]
    safe = max(s for s, at in done if at <= last_at - 1.5)
    series = debugger.open_dump(str(out)).rank(0).series
    assert series is not None
    steps = series.steps()
    assert list(steps) == list(range(len(steps))) and steps[-1] >= safe, (int(steps[-1]), safe, last_step)


def _signalled(out, sig: int, user: str) -> tuple[int, int]:
    """A child trains (its series never flushed by time), gets ``sig`` after 1.5 s of steps: (its exit
    status, the last step it finished)."""
    proc = _child(out, "3600", user, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    first = None
    last = -1
    for line in proc.stdout:
        last = int(line.split()[0])
        first = first if first is not None else time.monotonic()
        if time.monotonic() - first > 1.5:
            proc.send_signal(sig)
            break
    for line in proc.stdout:          # steps finished while the signal was on its way
        last = int(line.split()[0])
    return proc.wait(timeout=60), last


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_flushes_the_series_then_ends_the_process_as_it_would(tmp_path, sig):
    """SIGTERM (a scheduler's) and SIGINT (Ctrl-C): every finished step reaches the disk though the series
    was never due to be written, and the process then ends as it would without the recorder: killed by
    SIGTERM, or by SIGINT after KeyboardInterrupt left the ``with`` block."""
    out = tmp_path / "run"
    code, last = _signalled(out, sig, "none")
    assert code == -sig
    steps = debugger.open_dump(str(out)).rank(0).series.steps()
    assert list(steps) == list(range(len(steps))) and steps[-1] >= last


def test_a_handler_set_before_the_recorder_is_still_called(tmp_path):
    out = tmp_path / "run"
    code, last = _signalled(out, signal.SIGTERM, "user")
    assert code == 7 and open(str(out) + ".user").read() == "called"
    steps = debugger.open_dump(str(out)).rank(0).series.steps()
    assert steps[-1] >= last


def test_a_series_that_never_reached_the_disk_is_told_from_none(tmp_path):
    """Killed before the series' first write: `spikes` and `info` say the run was recorded with a series and
    that none of it reached the disk, not "record with Recorder(series=True)"."""
    from clirun import run_cli

    out = tmp_path / "run"
    proc = _running(out, "3600", 3)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not (out / "rank_0" / "series").is_dir() or not any(
        n.startswith("steps_") for n in os.listdir(out / "rank_0" / "series"))
    said = "recorded with a per-step series (Recorder(series=True)), but no segment of it reached the disk"
    spikes = run_cli("spikes", str(out))
    assert spikes.code == 2 and said in spikes.err, spikes.err
    info = run_cli("info", str(out), "--json")
    assert any(said in w for w in info.json["warnings"])
    from debugger.views.series import catalog      # the Trends tab's answer
    trends = catalog(debugger.open_dump(str(out)).rank(0))
    assert not trends["available"] and said in trends["message"]


def test_a_second_recorder_on_a_live_run_is_refused_and_the_first_trains_on(tmp_path):
    """Two writers on one path: a second Recorder started while a training process records there is refused
    with a message naming the rank folder (before any hook is installed); the first run goes on, and what it
    wrote reads whole."""
    import torch
    from debugger.errors import DumpError
    from debugger.torch import Recorder

    out = tmp_path / "run"
    proc = _running(out, "0.1", 5)
    try:
        assert proc.stdout is not None
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        second = Recorder(str(out), model, opt, series=True)
        backward = torch.autograd.backward
        with pytest.raises((FileExistsError, DumpError)) as err:
            second.start()
        assert str(out / "rank_0") in str(err.value)
        # refused before anything was installed: training here runs as without a recorder
        assert torch.autograd.backward is backward and not model._forward_hooks and not opt._optimizer_step_pre_hooks
        first_steps = int(proc.stdout.readline().split()[0])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    series = debugger.open_dump(str(out)).rank(0).series
    assert series is not None and len(series.steps()) >= first_steps
