"""Bookkeeping: values a training loop keeps beside the training, which the zero and overflow rules leave out.

A loop recorded at every operator also records what it does around the training: nanoGPT's
``losses = torch.zeros(eval_iters)`` that an evaluation fills with ``loss.item()``, the Hugging Face
Trainer's ``tr_loss = torch.tensor(0.0)`` that accumulates ``loss.detach()`` and is reset with
``tr_loss -= tr_loss``. Such a tensor is all zero on purpose, and a NaN it accumulates is the loss's,
found at the loss. Judged as training values they make a healthy run fail.

A node is bookkeeping, on a graph with data edges (a loss that reads something), when
- no value it reads comes from a trained input: a weight, optimizer state or buffer, a backward node, or
  a data input (an input that reaches the loss or is read with the model's weights as a forward pass reads
  them, not as an optimizer update of the iteration left them: an EMA's shadow copies, read with the updated
  weights after the step, are the loop's own; a tensor the loop made
  outside the recorded iteration counts as an input, not as a buffer: timm's LAMB keeps its step counter,
  ``torch.tensor(0.0)`` at the first step, in its parameter groups and reads it only to count); a value taken off
  the loss's own computation (``loss.detach()``, the Trainer's detached step loss) counts as made from
  no trained input: the loss and what computes it are judged themselves; so does a value detached from a
  computation that reaches no loss (Lightning's ``self.log("val_loss", ...)`` of a validation loss, summed
  into a metric that starts at zero): the evaluation forward and its loss are judged themselves;
- and its value never reaches a loss.
The evaluation forward pass reads the weights, so its activations stay checked (a dead layer there is
a dead layer). Decided once per graph (``Graph.derived``).
"""
from __future__ import annotations

from collections import deque
from typing import Iterable

from ..formats.records import Kind
from ..model.graph import Graph

BOOKKEEPING = ("bookkeeping: made from no trained input (weight, state, data) and never read by the loss "
               "(an evaluation buffer, a loss accumulator)")
# The rules that leave bookkeeping out: an all-zero or non-finite accumulator is no finding of its own.
BOOKKEEPING_RULES = frozenset({"tensor_all_zero", "overflow", "tensor_overflow", "tensor_exploding"})


def bookkeeping(graph: Graph | None) -> frozenset[str]:
    """The graph's bookkeeping nodes (see the module's docstring); empty on a graph without data edges."""
    if graph is None:
        return frozenset()
    return graph.derived(bookkeeping, _build)


def _build(graph: Graph) -> frozenset[str]:
    reads = {n: [src for src, edge in graph.record_of(n).inputs if edge == "data" and src in graph] for n in graph}
    losses = [n for n in graph if graph.record_of(n).kind == Kind.LOSS]
    if not any(reads[n] for n in losses):      # no data edges into the loss: reachability says nothing
        return frozenset()
    readers: dict[str, list[str]] = {}
    for n, srcs in reads.items():
        for src in srcs:
            readers.setdefault(src, []).append(n)
    to_loss = _closure(losses, reads, stop=set())
    sources = [n for n in graph if _trained_source(graph, n)]
    # an operator on the loss's way that reads a weight itself (MindSpore's Load of a parameter, a view
    # or matmul of it) is made from it: what else reads its value (the optimizer's weight decay reading
    # the Load) is made from a trained input, not taken off the loss
    trained = set(sources)
    sources += [n for n in to_loss if n not in trained and any(src in trained for src in reads[n])]
    # a value taken off the loss's computation (a detached loss, a logged output) is not made from a
    # trained input: the training values it copies are judged where they are made
    stop = to_loss - set(sources)
    # so is a value detached from a computation no backward runs through (a logged validation loss): the
    # evaluation values it copies are judged where they are made; what reads it was never trained
    stop |= {n for n in graph if graph.record_of(n).stops_gradient and not graph.record_of(n).is_backward
             and n not in to_loss}
    model = _closure(sources, readers, stop)
    # "read with the model's weights" means as a forward pass reads them, not through an optimizer's update
    # of this iteration: an EMA of the weights (diffusers' EMAModel, ``shadow.lerp_(p, 1 - decay)`` after
    # ``optimizer.step()``) reads its shadow copies, tensors the loop made earlier, with the updated weights
    updates = {n for n in graph if graph.record_of(n).input_roles}
    forward = _closure(sources, readers, stop | updates) - updates
    data = [n for n in graph if _input(graph, n)
            and (n in to_loss or any(r in forward for r in readers.get(n, ())))]
    trained = model | _closure(data, readers, stop)
    # no constant (a graph's constants are judged apart), no weight or state: values a loop made
    return frozenset(n for n in graph if n not in to_loss and n not in trained and _made(graph, n))


def _made(graph: Graph, name: str) -> bool:
    """A value the loop made: an operator's output or an input it made earlier (not a constant, weight,
    buffer or optimizer state)."""
    rec = graph.record_of(name)
    return _input(graph, name) or not rec.is_parameter and rec.kind != Kind.CONSTANT


def _input(graph: Graph, name: str) -> bool:
    """A data input, or a tensor from outside the iteration first read outside the forward pass (a node
    ``Input`` of kind other): neither is a weight, state or buffer."""
    rec = graph.record_of(name)
    return rec.kind == Kind.INPUT or rec.is_parameter and rec.op_type == "Input" and rec.kind == Kind.OTHER


def _trained_source(graph: Graph, name: str) -> bool:
    """A weight, optimizer state or buffer (a parameter node that is no input), or a backward node."""
    rec = graph.record_of(name)
    if rec.is_backward:
        return True
    return rec.is_parameter and rec.kind != Kind.CONSTANT and not _input(graph, name)


def _closure(start: Iterable[str], edges: dict[str, list[str]], stop: set[str]) -> set[str]:
    """Every node reached from ``start`` along ``edges`` (``start`` included), not going on from ``stop``."""
    seen = set(start)
    todo = deque(seen)
    while todo:
        n = todo.popleft()
        if n in stop:
            continue
        for m in edges.get(n, ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen
