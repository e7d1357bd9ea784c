"""What the recorder tests share: a recorded dump's tensors by iteration, the plain training loop."""
from __future__ import annotations

from typing import Any, Callable

from debugger.model import open_dump


def tensors_by_iteration(dump: str, rank: int = 0) -> dict[int, dict[tuple[str, str, int], Any]]:
    """iteration -> (node, io, slot) -> TensorRef, over every graph of the rank."""
    r = open_dump(dump).rank(rank)
    out: dict[int, dict] = {}
    for gid in r.graphs:
        for it in r.iterations(gid):
            out.setdefault(it, {}).update(r.tensor_map(gid, it))
    return out


def train_steps(opt: Any, loss_of: Callable[[int], Any], steps: int, rec: Any = None) -> list[float]:
    """``steps`` plain training steps (loss, backward, optimizer step; ``rec.step()`` after each when
    recorded): the losses."""
    losses = []
    for i in range(steps):
        loss = loss_of(i)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if rec is not None:
            rec.step()
    return losses
