"""A gradient small because a tiny multiplier scales its branch: layer scale, judged without it.

ConvNeXt (timm's default ``ls_init_value=1e-6``), CaiT and DeiT-III multiply a residual branch by a
learned per-channel ``gamma`` that starts tiny: ``x + gamma * branch(x)``. Every gradient inside the
branch is scaled by gamma, so at the first steps the gradients of the branch's first layers sit below
``gradient_vanishing``'s threshold (1e-9) on a healthy run, and grow as gamma does. That is no vanishing
gradient: divided by the multiplier it would be far above the threshold.

The rule, at every level (a parameter's module is in its name): a ``gradient_vanishing`` hit on the
gradient of a weight in module ``m.sub`` is skipped, saying why, when the step found a per-channel weight
of the enclosing module ``m`` itself (``m.gamma``: one dimension, not a bias, not all zero) with mean
|w| at most :data:`TINY`, and the gradient's mean |g| divided by that mean |w| reaches the threshold. A
gradient that vanishes by more than the multiplier explains is still found, and a tiny weight that
multiplies no branch (a ViT's class token, drawn at std 1e-6, shape (1, 1, C)) explains nothing.
"""
from __future__ import annotations

from ..formats.records import Kind, OutputType
from ..model import TensorRef
from .batch import Batch
from .layers import layer_of
from .results import Hit, ScanResult
from .rules import Check, Step

RULE = "gradient_vanishing"
TINY = 1e-3      # a layer scale's start (1e-6 .. 1e-4); trained weights of the widest layers stay above
SCALED = ("small because a tiny multiplier of its enclosing module (a layer scale such as ConvNeXt's gamma, "
          "starting at 1e-6) scales it: divided by that multiplier it is not vanishing")


def multipliers(step: Step) -> dict[str, TensorRef]:
    """The per-channel (one-dimensional) non-bias weights of the step as it found them (a captured input whose
    edge is the weight's node: the value before the step's update), by parameter name."""
    graph = step.graph
    out: dict[str, TensorRef] = {}
    if graph is None:
        return out
    for (node, io, slot), r in step.tmap.items():
        if io != "input" or node not in graph:
            continue
        inputs = graph.record_of(node).inputs
        src = inputs[slot][0] if slot < len(inputs) else None
        if src is not None and src in graph:
            rec = graph.record_of(src)
            if rec.is_parameter and rec.kind == Kind.WEIGHT and rec.param and not rec.param.endswith("bias") \
                    and _per_channel(rec.outputs):
                out.setdefault(rec.param, r)
    return out


def _per_channel(outputs: list[OutputType]) -> bool:
    shape = outputs[0].shape if outputs else None
    return shape is not None and len(shape) == 1


def _enclosing(found: dict[str, TensorRef], param: str) -> list[TensorRef]:
    """The found weights of a module enclosing ``param``'s module (its own weights: ``m.gamma`` for ``m.sub.weight``)."""
    layer = layer_of(param)
    return [r for name, r in found.items() if layer_of(name) != name and layer.startswith(layer_of(name) + ".")]


def plan_layer_scale(step: Step, batch: Batch) -> None:
    """Ask for the statistics of the weights that may scale a checked gradient (those of a module enclosing it)."""
    checked = {item.ref.param for item in step.planned if isinstance(item, Check) and item.wp.name == RULE
               and item.ref.kind == Kind.GRADIENT and item.ref.param}
    if not checked:
        return
    found = multipliers(step)
    wanted = {id(r): r for param in checked for r in _enclosing(found, param)}
    for r in wanted.values():
        batch.want_stats(r)


def apply_layer_scale(step: Step, batch: Batch, result: ScanResult, first_hit: int) -> None:
    """Move the step's ``gradient_vanishing`` hits (from ``first_hit`` on) that a tiny multiplier explains
    to ``skipped``."""
    if not any(h.watchpoint == RULE for h in result.hits[first_hit:]):
        return
    found = multipliers(step)
    keep = []
    for h in result.hits[first_hit:]:
        if h.watchpoint == RULE and h.kind == Kind.GRADIENT and h.param and _scaled(found, batch, h):
            result.skip(h.watchpoint, SCALED, h.rank, h.iteration, h.node)
        else:
            keep.append(h)
    result.hits[first_hit:] = keep


def _scaled(found: dict[str, TensorRef], batch: Batch, h: Hit) -> bool:
    g, limit = h.actual.get("abs_mean_lt"), h.threshold.get("abs_mean_lt")    # mean |g| and its threshold
    if g is None or limit is None or h.param is None:
        return False
    for r in _enclosing(found, h.param):
        stats, err = batch.stats(r)
        if err or stats is None or not stats.abs_mean or stats.zeros == stats.count:
            continue
        if stats.abs_mean <= TINY and g / stats.abs_mean >= limit:
            return True
    return False
