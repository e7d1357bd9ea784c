"""Where zeros start: an all-zero tensor computed from an all-zero input is reported where the zeros began.

Zeros propagate the way NaN does. An LSTM's zero initial state times its forget gate is zero at the first
time step; a head initialised to zero (torchvision's ViT) makes every gradient below it exactly zero in
the first step, and so leaves every weight there unchanged by plain SGD; a dead ReLU layer zeroes the
gradients of the layers before it. Reported per tensor, one cause becomes dozens of findings (or a
false alarm on a healthy run); reported where the zeros start, it is one.

The rules, for the conditions in :data:`ZERO_RULES`, on the graph's data edges (a format without them,
msprobe, keeps every finding):
- an all-zero tensor whose node reads an all-zero value (an input captured at the node, or the output of
  the kernel that made the input; not a parameter's output, which is the value after its update) is not
  where the zeros start: ``tensor_all_zero``, ``gradient_vanishing`` and ``activation_dead_layer`` skip it
  (a ReLU after a dead block reads only zeros: the block that died is the finding); the value read must be
  judged itself, or lead back through all-zero backward intermediates (which no rule judges) to one that
  is, else the zeros start where no rule reports them and the tensor is the finding;
- a weight whose gradient in the same iteration is all zero did not change because of that gradient
  (judged itself): ``weight_not_changed`` skips it, and ``tensor_all_zero`` a zero-initialised weight
  that such a gradient left at zero;
- at a level without operator edges an all-zero gradient below a weight found all zero (not a bias: an
  added zero makes no zeros; LoRA's B, a zero-initialised head) is those zeros: ``tensor_all_zero`` and
  ``gradient_vanishing`` skip it, saying so. Level "modules" links a call to the weights it reads and the
  calls it reads from, so the gradient must be of a weight behind the call that read the zeros; level
  "parameters" cannot tell, and skips any all-zero gradient in such an iteration (watch/zeroweights.py).
Each skip is counted once per watchpoint in the scan's ``skipped`` summary.
"""
from __future__ import annotations

from ..formats.records import Kind
from ..model import TensorRef
from .batch import Batch
from .rules import Check, Step
from .results import ScanResult
from .select import is_float
from .zeroweights import behind, inside, weights_found

ZERO_RULES = frozenset({"tensor_all_zero", "gradient_vanishing", "weight_not_changed", "activation_dead_layer"})
FROM_UPSTREAM = "all zero because a value it reads is all zero: reported where the zeros start"
FROM_GRADIENT = "its gradient is all zero in this iteration: judged as the gradient"
FROM_ZERO_WEIGHT = ("all zero in an iteration that found a weight all zero (a zero-initialised weight such as LoRA's B "
                    "zeroes the gradients below it), at a level without operator edges to tell: level \"ops\" does")
BEHIND_ZERO_WEIGHT = ("all zero because a module it feeds read its weight all zero (a zero-initialised weight such "
                      "as LoRA's B or a classifier head passes no gradient back): reported where the zeros start")


def upstream(step: Step, ref: TensorRef) -> list[TensorRef]:
    """The floating-point tensors ``ref``'s node reads (flags such as MatMul's transpose_a are no value it
    computes with): its captured inputs and its producers' outputs (not parameters'); a container's own
    node at level "modules" reads its children's outputs (it returns one of them)."""
    graph = step.graph
    if graph is None or ref.node not in graph:
        return []
    node = ref.node
    if step.inputs_of is None:
        step.inputs_of = {}
        for (n, io, _), r in step.tmap.items():
            if io == "input":
                step.inputs_of.setdefault(n, []).append(r)
    ins = graph.record_of(node).inputs
    # a weight's gradient node keeps the weight as read (its previous value): no value the gradient is made from
    out = [r for r in step.inputs_of.get(node, ())
           if not (ref.kind == Kind.GRADIENT and r.slot < len(ins) and ins[r.slot][0] == ref.param)]
    for src, _ in ins:
        if src in graph and graph.record_of(src).is_routing:   # a view of a weight (t, view): what it read
            out.extend(step.inputs_of.get(src, ()))
    for src in list(graph.value_inputs(node)) + inside(graph, node):
        src = graph.value_source(src) if src in graph else src     # through routing (AccumulateGrad's detach)
        if not src or src not in graph or graph.record_of(src).is_parameter:
            continue
        for slot in range(max(1, len(graph.record_of(src).outputs))):
            r = step.tmap.get((src, "output", slot))
            if r is not None:
                out.append(r)
    return [r for r in out if is_float(r, graph)]


def gradient_of(step: Step, ref: TensorRef) -> TensorRef | None:
    """The gradient of the weight ``ref`` in this step (None when the step has none)."""
    if not ref.param:
        return None
    return next((g for g in step.outputs.get(Kind.GRADIENT, ()) if g.param == ref.param), None)


