"""A generated dump of many ranks in MindSpore's layout for the 1,000-rank views, with problems
planted: NaN loss in a few ranks (hits and band outliers), a loss far above the others in one (an
outlier without a hit) and a weight that departs in one (the ranks diverge). Kept in /tmp between
runs with the statistics cache beside it, so its triage is computed once."""
from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np

import dumpmaker

VERSION = 2                      # bump when what is written changes
ITERATIONS = 2                   # 0: every rank healthy; 1: the planted problems
LAYERS = (("fc1", 4, 2, None),)  # one Dense layer: few files per rank
NAN_RANKS = (7, 333, 901)        # NaN loss from iteration 1 on
HIGH_RANK = 512                  # loss 50x the others' from iteration 1 on
DIVERGENT_RANK = 640             # its fc1.weight departs at iteration 1
DEPART = 1                       # where the planted problems start


def _values(rank: int, it: int, node: str, io: str, slot: int, default: Any) -> Any:
    if io == "output" and "SoftmaxCrossEntropy" in node and not node.startswith("Gradients") and it >= DEPART:
        if rank in NAN_RANKS:
            return np.full_like(default, np.nan)
        if rank == HIGH_RANK:
            return default * 50 + 50
    if rank == DIVERGENT_RANK and it == DEPART and node == "fc1.weight":
        return default + 1.0
    return None


def ensure_ranks_dump(ranks: int, base: str = "/tmp") -> tuple[str, str]:
    """(dump root, statistics cache folder) of a ``ranks``-rank dump, written once per parameters."""
    root = os.path.join(base, f"tdbg-ranks-{ranks}-v{VERSION}")
    done = os.path.join(root, ".complete")
    if not os.path.exists(done):
        shutil.rmtree(root, ignore_errors=True)
        dumpmaker.make_dump(os.path.join(root, "dump"), ranks=ranks, iterations=ITERATIONS, layers=LAYERS, values=_values)
        open(done, "w").close()
    return os.path.join(root, "dump"), os.path.join(root, "cache")
