"""Which parameter each op under msprobe's ``optimizer`` node works for, and the weight it leaves.

msprobe records the ops ``optimizer.step()`` calls (``Tensor.mul_``, ``lerp_``, ``addcmul_``,
``addcdiv_``, ``__iadd__`` on a step counter ...) under a synthetic ``optimizer`` node, with no
data-flow edges and no word of which parameter an op belongs to. These facts decide it, in order:

1. **Gradient**: an input equal (dtype, shape, Max/Min/Mean/Norm) to exactly one parameter's
   gradient (``parameters_grad``) names that parameter. Every torch.optim update reads the gradient.
2. **Weight**: else an input equal to exactly one parameter's value as read in the step.
3. **Data flow**: else an input equal to a value an earlier optimizer op of the step produced and
   that is still live (an in-place op, ``*_`` or ``__i*__``, overwrites its first input: the old
   value is gone) takes that op's parameter.
4. **Order**: an op none of these places (a step counter's ``+= 1``, a moment still all zero) takes
   the parameter of the next placed op: torch.optim's single-tensor loops handle one parameter at a
   time, its step counter first. Trailing ones take the last placed op's parameter.

Parameters whose value and gradient are both equal are one tensor under two names (tied
embeddings: ``lm_head.weight`` is ``wte.weight``); they are placed as one.

The weight's updates are the in-place ops of its parameter whose first input is a value the weight
held in the step (the value read, or an earlier update's output); the output of the last one is the
weight after the step (torch.optim's single-tensor loops update the weight last: ``add_``,
``addcdiv_``; a zero-initialised bias equals a zero moment, so an earlier op may be taken for an
update too, never the last). Every other op of the parameter is its optimizer state or computed from it
(moments, momentum buffers, step counters, denominators). msprobe does not record ``zeros_like`` or
``clone`` (its API lists lack them): state appears first as the input of the op that updates it.
``torch._foreach_*`` ops (one op for many parameters) are placed only when one parameter fits.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .dumpjson import Item, Op, parse_api


@dataclass
class OptimizerFacts:
    """What the optimizer ops of one step did, by op key and by parameter."""

    param_of: dict[str, str] = field(default_factory=dict)    # op key -> parameter (canonical name)
    updates: dict[str, str] = field(default_factory=dict)     # op key -> the weight it updates in place
    after: dict[str, Item] = field(default_factory=dict)      # parameter (every tied name) -> value after the step
    tied: dict[str, list[str]] = field(default_factory=dict)  # canonical name -> every name of that tensor


def is_in_place(key: str) -> bool:
    """``Tensor.mul_``, ``Torch.add_``, ``Tensor.__iadd__``: the op writes its first input and returns it."""
    api = parse_api(key)
    if api is None:
        return False
    name = api[1]
    if name.startswith("__i") and name.endswith("__"):
        return True
    return name.endswith("_") and not name.startswith("_")


def _unique_index(sigs: dict[str, tuple]) -> dict[tuple, str | None]:
    out: dict[tuple, str | None] = {}
    for name, sig in sigs.items():
        try:
            out[sig] = None if sig in out and out[sig] != name else name
        except TypeError:        # an unhashable statistic: never matched
            continue
    return out


def _get(index: dict[tuple, str | None], sig: tuple) -> str | None:
    try:
        return index.get(sig)
    except TypeError:
        return None


def _ties(values: dict[str, Item], grads: dict[str, Item]) -> dict[str, str]:
    """Parameter -> canonical name: parameters with equal value and equal gradient are one tensor."""
    first: dict[tuple, str] = {}
    out: dict[str, str] = {}
    for p, it in values.items():
        g = grads.get(p)
        key = (it.signature, g.signature) if g is not None else None
        try:
            out[p] = first.setdefault(key, p) if key is not None else p
        except TypeError:
            out[p] = p
    return out


class _Groups:
    """Union-find over op positions; a group holds at most one parameter."""

    def __init__(self, n: int) -> None:
        self.up = list(range(n))
        self.param: list[str | None] = [None] * n

    def find(self, i: int) -> int:
        while self.up[i] != i:
            self.up[i] = self.up[self.up[i]]
            i = self.up[i]
        return i

    def join(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a == b or (self.param[a] and self.param[b] and self.param[a] != self.param[b]):
            return       # two parameters' values are never one value: a coincidence of statistics
        self.up[b] = a
        self.param[a] = self.param[a] or self.param[b]


def analyse(ops: list[Op], values: dict[str, Item], grads: dict[str, Item]) -> OptimizerFacts:
    """Place the optimizer ``ops`` (call order) on parameters; ``values``/``grads`` by parameter name."""
    canon = _ties(values, grads)
    facts = OptimizerFacts()
    for p, c in canon.items():
        facts.tied.setdefault(c, []).append(p)
    v_index = _unique_index({p: it.signature for p, it in values.items() if canon[p] == p})
    g_index = _unique_index({p: it.signature for p, it in grads.items() if canon.get(p, p) == p})
    groups = _Groups(len(ops))
    live: dict[tuple, int] = {}
    for i, op in enumerate(ops):
        ins = [it for it in op.items if it.io == "input"]
        anchor = _anchor(ins, g_index) or _anchor(ins, v_index)
        if anchor:
            groups.param[i] = anchor
        for it in ins:
            j = _live(live, it.signature)
            if j is not None:
                groups.join(j, i) if anchor is None else groups.join(i, j)
        if is_in_place(op.key) and ins:
            _drop(live, ins[0].signature)
        for it in op.items:
            if it.io == "output":
                _set(live, it.signature, i)
    placed = [groups.param[groups.find(i)] for i in range(len(ops))]
    _by_order(placed)
    for op, p in zip(ops, placed):
        if p:
            facts.param_of[op.key] = p
    _updates(ops, placed, values, facts)
    return facts


def _anchor(items: list[Item], index: dict[tuple, str | None]) -> str | None:
    found = {p for p in (_get(index, it.signature) for it in items) if p}
    return found.pop() if len(found) == 1 else None


def _live(live: dict[tuple, int], sig: tuple) -> int | None:
    try:
        return live.get(sig)
    except TypeError:
        return None


def _drop(live: dict[tuple, int], sig: tuple) -> None:
    try:
        live.pop(sig, None)
    except TypeError:
        pass


def _set(live: dict[tuple, int], sig: tuple, i: int) -> None:
    try:
        live[sig] = i
    except TypeError:
        pass


def _by_order(placed: list[str | None]) -> None:
    """Unplaced ops take the next placed op's parameter (trailing ones the last)."""
    nxt: str | None = None
    for i in range(len(placed) - 1, -1, -1):
        if placed[i] is None:
            placed[i] = nxt
        else:
            nxt = placed[i]
    last = next((p for p in reversed(placed) if p), None)
    for i, p in enumerate(placed):
        if p is None:
            placed[i] = last


def _updates(ops: list[Op], placed: list[str | None], values: dict[str, Item], facts: OptimizerFacts) -> None:
    """In-place ops of a parameter whose first input is a value its weight held in the step (the value
    read, or an earlier such op's output); the last one's output is the weight after the step."""
    held: dict[str, set] = {p: {values[p].signature} for p in facts.tied}
    for op, p in zip(ops, placed):
        if not p or p not in held or not is_in_place(op.key):
            continue
        first = next((it for it in op.items if it.io == "input" and it.slot == 0), None)
        out = next((it for it in op.items if it.io == "output" and it.slot == 0), None)
        try:
            if first is None or out is None or first.signature not in held[p]:
                continue
            held[p].add(out.signature)
        except TypeError:
            continue
        facts.updates[op.key] = p
        for name in facts.tied[p]:
            facts.after[name] = out