def plan_upstream(step: Step, batch: Batch) -> None:
    """Ask for the statistics the zero rules read, when a watchpoint of the step uses them."""
    gradients_checked = False
    for item in step.planned:
        if isinstance(item, Check) and item.wp.name in ZERO_RULES:
            grad = gradient_of(step, item.ref) if item.ref.kind == Kind.WEIGHT else None
            for r in upstream(step, item.ref) + ([grad] if grad is not None else []):
                batch.want_stats(r)
            gradients_checked = gradients_checked or item.ref.kind == Kind.GRADIENT
    if gradients_checked:
        for _, r in weights_found(step):
            batch.want_stats(r)


def _all_zero(batch: Batch, ref: TensorRef | None, now: bool = False) -> bool:
    """Whether ``ref`` is all zero (``now``: its statistics read here if no step asked for them)."""
    if ref is None:
        return False
    stats, err = batch.stats_now(ref) if now else batch.stats(ref)
    return not err and stats is not None and stats.count > 0 and stats.zeros == stats.count


def apply_zero_origins(step: Step, batch: Batch, result: ScanResult, first_hit: int) -> None:
    """Move the step's hits (from ``first_hit`` on) that zeros made upstream explain to ``skipped``."""
    if step.graph is None or len(result.hits) == first_hit:
        return
    keep = []
    for h in result.hits[first_hit:]:
        ref = step.tmap.get((h.node, h.io, h.slot))
        reason = None if ref is None or h.watchpoint not in ZERO_RULES else _explained(step, batch, h.watchpoint, ref)
        if reason is None:
            keep.append(h)
        else:
            result.skip(h.watchpoint, reason, h.rank, h.iteration, h.node)
    result.hits[first_hit:] = keep


def _explained(step: Step, batch: Batch, watchpoint: str, ref: TensorRef) -> str | None:
    if watchpoint == "weight_not_changed" or ref.kind == Kind.WEIGHT:
        return FROM_GRADIENT if _all_zero(batch, gradient_of(step, ref)) else None
    if _all_zero(batch, ref) and _zeros_from_upstream(step, batch, ref):
        return FROM_UPSTREAM
    if ref.kind == Kind.GRADIENT and _all_zero(batch, ref):
        return _from_zero_weight(step, batch, ref)
    return None


def _zeros_from_upstream(step: Step, batch: Batch, ref: TensorRef) -> bool:
    """Whether the zeros of all-zero ``ref`` come from an all-zero value its node reads that is judged itself,
    found back through the all-zero backward intermediates between them: no rule judges those (they follow
    from a zero above them), so zeros that start at one (a router's renormalised top-1 weight, x / x.sum(),
    has the gradient x' - x' = 0 exactly) are reported at the first tensor below that is judged, not skipped
    on the way to an origin no rule reports."""
    seen = {ref.identity}
    todo = [ref]
    while todo:
        at = todo.pop()
        for up in upstream(step, at):
            # what ``ref`` reads was planned (plan_upstream); beyond it, read only where the zeros lead
            if up.identity in seen or not _all_zero(batch, up, now=at is not ref):
                continue
            seen.add(up.identity)
            if not _backward_intermediate(step, up) or _reads_zero_weight(step, batch, up.node):
                return True
            todo.append(up)
    return False


def _reads_zero_weight(step: Step, batch: Batch, node: str) -> bool:
    """Whether backward ``node`` reads a weight that the step read all zero (a zero-initialised head or LoRA B
    passes no gradient back): its zeros start at that weight, whose value as read upstream() leaves out (a
    parameter's output is its value after the update) and which is found at a reader's captured input."""
    graph = step.graph
    assert graph is not None
    weights = set()
    for src in list(graph.value_inputs(node)) + [s for s, _ in graph.record_of(node).inputs]:
        src = graph.value_source(src) if src in graph else src
        if src and src in graph and graph.record_of(src).is_parameter:
            weights.add(src)
    inputs_of = step.inputs_of or {}      # made by upstream(), which the walk called first
    return any(r.slot < len(graph.record_of(reader).inputs) and graph.record_of(reader).inputs[r.slot][0] == w
               and _all_zero(batch, r, now=True)
               for w in weights for reader in graph.successors(w) for r in inputs_of.get(reader, ()))


def _backward_intermediate(step: Step, ref: TensorRef) -> bool:
    """A tensor of the backward pass that is no weight's gradient (the gradient of an activation)."""
    graph = step.graph
    return ref.kind == Kind.OTHER and graph is not None and ref.node in graph and graph.record_of(ref.node).is_backward


def _from_zero_weight(step: Step, batch: Batch, ref: TensorRef) -> str | None:
    """Level "modules": a module call found its weight all zero and ``ref``'s weight is behind it; level
    "parameters": some weight was found all zero."""
    calls = {call for call, w in weights_found(step) if _all_zero(batch, w)}
    if None in calls:
        return FROM_ZERO_WEIGHT
    graph = step.graph
    if graph is not None and any(ref.param in behind(graph, call) for call in calls if call is not None):
        return BEHIND_ZERO_WEIGHT
    return None
