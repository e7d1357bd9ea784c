"""What a recording level lets the watchpoints answer, said beside a scan of such iterations.

A PyTorch run recorded at a level coarser than "ops" (formats.records.LEVELS) holds fewer nodes:
its watchpoints answer what those nodes can, and the report says plainly what they cannot.
"""
from __future__ import annotations

from typing import Iterable

from ..formats.records import LEVEL_MODULES, LEVEL_OPS, LEVEL_PARAMETERS
from ..model import Dump
from ..common.selection import ranges_text

CANNOT_ANSWER = {
    LEVEL_PARAMETERS: ("weights, gradients, optimizer state and the loss only: the activation watchpoints "
                       "have nothing to check there, and a NaN's origin is the first non-finite loss, gradient, "
                       "weight or state, not the operator that made it"),
    LEVEL_MODULES: ("one node per module call (its outputs and their gradients): a NaN's origin is the module "
                    "that first went non-finite, not the operator inside it"),
}
HOW_TO_ANSWER = ('record level="ops" for those iterations (a schedule such as '
                 '{"parameters": None, "ops": range(0, N, 100)}, or rec.capture_next(n) when something looks wrong)')


def coarse_iterations(dump: Dump, ranks: Iterable[int] | None, iterations: Iterable[int]) -> dict[str, list[int]]:
    """The scanned iterations recorded at a level coarser than "ops", per level."""
    wanted = set(iterations)
    out: dict[str, set[int]] = {}
    for r in dump.ranks:
        if ranks is not None and r.rank not in set(ranks):
            continue
        for gid in r.graph_ids:
            level = r.graph_level(gid)
            if level != LEVEL_OPS:
                out.setdefault(level, set()).update(i for i in r.iterations(gid) if i in wanted)
    return {level: sorted(its) for level, its in out.items() if its}


def level_notes(levels: dict[str, list[int]]) -> list[str]:
    """One sentence per coarse level a scan met (``ScanResult.levels``): which iterations, and what
    their watchpoints cannot answer."""
    return [f'Iterations {ranges_text(its)} were recorded at level "{level}": '
            f"{CANNOT_ANSWER.get(level, 'fewer nodes than every operator')}; {HOW_TO_ANSWER}."
            for level, its in levels.items()]
