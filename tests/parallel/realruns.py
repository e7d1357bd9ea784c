"""Record tests/parallel/layouts.py under a layout in a child process (spawned gloo ranks), for tests."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

NEEDS = ("torch",)     # the processes it starts train with PyTorch (tests/tiers.py)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def free_port() -> int:
    """A TCP port nothing listens on now (for the ranks' rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_layouts(args: list[str]) -> subprocess.CompletedProcess:
    """layouts.py with ``args`` and a free rendezvous port. A failed run is tried once more (another process
    may take the port between free_port() and the ranks' bind); the training is deterministic, so a fault
    of the recorder fails both times. Raises RuntimeError with the end of both stderrs."""
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    errors = []
    for _ in range(2):
        cmd = [sys.executable, os.path.join(HERE, "layouts.py"), *args, "--port", str(free_port())]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
        if done.returncode == 0:
            return done
        errors.append(f"exit {done.returncode}:\n{done.stderr[-3000:]}")
    raise RuntimeError(f"layouts.py {' '.join(args[:1])} failed twice:\n" + "\n---\n".join(errors))


def record(folder: str, layout: str, *, save: str = "statistics", plant: str | None = None,
           dtype: str = "float32", steps: int = 2, extra: tuple[str, ...] = (), name: str = "") -> str:
    """Train ``steps`` steps of layouts.py's net under ``layout`` with the Recorder (``extra``: more of its
    arguments; ``name``: a suffix that tells runs of equal arguments apart); the dump's root."""
    tag = "-".join((layout, save, dtype, plant or "clean", *extra, *([name] if name else [])))
    root = os.path.join(folder, tag.replace("@", "_").replace(":", "_").replace("--", ""))
    shutil.rmtree(root, ignore_errors=True)
    run_layouts([layout, root + ".json", "--dump", root, "--save", save, "--steps", str(steps), "--dtype", dtype,
                 *(["--plant", plant] if plant else []), *extra])
    return root
