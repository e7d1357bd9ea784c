"""Level "ops" on code compiled with the ``"tdbg"`` backend: the compiled program's operators as nodes.

At an "ops" iteration of a compiled model the recorder records the compiled call's boundary (level
"modules") and takes what the backend's tapped builds return (debugger.torch.graphtaps): each graph
operator becomes a node ``{scope}/{op}-{k}`` in the scope of its module (a backward operator under
``backward/``, as at level "ops"), with its source frames, edges from the graph's own operators, and
for the graph's inputs from whatever made them (a parameter, an earlier graph's output, the data);
its statistics are the row the compiled program computed.
"""
from __future__ import annotations

import os
from typing import Any

import torch

from ..formats.records import Kind, NodeRecord, OutputType, StackFrame
from . import activations as A
from . import capture as C
from . import wrappers as W
from .devstats import NCOLS
from .graphtaps import FAILED, SHAPE_DIMS, TAKER, Tap, TappedGraph, parse_stack
from .stacks import MAX_FRAMES, is_user_file


class GraphNodes:
    """A Recorder's nodes from compiled graphs: what the ``"tdbg"`` backend's tapped builds report at the
    recorder's "ops" iterations (the iteration being recorded is the Recorder's)."""

    def __init__(self, rec: Any) -> None:
        self.rec = rec
        self.taking = False     # this iteration takes the compiled graphs' operators
        self.tapped = 0         # graphs whose operators this iteration recorded
        self.tapped_every = False       # one of them tapped every operator (the backend's operators="all")
        self._tap_base = "model"        # the scope the last forward graph ran in

    def takes_graph(self) -> bool:
        """Whether a compiled graph run now should run its tapped build (an "ops" iteration)."""
        return self.taking and self.rec._graph is not None and not self.rec._busy

    def take(self, on: bool) -> None:
        """Be (or stop being) what the ``"tdbg"`` backend's graphs report to; a new iteration's count."""
        self.taking = on
        self.tapped = 0
        if on:
            TAKER[0] = self
        elif TAKER[0] is self:
            TAKER[0] = None

    def _compiled_scope(self) -> str:
        """The scope of a graph run outside any module call the hooks saw: that of the compiled module
        (``m.compile()`` runs with no hook), else global (a compiled function)."""
        found = W.runs_compiled(self.rec._root, self.rec.model)
        if not found:
            return C.GLOBAL_SCOPE
        if found[0] == "model":
            return "model"
        return f"model/{found[0]}-{C.class_name(self.rec._root.get_submodule(found[0]))}"

    def _tap_record(self, g: C.IterationGraph, tap: Tap, base: str, forward: bool, ins: list[str]) -> NodeRecord:
        """The node of a tapped operator, added to the iteration (its outputs filled by the caller)."""
        scope = _scope(tap, base)
        name = g.fresh_name(scope, tap.op)
        activation = A.activation_of(tap.op, (), {}) if forward else ""
        rec = NodeRecord(name, tap.op, scope, inputs=[(s, "data") for s in ins], stack=_frames(tap, forward),
                         module=tap.module, kind=Kind.ACTIVATION if activation else Kind.OTHER,
                         is_backward=not forward, value_inputs=tuple(ins), activation=activation)
        g.nodes.append(rec)
        g.order.append(name)
        if forward:
            g.info[name] = (scope, rec.stack, tap.module)
        return rec

    def graph_ran(self, info: TappedGraph, inputs: list[Any], outputs: list[Any], rows: torch.Tensor) -> None:
        """A tapped build ran: its operators become this iteration's nodes (a failure drops the
        iteration, never the training)."""
        with self.rec._guarded():
            g = self.rec._graph
            if g is not None:
                self._graph_nodes(g, info, inputs, outputs, rows)

    def _graph_nodes(self, g: C.IterationGraph, info: TappedGraph, inputs: list[Any], outputs: list[Any],
                     rows: torch.Tensor) -> None:
        if info.taps and bool((rows[:, 0] == FAILED).any()):
            raise RuntimeError("the statistics of a compiled operator could not be computed")
        rec = self.rec
        forward = not info.backward
        if forward:
            self._tap_base = rec._scopes[-1][1] if rec._scopes else self._compiled_scope()
        base = self._tap_base if forward else f"{C.BACKWARD_SCOPE}/{self._tap_base}"
        names: dict[tuple[str, int], str] = {}
        placed: dict[int, str] = {}

        def source(ref: tuple[str, int]) -> str | None:
            node, slot = ref
            if not node.startswith("#"):
                return names.get((node, slot))
            k = int(node[1:])
            if k not in placed and k < len(inputs) and isinstance(inputs[k], torch.Tensor):
                placed[k] = rec._tracker.source(inputs[k], data=forward, read=False)[0]
            return placed.get(k)

        sizes = _runtime_shapes(info, rows)
        made: dict[str, NodeRecord] = {}       # FX node -> its record: a multi-output operator is one node
        for i, tap in enumerate(info.taps):
            shape = sizes.get(i, tap.shape)
            node = made.get(tap.node)
            if node is None:
                node = made[tap.node] = self._tap_record(g, tap, base, forward, [s for s in map(source, tap.inputs) if s])
            node.outputs.extend(OutputType(None, None) for _ in range(len(node.outputs), tap.slot + 1))
            node.outputs[tap.slot] = OutputType(tap.dtype, shape)
            names[(tap.node, tap.slot)] = node.name
            if not rec.values and rec._want(tap.module, tap.op):
                g.captured.append(C.Captured(node.name, tap.op, "output", tap.slot, stats=rows[i, :NCOLS], shape=shape,
                                             dtype="float32" if tap.dtype == "bfloat16" else tap.dtype))
        if rec.values and info.taps:
            rec._compile_notes.graph_values()
        for ref, t in zip(info.outputs, outputs):
            if ref is not None and isinstance(t, torch.Tensor) and ref in names:
                rec._tracker.register(t, names[ref])
        self.tapped += 1
        self.tapped_every = self.tapped_every or info.every


