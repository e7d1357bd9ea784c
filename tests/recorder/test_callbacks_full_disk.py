"""Issue 38 item 4: the callbacks keep the recorder's promise on a disk that fails. The real Hugging Face
and Lightning trainers of test_callbacks.py train in a child process whose files may not grow past a size
(RLIMIT_FSIZE: the kernel fails the write, as a full disk does): the trainer runs every step to the same
final weights as without the callback, one warning names the folder, and the process ends cleanly."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CHILD = r"""
import hashlib, json, resource, signal, sys, warnings
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # past the limit a write fails (EFBIG), no signal
sys.path[:0] = [{tests!r}, {recorder!r}]
import test_callbacks as T
from debugger.torch.callbacks import TdbgLightningCallback, TdbgTrainerCallback
trainer, dump, limit = {trainer!r}, {dump!r}, {limit}

def train(callback):
    final = T._hf_run(dump + ".hf", callback)[1] if trainer == "hf" else T._lightning_run(callback)[1]
    return hashlib.sha256(b"".join(final[n].tobytes() for n in sorted(final))).hexdigest()

plain = train(None)             # the same training without the callback, before the disk fails
make = TdbgTrainerCallback if trainer == "hf" else TdbgLightningCallback
callback = make(dump, save="tensors", level="parameters", series=True)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    recorded = train(callback)
print(json.dumps({{"plain": plain, "recorded": recorded,
                  "warnings": [str(w.message) for w in said if "tdbg" in str(w.message)]}}))
"""


def _child(trainer: str, dump: str, limit: int) -> dict[str, Any]:
    code = CHILD.format(tests=os.path.dirname(HERE), recorder=HERE, trainer=trainer, dump=dump, limit=limit)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": ROOT}, cwd=os.path.dirname(dump))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Segmentation" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("trainer", ["hf", "lightning"])
def test_a_callback_on_a_failing_disk_leaves_the_training_as_it_was(tmp_path: Any, trainer: str) -> None:
    pytest.importorskip("transformers" if trainer == "hf" else "lightning")
    dump = str(tmp_path / "dump")
    got = _child(trainer, dump, 20_000)
    assert got["recorded"] == got["plain"]                  # every step ran, with the same numbers
    said = [w for w in got["warnings"] if "writing" in w and "failed" in w]
    assert len(said) == 1 and os.path.join(dump, "rank_0") in said[0], got["warnings"]
    assert "training goes on unrecorded" in said[0]
