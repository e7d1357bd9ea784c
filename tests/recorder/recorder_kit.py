"""What the recorder tests share: a recorded dump's tensors by iteration."""
from __future__ import annotations

from typing import Any

from debugger.model import open_dump


def tensors_by_iteration(dump: str, rank: int = 0) -> dict[int, dict[tuple[str, str, int], Any]]:
    """iteration -> (node, io, slot) -> TensorRef, over every graph of the rank."""
    r = open_dump(dump).rank(rank)
    out: dict[int, dict] = {}
    for gid in r.graphs:
        for it in r.iterations(gid):
            out.setdefault(it, {}).update(r.tensor_map(gid, it))
    return out
