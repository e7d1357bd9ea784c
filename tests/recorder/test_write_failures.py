"""A dump that cannot be written never stops or crashes training (issue 38). Write errors are made for
real: each run is a child process whose files may not grow past a size (RLIMIT_FSIZE: the kernel fails
the write with EFBIG, as a full disk fails it with ENOSPC), recording nanoGPT at every save mode and
level with its series. Training runs every step with the losses of an unrecorded run, one warning names
the folder, the error and what is whole on disk, the process exits cleanly (HDF5 used to crash it in its
close after the error: SIGSEGV), and what was written reads. A ``with`` block left on the user's own
exception propagates that exception. ``tdbg convert`` onto such a disk is exit 2 naming the file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("torch")

from clirun import run_cli  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STEPS = 8

CHILD = r"""
import json, resource, signal, sys, warnings
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # past the limit a write fails (EFBIG), no signal
sys.path[:0] = [{tests!r}, {recorder!r}]
import nanogpt_kit as K
limit, record, raise_at = {limit}, {record}, {raise_at}
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
fault = None
if raise_at is not None:
    def fault(model, i):
        if i == raise_at:
            raise ValueError("the user's own error")
try:
    run = K.train("eager", {steps}, record=record, path={path!r}, fault=fault)
    print(json.dumps({{"losses": run.losses, "warnings": run.warnings}}))
except ValueError as exc:
    print(json.dumps({{"raised": str(exc)}}))
"""


def _child(path: str, limit: int, record: dict[str, Any] | None, raise_at: int | None = None) -> dict[str, Any]:
    code = CHILD.format(tests=os.path.join(ROOT, "tests"), recorder=HERE, limit=limit, record=record,
                        raise_at=raise_at, steps=STEPS, path=path)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr[-2000:]          # 139 was HDF5's crash after the error
    assert "Exception ignored" not in done.stderr and "Segmentation" not in done.stderr, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def plain() -> list[float]:
    return _child("/unused", 0, None)["losses"]


# (save, level, file size limit): the first file over the limit is the graph (written with the first
# iteration: bigger than a statistics iteration), or at "parameters" with values the first iteration file
CASES = [("statistics", "parameters", 100_000), ("statistics", "ops", 200_000),
         ("tensors", "parameters", 400_000), ("tensors", "ops", 400_000)]


@pytest.mark.parametrize("save,level,limit", CASES)
def test_training_goes_on_when_the_dump_cannot_be_written(tmp_path: Any, plain: list[float], save: str,
                                                          level: str, limit: int) -> None:
    path = str(tmp_path / "d")
    got = _child(path, limit, {"level": level, "save": save, "series": True})
    assert got["losses"] == plain                           # every step, the same numbers
    said, = got["warnings"]
    rank_dir = os.path.join(path, "rank_0")
    assert said.startswith(f"tdbg recorder: writing {rank_dir} failed") and "File too large" in said
    assert "Recording stops here; training goes on unrecorded" in said
    assert "are whole on disk" in said or "no iteration reached the disk" in said
    info = run_cli("info", path, "--json")                  # what was written reads
    assert info.code in (0, 2), info.err
    if info.code == 0:
        whole = [i for r in info.json["ranks"] for i in r["iterations"]]
        assert all(i < STEPS for i in whole)


def test_the_users_exception_is_the_one_that_escapes(tmp_path: Any) -> None:
    """A ``with Recorder`` block left on the user's error while the disk is full: that error propagates."""
    got = _child(str(tmp_path / "d"), 100_000, {"level": "parameters", "save": "statistics"}, raise_at=3)
    assert got == {"raised": "the user's own error"}


CONVERT = r"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from debugger.cli import main
sys.exit(main(["convert", {src!r}, {dst!r}]))
"""


@pytest.mark.parametrize("limit", [30_000, 200_000])
def test_convert_onto_a_disk_that_fails_is_exit_2_naming_the_file(tmp_path: Any, limit: int) -> None:
    dst = str(tmp_path / "out")
    code = CONVERT.format(limit=limit, src=os.path.join(ROOT, "dumps_sample", "single"), dst=dst)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"tdbg: error: {dst}" in done.stderr and "File too large" in done.stderr
    assert "Segmentation" not in done.stderr
