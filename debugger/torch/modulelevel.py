"""Level "modules": one node per module call, from the recorder's module hooks and tensor hooks.

A call's node is named after its scope (``model/transformer-GPT2Model/h.0-GPT2Block/ln_1-LayerNorm``; a
module called again in the same iteration gets ``-1``, ``-2`` ...). The calls made inside a call sit in a
scope named after it, and so does the container's own node, named after its class
(``model/transformer-GPT2Model/h.0-GPT2Block/GPT2Block``): no node is named like a scope. Its inputs are
edges from whatever made each tensor argument: an earlier call's output (through views of its memory,
and through the functional code between modules: ``attn_output + residual`` links both makers, found on
the autograd graph), a parameter leaf or a data input; plus the module's own parameters. Its outputs are
registered with the tracker, so later calls and the loss link to them, and captured (values or
statistics). Each output that requires grad gets a tensor hook: when its gradient arrives in backward,
a node ``backward/<call>`` holds it.

What this level cannot see: tensors handed to the root model as keyword arguments (the pre hook gets
positional arguments only; the module that reads them, an embedding, links to the data input), and what
a module's own forward hooks change in its output (the recorder's global hook runs first: the change
shows in the next call that reads it).
"""
from __future__ import annotations

import linecache
import os
import sys
import types
import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import torch

from ..formats.records import Kind, NodeRecord, OutputType, StackFrame
from ..stats.core import ASYMPTOTES
from . import capture as C
from .devstats import saturated_row
from .stacks import MAX_FRAMES, is_user_file

if TYPE_CHECKING:
    from .recorder import Recorder

# Module classes (by name, so no library is imported) -> the function they apply, as NodeRecord.activation
# names it; a subclass takes its base's function.
_ACTIVATION_CLASSES = {
    "ReLU": "relu", "ReLU6": "relu6", "GELU": "gelu", "Tanh": "tanh", "Sigmoid": "sigmoid", "SiLU": "silu",
    "Softmax": "softmax", "Softmax2d": "softmax", "LogSoftmax": "log_softmax", "Softmin": "softmin",
    "LeakyReLU": "leaky_relu", "Hardswish": "hardswish", "Hardsigmoid": "hardsigmoid", "ELU": "elu",
    "CELU": "celu", "SELU": "selu", "Softplus": "softplus", "Mish": "mish", "PReLU": "prelu", "RReLU": "rrelu",
    "LogSigmoid": "log_sigmoid", "Softshrink": "softshrink", "Hardshrink": "hardshrink", "GLU": "glu",
    "Hardtanh": "hardtanh", "Threshold": "threshold", "Tanhshrink": "tanhshrink", "Softsign": "softsign",
    # transformers.activations
    "GELUActivation": "gelu", "NewGELUActivation": "gelu", "FastGELUActivation": "gelu",
    "QuickGELUActivation": "gelu", "GELUTanh": "gelu", "PytorchGELUTanh": "gelu", "AccurateGELUActivation": "gelu",
    "ClippedGELUActivation": "gelu", "SiLUActivation": "silu", "MishActivation": "mish",
}
_BY_CLASS: dict[type, str] = {}
_TAG = "tdbg_module"          # autograd-node metadata key: the call whose output the node made
_WALK_LIMIT = 256             # autograd nodes visited looking for an untracked tensor's makers


def module_activation(module: torch.nn.Module) -> str:
    """The activation function ``module`` applies ("" when it is no activation layer)."""
    cls = type(module)
    got = _BY_CLASS.get(cls)
    if got is None:
        got = next((_ACTIVATION_CLASSES[k.__name__] for k in cls.__mro__ if k.__name__ in _ACTIVATION_CLASSES), "")
        _BY_CLASS[cls] = got
    if got == "hardtanh" and (getattr(module, "min_val", None), getattr(module, "max_val", None)) == (0.0, 6.0):
        return "relu6"
    if got == "threshold" and (getattr(module, "threshold", None), getattr(module, "value", None)) == (0.0, 0.0):
        return "relu"
    return got


