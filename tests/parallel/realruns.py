"""Record tests/parallel/layouts.py under a layout in a child process (spawned gloo ranks), for tests."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def free_port() -> int:
    """A TCP port nothing listens on now (for the ranks' rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def record(folder: str, layout: str, *, save: str = "statistics", plant: str | None = None,
           dtype: str = "float32", steps: int = 2) -> str:
    """Train ``steps`` steps of layouts.py's net under ``layout`` with the Recorder; the dump's root."""
    root = os.path.join(folder, f"{layout}-{save}-{dtype}-{plant or 'clean'}".replace("@", "_").replace(":", "_"))
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for attempt in range(2):
        cmd = [sys.executable, os.path.join(HERE, "layouts.py"), layout, root + ".json", "--dump", root, "--save",
               save, "--steps", str(steps), "--port", str(free_port()), "--dtype", dtype]
        if plant:
            cmd += ["--plant", plant]
        shutil.rmtree(root, ignore_errors=True)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
        if done.returncode == 0:
            return root
        # the rendezvous port taken by another process between free_port() and the ranks' bind: once more
        if attempt == 0 and "address already in use" in done.stderr.lower():
            continue
        break
    raise RuntimeError(f"layouts.py {layout} failed ({done.returncode}):\n{done.stderr[-4000:]}")
