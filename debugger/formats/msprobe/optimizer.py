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

The weight after the step is the output of the last in-place op of its parameter whose first input
is a value the weight held in the step (the value read, or such an op's output): torch.optim's
single-tensor loops write the weight last (``add_``, ``addcdiv_``). Its updates are that op and,
back through the live outputs their first inputs are, the parameter's earlier in-place ops down to
one whose first input is the value read (AdamW: ``mul_`` (decay), then ``addcdiv_``). A
zero-initialised bias equals a zero moment: where the chain is ambiguous, fewer ops are updates. Every
other op of the parameter is its optimizer state or computed from it
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


def _sig(it: Item) -> tuple:
    """dtype, shape and Max/Min/Mean/Norm; not msprobe's md5, which differed between the forward's record
    of a weight and the optimizer's first read of it in one step with all four statistics equal."""
    return (it.torch_dtype, it.shape, tuple(kv for kv in it.stats if kv[0] != "md5"))


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
        key = (_sig(it), _sig(g)) if g is not None else None
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
    v_index = _unique_index({p: _sig(it) for p, it in values.items() if canon[p] == p})
    g_index = _unique_index({p: _sig(it) for p, it in grads.items() if canon.get(p, p) == p})
    groups = _Groups(len(ops))
    live: dict[tuple, int] = {}
    made_first: list[int | None] = []     # per op: the earlier op whose live output its first input is
    for i, op in enumerate(ops):
        ins = [it for it in op.items if it.io == "input"]
        made_first.append(_live(live, _sig(ins[0])) if ins and ins[0].slot == 0 else None)
        anchor = _anchor(ins, g_index) or _anchor(ins, v_index)
        if anchor:
            groups.param[i] = anchor
        for it in ins:
            j = _live(live, _sig(it))
            if j is not None:
                groups.join(j, i) if anchor is None else groups.join(i, j)
        if is_in_place(op.key) and ins:
            _drop(live, _sig(ins[0]))
        for it in op.items:
            if it.io == "output":
                _set(live, _sig(it), i)
    placed = [groups.param[groups.find(i)] for i in range(len(ops))]
    _by_order(placed)
    for op, p in zip(ops, placed):
        if p:
            facts.param_of[op.key] = p
    _updates(ops, placed, values, made_first, facts)
    return facts


def _anchor(items: list[Item], index: dict[tuple, str | None]) -> str | None:
    found = {p for p in (_get(index, _sig(it)) for it in items) if p}
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


def _updates(ops: list[Op], placed: list[str | None], values: dict[str, Item], made_first: list[int | None],
             facts: OptimizerFacts) -> None:
    """The last in-place op of a parameter whose first input is a value its weight held in the step leaves
    the weight after the step; its updates are that op and, back through the live outputs their first
    inputs are, the earlier in-place ops of the parameter, down to one that reads the value read."""
    held: dict[str, set] = {p: {_sig(values[p])} for p in facts.tied}
    last: dict[str, int] = {}
    for i, (op, p) in enumerate(zip(ops, placed)):
        if not p or p not in held or not is_in_place(op.key):
            continue
        first, out = _first_in(op), _first_out(op)
        try:
            if first is None or out is None or _sig(first) not in held[p]:
                continue
            held[p].add(_sig(out))
        except TypeError:
            continue
        last[p] = i
    for p, i in last.items():
        chain = [i]
        j = made_first[i]
        while j is not None and placed[j] == p and is_in_place(ops[j].key) and j not in chain:
            chain.append(j)
            j = made_first[j]
        start = _first_in(ops[chain[-1]])
        if start is None or _sig(start) != _sig(values[p]):
            continue      # no chain back to the value read: the weight's update is not recognised
        for k in chain:
            facts.updates[ops[k].key] = p
        out = _first_out(ops[i])
        assert out is not None
        for name in facts.tied[p]:
            facts.after[name] = out


def _first_in(op: Op) -> Item | None:
    return next((it for it in op.items if it.io == "input" and it.slot == 0), None)


def _first_out(op: Op) -> Item | None:
    return next((it for it in op.items if it.io == "output" and it.slot == 0), None)
