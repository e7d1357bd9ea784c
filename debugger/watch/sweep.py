"""The non-finite sweep: every scan reads every stored floating tensor's NaN/Inf counts, whatever its
watchpoints, so that a NaN is never passed over in silence (issue 37).

Origin finding (the ``overflow`` rule) names the operator that made a NaN when the dump holds it; a kernel
list, an inputs-only dump or a recording level that keeps no operator may not. Then the sweep's finding is
the first tensor of each rank, in iteration and execution order, that holds a non-finite value, with what
the dump says of its origin: made there from finite inputs, data-borne (the input batch), or not in the dump
(its producer was not dumped). It is added only where no non-finite hit of the scan comes at or before it.
"""
from __future__ import annotations

from ..formats.records import Kind
from ..model import Dump, TensorRef
from ..model.graph import Graph
from ..model.locate import position
from ..stats.core import Stats
from .batch import Batch
from .discarded import discarded_constants
from .rules import NONFINITE, Step, make_hit, nonfinite_counts, unsupplied
from .registry import Watchpoint
from .results import Hit, ScanResult, SeriesHit
from .select import in_filters

SWEEP = "nonfinite_sweep"     # the watchpoint name of the sweep's hits (registry: always on)
_STATE_KINDS = (Kind.WEIGHT, Kind.OPTIMIZER_STATE)
_ALWAYS = (Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE, Kind.LOSS, Kind.INPUT)   # never masking


def plan_sweep(step: Step, batch: Batch, wps: list[Watchpoint]) -> None:
    """Choose the step's tensors to sweep, every selected floating tensor that some watchpoint's ``node`` and
    ``scope`` filters admit (a scan narrowed to a region sweeps that region), and ask for their counts
    (shared with the rules' reads)."""
    narrowed = wps and all(w.node or w.scope for w in wps)
    step.swept = [r for r in step.floats if any(in_filters(w, r, step.graph) for w in wps)] if narrowed \
        else step.floats
    for ref in step.swept:
        batch.want_stats(ref)


def sweep_step(step: Step, batch: Batch, result: ScanResult) -> None:
    """Count the step's tensors swept and keep its first non-finite one as the rank's candidate finding."""
    bad = []
    for ref in step.swept:
        stats, err = batch.stats(ref)
        if err or stats is None or unsupplied(batch, ref, NONFINITE):
            continue
        result.swept += 1
        if stats.has_nonfinite:
            bad.append((ref, stats))
    bad = _not_masking(step, bad)
    if not bad or all(ref.kind == Kind.INPUT for ref, _ in bad):
        # inputs alone holding them, nothing computed from them does: bytes that hold no value (an all-gather
        # buffer's padding, an unwritten buffer), which no operator of the step carried on
        return
    listed = {ref.key: i for i, ref in enumerate(step.swept)}    # the reader's order, where no graph orders them
    first, stats = min(bad, key=lambda rs: _order(step, rs[0], listed))
    hit = make_hit(SWEEP, len(result.watchpoints), step, first, nonfinite_counts(stats), {},
                   f"{_origin(step, batch, first)}; {len(bad)} tensor(s) of this iteration hold NaN or Inf")
    key = (step.rank.rank, step.iteration)
    known = result.nonfinite_first.get(key)
    if known is None or hit.sort_key() < known.sort_key():
        result.nonfinite_first[key] = hit


def apply_sweep(result: ScanResult) -> None:
    """Add each rank's first non-finite tensor as a hit where no non-finite hit comes at or before it; a step
    the loss scaler skipped for its infinities (watch/steps.py) is no finding."""
    skipped = {(s["rank"], s["iteration"]) for s in result.skipped_steps if s["cause"] == "loss_scale_overflow"}
    first: dict[int, Hit] = {}
    for (rank, it), hit in sorted(result.nonfinite_first.items()):
        if (rank, it) not in skipped and rank not in first:
            first[rank] = hit
    for rank, hit in first.items():
        told = any(h.rank == rank and h.iteration <= hit.iteration and NONFINITE & h.actual.keys()
                   for h in result.hits)
        if not told:
            result.hits.append(hit)
    result.nonfinite_first.clear()


def series_nonfinite(dump: Dump, ranks: list[int] | None, hits: list[Hit]) -> list[SeriesHit]:
    """The first non-finite loss of each selected rank's recorded per-step series (a step no dumped iteration
    holds), as a series hit of the sweep, where no non-finite hit of the scan comes at or before that step. A
    series whose loss is never finite may not hold the loss: none."""
    import numpy as np

    out = []
    for r in dump.ranks if ranks is None else [dump.rank(k) for k in ranks]:
        series = r.reader.series()
        if series is None:
            continue
        steps, loss = series.scalar("loss")
        bad = np.flatnonzero(~np.isfinite(loss))
        if not len(bad) or not np.isfinite(loss).any():
            continue
        step = int(steps[bad[0]])
        if any(h.rank == r.rank and h.iteration <= step and NONFINITE & h.actual.keys() for h in hits):
            continue
        out.append(SeriesHit(SWEEP, r.rank, step, "loss", "value", float(loss[bad[0]]),
                             "the first non-finite loss of the per-step series"))
    return out


