"""What the scripts that make real msprobe dumps share (msprobe_real/, corpus_msprobe/): each dump trained in
a fresh process, its proc{PID} folders given a fixed name."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Callable, Iterable


def normalise(root: str) -> None:
    """proc{PID} folders get a fixed name (proc0) so the committed tree does not change with every run."""
    for step in sorted(os.listdir(root)):
        sdir = os.path.join(root, step)
        for d in os.listdir(sdir):
            if d.startswith("proc") and d != "proc0":
                os.rename(os.path.join(sdir, d), os.path.join(sdir, "proc0"))


def make(script: str, here: str, train: Callable[[str], None], default: Iterable[str]) -> None:
    """The command line of a maker ``script``: ``--one NAME`` trains one dump here; else every dump named (or
    ``default``), each in a fresh process, into ``here``."""
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        train(sys.argv[2])
        return
    for name in sys.argv[1:] or list(default):
        shutil.rmtree(os.path.join(here, name), ignore_errors=True)
        env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
        subprocess.run([sys.executable, os.path.abspath(script), "--one", name], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        normalise(os.path.join(here, name))
        print("wrote", name)