def _output_types(outs: list[torch.Tensor]) -> list[OutputType]:
    """Each output's type; a floating output that does not require grad beside one that does (autograd on) is
    kind constant: made from no trained input, a value the call passes along (T5's cross-attention returns its
    position bias, zeros plus the mask), judged apart from the call's computed outputs as at level "ops"."""
    trained = torch.is_grad_enabled() and any(t.requires_grad for t in outs)
    return [OutputType(C.dtype_name(t.dtype), tuple(t.shape),
                       Kind.CONSTANT if trained and t.is_floating_point() and not t.requires_grad else None)
            for t in outs]


def output_tensors(x: Any) -> Iterator[torch.Tensor]:
    """Tensors in a module's return value, in order: tensors, tuples, lists and mappings (transformers'
    ModelOutput is one), nested; a torch.func transform's wrapper as the value it holds (C.unwrapped)."""
    if isinstance(x, torch.Tensor):
        yield C.unwrapped(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from output_tensors(v)
    elif isinstance(x, Mapping):
        for v in x.values():
            yield from output_tensors(v)


@dataclass
class _Returned:
    """An output tensor of this iteration's calls: its capture and its tensor hook's list of calls."""

    ref: Any                    # weakref to the tensor (its id may be reused once it is freed)
    version: int | None
    capture: Any                # weakref to its Captured (the iteration's job owns it), or None
    hooked: list[tuple[Any, ...]] | None


@dataclass
class _Call:
    """A module call between its pre hook and its post hook."""

    module: torch.nn.Module
    name: str
    scope: str                  # the parent call's node name ("" at the top)
    hook_scope: str             # the scope string the recorder's hooks built
    path: str
    inputs: list[str]
    stack: tuple[StackFrame, ...]
    anchor: Any                 # the frame that ran the call's hooks (alive while the call runs)
    key: tuple[tuple[types.CodeType, int], ...]     # the user's (code, line) of ``stack``
    want: bool                  # its tensors are stored (Recorder's ``modules`` / ``ops`` filters)
    children: int = 0           # calls made inside it
    weights: list["C.Captured"] = field(default_factory=list)   # the weights it read, captured under ``name``


class ModuleLevel:
    """Builds the module nodes of an iteration recorded at level "modules" (the recorder's hooks call it)."""

    def __init__(self, rec: "Recorder") -> None:
        self.rec = rec
        self._graph: C.IterationGraph | None = None
        self._epoch = 0                 # which iteration a tensor hook belongs to
        self._calls: list[_Call] = []
        self._handles: list[Any] = []
        self._names: set[str] = set()   # this iteration's module nodes
        self._weights_read: set[str] = set()    # leaves a call of this iteration read (and captured as its input)
        self._consumers: dict[str, list[str]] = {}    # module node -> the calls that read its outputs
        self._grads: dict[str, list[str]] = {}        # module node -> its backward nodes so far
        self._returned: dict[int, _Returned] = {}       # id(tensor) -> what the calls that returned it share
        self._frames: dict[tuple[tuple[types.CodeType, int], ...], tuple[StackFrame, ...]] = {}   # per call site
        self._candidates: dict[tuple[StackFrame, ...], tuple[StackFrame, ...]] = {}
        self._hook_code = type(rec)._pre_hook.__code__      # the frame that calls it is a call's anchor

    def _sync(self) -> C.IterationGraph:
        """The recorder's current graph; a new one starts this level's iteration afresh."""
        g = self.rec._graph
        assert g is not None
        if g is not self._graph:
            self.release()
            self._graph = g
            self._epoch += 1
        return g

    def release(self) -> None:
        """Forget the iteration: remove its tensor hooks (a hook that outlives it does nothing anyway)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._calls.clear()
        self._names.clear()
        self._weights_read.clear()
        self._consumers.clear()
        self._grads.clear()
        self._returned.clear()
        self._graph = None

    def read_weight(self, name: str) -> bool:
        """Whether a module call of the iteration being recorded read leaf ``name`` (its value as read is
        captured there); False when no call was seen (a compiled model's calls are traced away)."""
        return self._graph is self.rec._graph and name in self._weights_read

    # ---- forward ----------------------------------------------------------------------------
    def _safely(self, work: Any, *args: Any) -> None:
        """``work(*args)`` as the recorder's own tensor work (no dispatch mode sees it); a failure drops
        the iteration, never the training (Recorder._guarded, without its two generators: this runs three
        times per module call)."""
        rec = self.rec
        rec._busy = True
        try:
            with C.OWN_OPS(), C.outside_transforms():
                work(*args)
        except Exception as exc:     # never break the training
            rec._drop(exc)
        finally:
            rec._busy = False

    def enter(self, module: torch.nn.Module, args: Any) -> None:
        """The pre hook of a call (never raises). A forward run again inside backward (activation
        checkpointing) is no new call."""
        if not self.rec._in_backward:
            self._safely(self._enter, module, args)

    def _enter(self, module: torch.nn.Module, args: Any) -> None:
        """A call's name, stack and input edges (read before it can write its inputs)."""
        rec = self.rec
        g = self._sync()
        _, hook_scope, path = rec._scopes[-1]
        parent = self._calls[-1] if self._calls else None
        if parent is None:
            name = g.once_name(hook_scope)
        else:
            above = parent.hook_scope
            part = hook_scope[len(above) + 1:] if above and hook_scope.startswith(above + "/") else hook_scope
            name = g.once_name(f"{parent.name}/{part}")
        inputs: list[str] = []
        weights: list[C.Captured] = []
        for t in output_tensors(args):
            for src in self._sources(t):
                if src not in inputs:
                    inputs.append(src)
        cls = C.class_name(module)
        want = rec._want(path or "", cls)
        for p in module._parameters.values():
            if p is None:
                continue
            leaf = rec._leaves.leaf_of(p)      # no module output is a parameter's memory: the leaf, without a search
            if leaf is None:
                src, _ = rec._tracker.source(p, data=False)
            else:
                rec._tracker.make_leaf(leaf, p)
                src = leaf.name
            if src not in inputs:
                inputs.append(src)
                if leaf is not None and want:
                    # the value the forward read, before the step's update (a weight's "previous value"
                    # at the first iteration); the same bits as the last step()'s capture: reused
                    c = rec._capture(name, cls, "input", len(inputs) - 1, p, exact=True, reuse=True)
                    if c is not None:
                        weights.append(c)
                        self._weights_read.add(leaf.name)
        for src in inputs:
            if src in self._names:
                self._consumers.setdefault(src, []).append(name)
        anchor, key, stack = self._stack(parent)
        if parent is not None:
            parent.children += 1
        self._calls.append(_Call(module, name, parent.name if parent else "", hook_scope, path or "",
                                 inputs, stack, anchor, key, want, weights=weights))

    def _stack(self, parent: _Call | None) -> tuple[Any, tuple[tuple[types.CodeType, int], ...], tuple[StackFrame, ...]]:
        """(the frame that runs this call's hooks, the user's frames at the call as (code, line) and as
        StackFrames, innermost first, as stacks.user_stack gives them). The frames from the parent call's
        hooks outwards are the parent's: only the few in between are walked."""
        anchor = sys._getframe(1)
        while anchor is not None and anchor.f_code is not self._hook_code:
            anchor = anchor.f_back      # up to the recorder's pre hook (a few frames) ...
        anchor = anchor.f_back if anchor is not None else sys._getframe(1)     # ... and torch's frame that called it
        stop = parent.anchor if parent is not None else None
        key: list[tuple[types.CodeType, int]] = []
        f = anchor
        while f is not None and f is not stop and len(key) < MAX_FRAMES:
            code = f.f_code
            if is_user_file(code.co_filename):
                key.append((code, f.f_lineno))
            f = f.f_back
        if f is not None and f is stop and parent is not None:
            key.extend(parent.key[:MAX_FRAMES - len(key)])
        k = tuple(key)
        frames = self._frames.get(k)
        if frames is None:
            if len(self._frames) > 10_000:
                self._frames.clear()
            frames = self._frames[k] = tuple(
                StackFrame(os.path.abspath(code.co_filename), line, code=linecache.getline(code.co_filename, line).strip())
                for code, line in k)
        return anchor, k, frames

    def _sources(self, t: torch.Tensor) -> list[str]:
        """The nodes that made ``t``: its maker if tracked, else the module outputs it was computed from
        (on the autograd graph), else the parameter or data input it is."""
        tracker = self.rec._tracker
        e = tracker.newest(t)
        if e is not None:
            return [e[1]]
        if t.grad_fn is not None and self.rec._leaves.leaf_of(t) is None:
            found = self._makers(t.grad_fn)
            if found:
                return found
        src, _ = tracker.source(t, data=True)
        return [src]

    def _makers(self, fn: Any) -> list[str]:
        """Module nodes of this iteration whose outputs the autograd node ``fn`` was computed from, and the
        parameters it read (the nearest ones: the walk stops at a tagged node)."""
        found: list[str] = []
        seen = {fn}
        todo = [fn]
        while todo and len(seen) < _WALK_LIMIT:
            f = todo.pop()
            tag = f.metadata.get(_TAG)
            if tag in self._names:
                if tag not in found:
                    found.append(tag)
                continue
            var = getattr(f, "variable", None)     # AccumulateGrad: a leaf tensor (a parameter)
            if isinstance(var, torch.Tensor):
                src, _ = self.rec._tracker.source(var, data=False)
                if src not in found:
                    found.append(src)
                continue
            for nxt, _ in f.next_functions:
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return found

    def leave(self, module: torch.nn.Module, output: Any) -> None:
        """The post hook of a call (never raises)."""
        if not self.rec._in_backward:
            self._safely(self._leave, module, output)

    def _leave(self, module: torch.nn.Module, output: Any) -> None:
        """A call's node, its outputs registered and captured, their gradient hooks. The node goes into the
        execution order here, as the call ENDS: a call's children come before it, so the first call whose
        output went non-finite is the innermost one that made it."""
        g = self._sync()
        at = next((i for i in range(len(self._calls) - 1, -1, -1) if self._calls[i].module is module), None)
        if at is None:
            return
        call = self._calls[at]
        del self._calls[at:]
        cls = C.class_name(module)
        if call.children:
            # a container: its children's scope is named after the call; its own node goes in that scope
            # too (a node named like a scope would be both a box and a node in the graph view)
            call.scope, call.name = call.name, g.once_name(f"{call.name}/{cls}")
            for c in call.weights:      # captured at the pre hook, under the name it had then
                c.node = call.name
        outs: list[torch.Tensor] = []
        for t in output_tensors(output):
            if not any(t is o for o in outs):
                outs.append(t)
        activation = module_activation(module)
        g.nodes.append(NodeRecord(call.name, cls, call.scope, inputs=[(s, "data") for s in call.inputs],
                                  outputs=_output_types(outs),
                                  stack=call.stack, module=call.path,
                                  kind=Kind.ACTIVATION if activation else Kind.OTHER, activation=activation))
        g.order.append(call.name)
        self._names.add(call.name)
        self._outputs(call, cls, activation, outs)

    def _outputs(self, call: _Call, cls: str, activation: str, outs: list[torch.Tensor]) -> None:
        """Register, tag, capture and hook each output of ``call``. An output an inner call returned
        already (a container returns its last child's output) shares that call's capture and tensor hook."""
        rec = self.rec
        want = call.want
        for slot, t in enumerate(outs):
            rec._tracker.register(t, call.name, slot=slot)
            fn = t.grad_fn
            if fn is not None:
                fn.metadata[_TAG] = call.name      # an enclosing call that returns it tags it again: the outermost wins
            if not t.is_floating_point():
                continue
            prior = self._returned.get(id(t))
            if prior is not None and (prior.ref() is not t or prior.version != C.version(t)):
                prior = None
            if want:
                same = prior.capture() if prior is not None and prior.capture is not None else None
                c = rec._capture(call.name, cls, "output", slot, t, exact=False, same=same)
                if c is not None and activation in ASYMPTOTES and not rec.values:
                    c.extra = saturated_row(t, activation)
                if same is None:
                    prior = self._remember(t, c, prior)
            if not t.requires_grad:
                continue
            info = (call.name, call.scope, call.path, call.stack, cls, slot, want)
            if prior is None:
                prior = self._remember(t, None, None)
            if prior.hooked is None:
                prior.hooked = [info]
                self._handles.append(t.register_hook(self._grad_hook(prior.hooked)))
            else:
                prior.hooked.append(info)

    def _remember(self, t: torch.Tensor, capture: "C.Captured | None", prior: "_Returned | None") -> "_Returned":
        """Note ``t`` as returned (with its capture) for the calls that return it again."""
        if prior is None:
            prior = self._returned[id(t)] = _Returned(weakref.ref(t), C.version(t), None, None)
        prior.capture = None if capture is None else weakref.ref(capture)
        return prior

    # ---- backward ---------------------------------------------------------------------------
    def _grad_hook(self, infos: list[tuple[Any, ...]]) -> Any:
        """A tensor hook for an output: its gradient becomes a backward node for each call that returned
        it (the hook holds no tensor and no graph: only names, and the iteration it belongs to)."""
        epoch = self._epoch

        def hook(grad: torch.Tensor | None) -> None:
            # a compiled program's backward hands None for an output whose gradient it did not make
            if grad is not None and epoch == self._epoch and self.rec._graph is self._graph and self._graph is not None:
                self._safely(self._backward_nodes, self._graph, infos, grad)
        return hook

    def _backward_nodes(self, g: C.IterationGraph, infos: list[tuple[Any, ...]], grad: torch.Tensor) -> None:
        """The backward nodes of one gradient (one capture, shared)."""
        same = None
        for info in infos:
            same = self._backward_node(g, info, grad, same) or same

    def _backward_node(self, g: C.IterationGraph, info: tuple[Any, ...], grad: torch.Tensor,
                       same: "C.Captured | None") -> "C.Captured | None":
        """``backward/<call>``: the gradient of a call's output, linked to the forward call and to the
        backward nodes of the calls that read its outputs (the gradient comes from them)."""
        fwd, scope, path, stack, cls, slot, want = info
        name = g.once_name(f"{C.BACKWARD_SCOPE}/{fwd}" + (f"-out{slot}" if slot else ""))
        inputs = [(fwd, "data")]
        for reader in self._consumers.get(fwd, ()):
            inputs.extend((b, "data") for b in self._grads.get(reader, ()) if (b, "data") not in inputs)
        frames = self._candidates.get(stack)
        if frames is None:
            frames = self._candidates[stack] = tuple(replace(f, forward_candidate=True) for f in stack)
        g.nodes.append(NodeRecord(name, f"{cls}Backward", f"{C.BACKWARD_SCOPE}/{scope}" if scope else C.BACKWARD_SCOPE,
                                  inputs=inputs, outputs=[OutputType(C.dtype_name(grad.dtype), tuple(grad.shape))],
                                  stack=frames, module=path, kind=Kind.OTHER, is_backward=True))
        g.order.append(name)
        self._grads.setdefault(fwd, []).append(name)
        if not want:
            return None
        return self.rec._capture(name, f"{cls}Backward", "output", 0, grad, exact=False, same=same)

    # ---- the loss ---------------------------------------------------------------------------
    def made_by(self, t: torch.Tensor) -> str | None:
        """The module node that made ``t`` (the loss): its tracked maker, else the nearest module output
        it was computed from (a loss function applied to the model's output)."""
        if self._graph is not self.rec._graph:
            return None
        e = self.rec._tracker.newest(t)
        if e is not None and e[1] in self._names:
            return e[1]
        if t.grad_fn is not None:
            found = [n for n in self._makers(t.grad_fn) if n in self._names]
            if found:
                return found[0]
        return None
