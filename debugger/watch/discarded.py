"""Non-finite values a model computes from constants alone and then discards, which neither the overflow rule
nor the non-finite sweep reports.

T5's relative position buckets take ``torch.log(relative_position / max_exact)``, which is ``-inf`` where the
position is 0; the result is cast to an integer index and ``torch.where`` keeps the other branch there. The
recorder marks such tensors kind ``constant`` (computed from constants alone: no weight, state or data). Their
non-finite values are a finding only when they reach the training: a tensor that is not a constant holding a
non-finite value computed from them (a positional table of ``inf`` added to the embeddings), where the
constant stays the origin. A reader whose float output was not stored could carry them on unseen: the
constant is then judged as before.
"""
from __future__ import annotations

from ..formats.records import Kind
from ..model.graph import Graph


def discarded_constants(graph: Graph | None, nonfinite: set[str], read: set[str]) -> frozenset[str]:
    """The constant nodes among ``nonfinite`` (nodes whose output holds NaN/Inf) whose non-finite values reach
    only other constants before turning finite or integer; ``read`` holds the nodes whose outputs were read."""
    if graph is None:
        return frozenset()
    constants = {n for n in nonfinite if n in graph and graph.record_of(n).kind == Kind.CONSTANT}
    return frozenset(n for n in constants if _stays_in_constants(graph, n, nonfinite, read))


def _stays_in_constants(graph: Graph, node: str, nonfinite: set[str], read: set[str]) -> bool:
    """Whether every reader of ``node`` (and of the non-finite readers after it) that holds a non-finite
    output is a constant, and none with a float output went unread."""
    seen, todo = {node}, [node]
    while todo:
        for m in graph.successors(todo.pop()):
            if m in seen:
                continue
            seen.add(m)
            rec = graph.record_of(m)
            if m in nonfinite:
                if rec.kind != Kind.CONSTANT:
                    return False     # it reached the training: the constant is where the non-finite value started
                todo.append(m)
            elif m not in read and any(_is_float(o.dtype) for o in rec.outputs):
                return False
    return True


def _is_float(dtype: str | None) -> bool:
    """A floating dtype name as the dump writes it (numpy's); an unknown one counts as float."""
    return dtype is None or dtype.startswith(("float", "bfloat", "complex"))