def _runtime_shapes(info: TappedGraph, rows: torch.Tensor) -> dict[int, tuple[int, ...]]:
    """The shapes, as this run had them, of the taps whose graph left a size symbolic (dynamic shapes):
    from their rows, copied to the host once."""
    todo = [i for i, tap in enumerate(info.taps) if None in tap.shape]
    if not todo:
        return {}
    dims = rows[todo, NCOLS:].tolist()
    return {i: tuple(int(d) for d in row[1:1 + int(row[0])]) for i, row in zip(todo, dims)
            if 0 <= int(row[0]) <= SHAPE_DIMS}


def _scope(tap: Tap, base: str) -> str:
    """``model/h.0-Block/ln_1-LayerNorm``: the scope the recorder's module hooks give the same call."""
    parts: list[str] = [base]
    prev = ""
    for path, cls in tap.chain:
        if path == "":      # the model itself, reached inside a compiled function: its own scope
            parts = [f"{C.BACKWARD_SCOPE}/model" if base.startswith(C.BACKWARD_SCOPE + "/") else "model"]
            continue
        rel = path[len(prev) + 1:] if prev and path.startswith(prev + ".") else path
        parts.append(f"{rel}-{cls}")
        prev = path
    return "/".join(parts)


_frames_cache: dict[tuple[str, bool], tuple[StackFrame, ...]] = {}


def _frames(tap: Tap, forward: bool) -> tuple[StackFrame, ...]:
    """The user's frames of the operator's source stack, innermost first (a backward operator's are
    those of the forward code it derives from)."""
    key = (tap.stack, forward)
    got = _frames_cache.get(key)
    if got is None:
        got = _frames_cache[key] = tuple(
            StackFrame(os.path.abspath(f), line, code=code, forward_candidate=not forward)
            for f, line, code in parse_stack(tap.stack) if is_user_file(f))[:MAX_FRAMES]
    return got
