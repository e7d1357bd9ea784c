"""One notion of "the previous value" of a tensor, for the watchpoints and the views alike.

The previous value is the same tensor in the nearest earlier run of its graph. A weight has one
more: in the first dumped iteration, where no earlier run exists, it is the value the weight had
before that iteration's update, which its first forward reader read (MindSpore dumps a weight
after the optimizer's in-place update; the forward kernels of iteration i read the value of i-1).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..formats.records import Kind
from .locate import readers
from .rank import Rank
from .tensors import TensorRef

BEFORE_UPDATE, EARLIER_RUN = "before_update", "earlier_run"


@dataclass(frozen=True)
class Previous:
    """The previous value of a tensor and where it came from."""

    ref: TensorRef
    how: str            # EARLIER_RUN | BEFORE_UPDATE
    steps: int = 1      # training steps between the two values: more than 1 over iterations the dump lacks


def value_before_update(rank: Rank, ref: TensorRef) -> TensorRef | None:
    """A weight's value before its iteration's update: what its first forward reader read."""
    graph = rank.graphs.get(ref.graph_id)
    if graph is None or ref.kind != Kind.WEIGHT:
        return None
    tmap = rank.tensor_map(ref.graph_id, ref.iteration)
    for kernel, slot in readers(graph).get(ref.node, []):
        cand = tmap.get((kernel, "input", slot))
        if cand is not None:
            return cand
    return None


def previous_value(rank: Rank, ref: TensorRef) -> tuple[Previous | None, str]:
    """(the previous value, "") or (None, why there is none). Over iterations the dump lacks (``iteration
    "0|2-3"``), a weight's value before this iteration's update, when dumped, is the one step's previous
    value; else the earlier run's value is returned with the steps between (:attr:`Previous.steps`)."""
    prev_it = rank.previous_iteration(ref.graph_id, ref.iteration)
    steps = gap_steps(rank, ref.graph_id, prev_it, ref.iteration)
    if prev_it is None or steps > 1:
        before = value_before_update(rank, ref)
        if before is not None:
            return Previous(before, BEFORE_UPDATE), ""
    prev, why = _in_iteration(rank, ref, prev_it)
    return (Previous(prev.ref, prev.how, steps), why) if prev is not None and steps > 1 else (prev, why)


def gap_steps(rank: Rank, graph_id: int, prev_it: int | None, iteration: int) -> int:
    """The training steps from ``prev_it`` to ``iteration``, the graph's run before it, when the dump holds no
    iteration between them (another graph that ran one means this graph did not), else 1."""
    if prev_it is None or iteration - prev_it <= 1:
        return 1
    for gid in rank.graph_ids:
        its = rank.iterations(gid) if gid != graph_id else []
        at = bisect.bisect_right(its, prev_it)
        if at < len(its) and its[at] < iteration:
            return 1
    return iteration - prev_it


def first_value(rank: Rank, ref: TensorRef) -> bool:
    """Whether ``ref`` has no earlier value because it did not exist before: the run's first iteration, or
    the dump holds the iteration before it and none of its graphs holds this tensor (a layer added mid-run)."""
    if ref.iteration == 0:
        return True
    before = ref.iteration - 1
    held = [gid for gid in rank.graph_ids if before in rank.iterations(gid)]

    def same(r: TensorRef) -> bool:       # the tensor, or (another graph's node of) the same parameter's
        return r.node == ref.node or (ref.param is not None and r.param == ref.param and r.kind == ref.kind)

    return bool(held) and not any(same(r) for gid in held for r in rank.tensor_map(gid, before).values())


def previous_dumped(rank: Rank, ref: TensorRef) -> tuple[Previous | None, str]:
    """The same tensor in the nearest earlier dumped iteration, whatever ran between (SageMaker's
    notion of the last steps: no value before the update stands in)."""
    prev_it = max((i for i in rank.iterations(ref.graph_id) if i < ref.iteration), default=None)
    return _in_iteration(rank, ref, prev_it)


def earlier_values(rank: Rank, ref: TensorRef, count: int, dumped: bool = False,
                   spans: list[int] | None = None) -> tuple[list[TensorRef] | None, str]:
    """([ref, its previous value, the one before ...], "") up to ``count`` values, each the previous
    value of the one before it (``dumped``: :func:`previous_dumped`), or (None, why one is missing);
    ``spans`` gets the training steps between each value and the next (:attr:`Previous.steps`).

    A value from before the update ends the chain: nothing earlier belongs to the same run."""
    chain = [ref]
    how = EARLIER_RUN
    while len(chain) < count and how == EARLIER_RUN:
        prev, why = (previous_dumped if dumped else previous_value)(rank, chain[-1])
        if prev is None:
            if len(chain) > 1 and why == _NO_PREVIOUS:
                why = f"needs {count} dumped iterations, only {len(chain)} up to this one"
            return None, why
        chain.append(prev.ref)
        if spans is not None:
            spans.append(prev.steps)
        how = prev.how
    return chain, ""


_NO_PREVIOUS = "no previous iteration"


def _in_iteration(rank: Rank, ref: TensorRef, iteration: int | None) -> tuple[Previous | None, str]:
    """The same tensor in ``iteration`` (an earlier run of its graph), or why there is none."""
    if iteration is None:
        return None, _NO_PREVIOUS
    prev = rank.tensor_map(ref.graph_id, iteration).get(ref.key)
    if prev is None:
        return None, f"no previous value: iteration {iteration} has no dump of this tensor"
    return Previous(prev, EARLIER_RUN), ""