def _not_masking(step: Step, bad: list[tuple[TensorRef, Stats]]) -> list[tuple[TensorRef, Stats]]:
    """The non-finite tensors less an attention mask's: a constant made from no input that holds -inf (or
    +inf) on purpose, a constant's that reaches no value of the training (watch/discarded.py), and the
    forward activations holding infinities but no NaN in a step that makes one (masked scores, which softmax
    turns finite). A NaN, and an infinity in a weight, gradient, optimizer state, loss, input or backward
    tensor, always stay."""
    g = step.graph
    if g is None:
        return bad
    masks = {ref.node for ref, _ in bad if ref.io == "output" and ref.node in g and not g.node(ref.node).inputs
             and ref.kind not in (Kind.INPUT, Kind.LOSS)}
    masks |= discarded_constants(g, {ref.node for ref, _ in bad if ref.io == "output"}, {r.node for r in step.swept})
    if not masks:
        return bad
    def masked(ref: TensorRef, st: Stats) -> bool:
        backward = ref.node in g and g.node(ref.node).is_backward
        return ref.node in masks or (st.nan == 0 and ref.kind not in _ALWAYS and not backward)

    return [(ref, st) for ref, st in bad if not masked(ref, st)]


def _order(step: Step, ref: TensorRef, listed: dict[tuple[str, str, int], int]) -> tuple[int, int, int, int]:
    """Execution order: the node's place, its inputs before its outputs, then the slot; without a graph, the
    order the reader listed the tensors in (a dump's files in the order they were written)."""
    g = step.graph
    if g is None or ref.node not in g:
        return (1 << 30, listed[ref.key], 0, 0)
    return (position(g, ref.node), 0 if ref.io == "input" else 1, ref.slot, listed[ref.key])


def _origin(step: Step, batch: Batch, ref: TensorRef) -> str:
    """What the dump says of where the first non-finite value of a step came from."""
    g = step.graph
    if ref.kind == Kind.INPUT:
        return "data-borne: the input batch holds it (no operator made it)"
    if ref.io == "input":
        if _fed(g, ref):
            return "data-borne: an input the step was fed (the batch) holds it; no recorded operator made it"
        return ("origin not in what was scanned: its producer was not dumped, or is outside the scan's "
                "--node/--scope/--where (first seen as an operator's input)")
    if g is None:
        return ("origin not in the dump: without the graph, what made it cannot be told (first in the files' "
                "order)")
    if ref.kind in _STATE_KINDS:
        return ("origin not in the dump: no dumped operator made this value (it was written by an update or "
                "between steps that the dump does not hold)")
    inputs = _input_values(step, g, ref.node)
    if inputs is None:
        return "origin not in the dump: this operator's inputs were not dumped (it made the value or received it)"
    if all(_finite(batch, r) for r in inputs):
        return "made here from finite inputs (the origin)"
    return "origin not in the dump: an input of this operator was not finite and its producer was not dumped"


def _input_values(step: Step, g: Graph, node: str) -> list[TensorRef] | None:
    """The values an operator read: its dumped inputs, else its data sources' dumped outputs; None when some
    input is in neither (not dumped)."""
    own = [r for (n, io, _), r in step.tmap.items() if n == node and io == "input"]
    if own:
        return own
    out: list[TensorRef] = []
    for src, edge in g.node(node).inputs if node in g else ():
        if edge != "data":
            continue
        made = [r for (n, io, _), r in step.tmap.items() if n == src and io == "output"]
        if not made:
            return None
        out += made
    return out or None


def _fed(g: Graph | None, ref: TensorRef) -> bool:
    """Whether an input tensor is data the step was fed: its source is a data input node, or no recorded node
    while its reader is the step's first operator."""
    if g is None or ref.node not in g:
        return False
    inputs = g.node(ref.node).inputs
    src = inputs[ref.slot][0] if ref.slot < len(inputs) else None
    if src is not None and src in g:
        return g.node(src).kind == Kind.INPUT
    order = g.execution_index
    return bool(order) and order.get(ref.node) == min(order.values())


def _finite(batch: Batch, ref: TensorRef) -> bool:
    stats, err = batch.stats_now(ref)
    return not err and stats is not None and not stats.has_nonfinite


__all__ = ["SWEEP", "apply_sweep", "plan_sweep", "series_nonfinite", "sweep_step"]
