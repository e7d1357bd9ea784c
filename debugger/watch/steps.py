"""Optimizer steps that did not run: their weights are not "unchanged", and the non-finite gradients
of a step the loss scaler skipped are a loss-scale overflow, not a training failure.

Facts come from the dump (``Rank.iteration_facts``: the recorder notes which optimizers' ``step()``
ran and whether a loss scaler checked the gradients); formats that record none are left as they are.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from ..formats.records import IterationFacts, Kind
from ..model import Rank
from ..common.selection import ranges_text
from .registry import CONDITIONS, PREVIOUS
from .results import ErrorRecord, ScanResult

_NONFINITE_RULES = ("nonfinite", "overflow_origin")
LOSS_SCALE_OVERFLOW = "loss_scale_overflow"
NOT_STEPPED = "optimizer_step_not_run"
LR_ZERO = "learning_rate_zero"
ALL_ZERO = "tensor_all_zero"


def apply_step_facts(result: ScanResult, ranks: Iterable[Rank]) -> None:
    """Drop what a skipped optimizer step explains from ``result`` and list the skipped steps."""
    known = {(r.rank, it): (r, r.iteration_facts(it)) for r in ranks for it in result.iterations}
    # a weight at learning rate 0 in every scanned step never trains: that is a finding, not a warm-up
    never: dict[int, frozenset[str]] = {}
    for (rank_id, _), (_, f) in known.items():
        lr_zero = f.lr_zero if f is not None else frozenset()
        never[rank_id] = never.get(rank_id, lr_zero) & lr_zero
    facts = {key: (r, replace(f, lr_zero=f.lr_zero - never[key[0]])) for key, (r, f) in known.items()
             if f is not None and (f.not_stepped or f.lr_zero - never[key[0]])}
    if not facts:
        return
    for (rank_id, it), (rank, f) in sorted(facts.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        mine = [h for h in result.hits if (h.rank, h.iteration) == (rank_id, it)]
        nonfinite = [h for h in mine if _rule(h.watchpoint) in _NONFINITE_RULES]
        overflow = f.loss_scaler and all(_in_backward(rank, h.graph, h.node, h.kind) for h in nonfinite)
        still = f.not_stepped | f.lr_zero       # weights the step did not move, by design
        drop = {id(h) for h in mine if _left_as_it_was(h.watchpoint) and h.kind == Kind.WEIGHT and h.param in still}
        if overflow:
            drop |= {id(h) for h in nonfinite}
        result.hits = [h for h in result.hits if id(h) not in drop]
        result.errors = [e for e in result.errors if not _explained_error(rank, e, rank_id, it, f, overflow)]
        result.skipped_steps.append({"rank": rank_id, "iteration": it,
                                     "cause": _cause(f, overflow), "weights": len(still),
                                     "nonfinite_hits": len(nonfinite) if overflow else 0})


def _cause(f: IterationFacts, overflow: bool) -> str:
    """Why the step left its weights as they were: a loss-scale overflow, a step that did not run, or one
    with learning rate 0 in every group (a warm-up's first step)."""
    if overflow and f.loss_scaler:
        return LOSS_SCALE_OVERFLOW
    return NOT_STEPPED if f.not_stepped else LR_ZERO


def _rule(watchpoint: str) -> str:
    c = CONDITIONS.get(watchpoint)
    return c.rule if c is not None else ""


def _about_change(watchpoint: str) -> bool:
    """A condition comparing a weight with its previous value (unchanged, update ratio)."""
    c = CONDITIONS.get(watchpoint)
    return c is not None and c.needs == PREVIOUS


def _left_as_it_was(watchpoint: str) -> bool:
    """A condition a weight whose step did not run cannot fail by the training's fault: a change condition,
    or all zero (the weight is still as it started, a LayerNorm's zero bias before its first step)."""
    return _about_change(watchpoint) or watchpoint == ALL_ZERO


def _in_backward(rank: Rank, graph_id: int, name: str, kind: str) -> bool:
    """The hit is on a backward kernel, a gradient or a kernel updating gradients in place (the loss
    scaler's unscale): what a loss-scale overflow makes non-finite."""
    if kind == Kind.GRADIENT:
        return True
    graph = rank.graphs.get(graph_id)
    if graph is None or name not in graph:
        return False
    node = graph.node(name)
    return node.is_backward or "gradient" in node.input_roles


def _explained_error(rank: Rank, e: ErrorRecord, rank_id: int, it: int, f: IterationFacts, overflow: bool) -> bool:
    """An error record of a change condition on a weight whose step did not run (nothing to check),
    or, in a loss-scale overflow, one on the backward pass's non-finite tensors."""
    if (e.rank, e.iteration) != (rank_id, it):
        return False
    if overflow and _in_backward(rank, e.graph, e.node, ""):
        return True
    if not _about_change(e.watchpoint):
        return False
    graph = rank.graphs.get(e.graph)
    node: Any = graph.get(e.node) if graph is not None else None
    return node is not None and (node.param in f.not_stepped or node.param in f.lr_zero)


def describe_skipped(skipped: list[dict[str, Any]]) -> list[str]:
    """Summary lines: how many steps were skipped, why, and where."""
    lines = []
    for cause, text in ((LOSS_SCALE_OVERFLOW, "the loss scaler skipped the step (a loss-scale overflow: non-finite "
                                              "gradients, the scale is lowered; not a training failure)"),
                        (NOT_STEPPED, "the optimizer's step() did not run"),
                        (LR_ZERO, "the optimizer stepped with learning rate 0 in every parameter group (a "
                                  "warm-up from 0): its weights were not meant to move")):
        done = "at learning rate 0" if cause == LR_ZERO else "skipped"
        its: dict[int, list[int]] = {}
        for s in skipped:
            if s["cause"] == cause:
                its.setdefault(s["rank"], []).append(s["iteration"])
        if its:
            where = "; ".join(f"rank {r}: iterations {ranges_text(v)}" for r, v in sorted(its.items()))
            lines.append(f"{sum(map(len, its.values()))} optimizer step(s) {done}, {cause}: {text} ({where}); "
                         "their weights are not reported as unchanged")
            every = {_every_kth(v) for v in its.values()} if cause == NOT_STEPPED else set()
            if len(every) == 1 and None not in every:
                lines.append(f"only every {every.pop()}th iteration ran an optimizer step, as if rec.step() ran once per "
                             "micro-batch of gradient accumulation: call it once per optimizer step, after "
                             "optimizer.step()")
    return lines


def _every_kth(skipped: list[int]) -> int | None:
    """k when the iterations between the first and last skipped one that did step come every k-th (k >= 2,
    at least three of them, every iteration between them skipped): the pattern of a recorder stepped per
    micro-batch; else None."""
    its = sorted(set(skipped))
    stepped = sorted(set(range(its[0], its[-1] + 1)) - set(its)) if its else []
    gaps = {b - a for a, b in zip(stepped, stepped[1:])}
    if len(stepped) < 3 or len(gaps) != 1:
        return None
    k = gaps.pop()
    return k if k >= 2 else None
