"""Whole-layer watchpoints: a hit only when every checked parameter of a layer meets the condition.

A layer is the parameters that share a module path (``encoder.0.attn.key`` for ``...key.weight`` and
``...key.bias``). Some parameters are inert by construction while their layer trains: a key projection's
bias (softmax ignores a shift shared by every key: its gradient is rounding noise, 1e-14), a bias just
before a normalisation. Judged alone they look vanishing or frozen in every healthy run; judged with
their layer they do not, and a layer whose every weight vanishes or stands still still fires.
"""
from __future__ import annotations

from .rules import Check, Step
from .results import ScanResult

WHOLE_LAYER = "whole_layer"


def layer_of(param: str) -> str:
    """The module path of a parameter name (the name itself when it has no module)."""
    return param.rsplit(".", 1)[0] if "." in param else param


def apply_whole_layer(step: Step, result: ScanResult, first_hit: int) -> None:
    """Drop the step's hits (those from ``first_hit`` on) of whole-layer watchpoints whose layer has a
    checked parameter that did not hit."""
    orders = {item.order for item in step.planned if isinstance(item, Check)
              and item.wp.params.get(WHOLE_LAYER, 0.0) >= 0.5}
    if not orders:
        return
    checked: dict[tuple[int, str], set[str]] = {}
    for item in step.planned:
        if isinstance(item, Check) and item.order in orders and item.ref.param:
            checked.setdefault((item.order, layer_of(item.ref.param)), set()).add(item.ref.param)
    new = result.hits[first_hit:]
    hit: dict[tuple[int, str], set[str]] = {}
    for h in new:
        if h.order in orders and h.param:
            hit.setdefault((h.order, layer_of(h.param)), set()).add(h.param)
    partial = {key for key, params in hit.items() if params != checked.get(key, params)}
    if partial:
        result.hits[first_hit:] = [h for h in new if not (h.order in orders and h.param
                                                          and (h.order, layer_of(h.param)) in partial)]
