"""The operators of two different programs of the same code: an eager run's against a compiled run's.

A compiled program (``torch.compile``: its graphs decomposed and fused by the compiler) does not
compute what the eager program computes operator for operator: a layer norm becomes ``var_mean`` and
``rsqrt``, pointwise operators run inside fused kernels whose results are never stored, the loss is
decomposed. Paired by name, the two programs give hundreds of false divergences. So when one graph is
compiled and the other is not (``Graph.compiled``):

- weights, gradients, optimizer state and the loss keep their names in both programs: paired by name;
- an operator pairs with an operator of the other program in the same module scope, of the same
  operator type and with a first output of the same shape (a loss with a loss), in execution order:
  a longest common subsequence of the two iterations' operators; the outputs both
  record are compared (its inputs are other operators' outputs, compared there);
- what has no counterpart (decomposed, fused, recorded on one side only, or of unknown origin: an
  operator outside any scope, a state one program's optimizer reads as an operator input) is not
  compared, and the comparison says how many nodes of each side, with examples.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

import numpy as np

from ..formats.records import Kind
from ..model.graph import Graph, Node

# kinds whose nodes mean the same thing in both programs, whatever produced them
_BY_NAME = (Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE, Kind.LOSS)
_EXAMPLES = 5


@dataclass
class ProgramPairing:
    """How two programs' operators were paired, for one rank's graph."""

    rank: int
    graph: int
    compiled_a: bool
    compiled_b: bool
    paired: list[tuple[str, str]] = field(default_factory=list)   # (a operator, b operator)
    alone_a: list[str] = field(default_factory=list)      # a's nodes with no counterpart, in order
    alone_b: list[str] = field(default_factory=list)
    outputs_compared: int = 0       # outputs of paired operators both sides hold (every iteration)
    outputs_one_side: int = 0       # ... that one side holds and the other does not

    def to_dict(self) -> dict[str, Any]:
        """The documented PROGRAMS object of ``tdbg compare --json``."""
        return {"rank": self.rank, "graph": self.graph,
                "a": _word(self.compiled_a), "b": _word(self.compiled_b),
                "operators_paired": len(self.paired), "a_only": len(self.alone_a), "b_only": len(self.alone_b),
                "outputs_compared": self.outputs_compared, "outputs_one_side": self.outputs_one_side,
                "a_only_examples": self.alone_a[:_EXAMPLES], "b_only_examples": self.alone_b[:_EXAMPLES]}

    def text(self) -> str:
        """One paragraph for the report."""
        return (f"rank {self.rank} graph {self.graph}: a is {_word(self.compiled_a)}, b is {_word(self.compiled_b)}: "
                f"{len(self.paired)} operator(s) paired by module, operator and output shapes, "
                f"{self.outputs_compared} of their outputs compared ({self.outputs_one_side} held by one side only); "
                f"{len(self.alone_a)} node(s) of a and {len(self.alone_b)} of b have no counterpart in the other "
                "program (decomposed or fused by the compiler, or recorded on one side only): not compared"
                + _examples("a", self.alone_a) + _examples("b", self.alone_b))

    def unread(self) -> str | None:
        """A warning when no operator could be paired although both programs hold some, or when most
        outputs of the paired operators could not be compared (None otherwise)."""
        if not self.paired and self.alone_a and self.alone_b:
            return (f"rank {self.rank} graph {self.graph}: no operator of the two programs could be paired (no "
                    "module scope, operator type and shape in common): only weights, gradients, optimizer state "
                    "and the loss were compared")
        if self.outputs_one_side <= self.outputs_compared:
            return None
        return (f"rank {self.rank} graph {self.graph}: {self.outputs_one_side} output(s) of the paired operators are "
                f"held by one side only and {self.outputs_compared} by both: the operators were mostly not compared "
                "(a compiled program's operators are recorded as statistics, none with save=\"tensors\": record both "
                "runs with save=\"statistics\")")


def _word(compiled: bool) -> str:
    return "compiled" if compiled else "eager"


def _examples(side: str, names: list[str]) -> str:
    return f"; {side} e.g. {', '.join(names[:3])}" if names else ""


def programs_differ(ga: Graph | None, gb: Graph | None) -> bool:
    """Whether one graph is a compiled program and the other is not (names then do not pair operators)."""
    return ga is not None and gb is not None and ga.compiled != gb.compiled


def named_alike(ga: Graph, gb: Graph) -> set[str]:
    """The nodes that pair by name across programs: on both sides, a weight, gradient, optimizer state
    or loss of the same kind on both (such a node means the same in any program of the code)."""
    return {n.name for n in ga.nodes() if n.kind in _BY_NAME and n.name in gb and gb.node(n.name).kind == n.kind}


def _held(node: Node) -> bool:
    """A weight, gradient or optimizer state held by the run (not computed by either program)."""
    return node.is_parameter and node.kind in _BY_NAME


def pair_operators(ga: Graph, gb: Graph, taken_a: set[str], taken_b: set[str], rank: int, graph: int
                   ) -> ProgramPairing:
    """Pair the operators of two programs (those in ``taken_a``/``taken_b`` are paired already)."""
    out = ProgramPairing(rank, graph, ga.compiled, gb.compiled)
    seq_a, seq_b = _operators(ga, taken_a), _operators(gb, taken_b)
    both = ({k for _, k in seq_a} & {k for _, k in seq_b}) - {None}
    # one alignment over the whole iteration, not one per operator type: an iteration that runs the
    # model several times (evaluation batches, then the training step) where one program records an
    # operator in some of the calls only pairs each call with its own
    ta = [(n, (k, _first_shape(ga, n))) for n, k in seq_a if k in both]
    tb = [(n, (k, _first_shape(gb, n))) for n, k in seq_b if k in both]
    out.paired = [(ta[i][0], tb[j][0]) for i, j in _aligned([t for _, t in ta], [t for _, t in tb])]
    done_a, done_b = {a for a, _ in out.paired}, {b for _, b in out.paired}
    out.alone_a = [n for n, _ in seq_a if n not in done_a]
    out.alone_b = [n for n, _ in seq_b if n not in done_b]
    return out


_LCS_CELLS = 20_000_000      # beyond this (4,000 x 5,000 operators: 40 MB of rows) the greedy alignment


def _aligned(ta: list[Any], tb: list[Any]) -> list[tuple[int, int]]:
    """The (i, j) of a longest common subsequence of two token lists. A true LCS, not difflib's
    longest-block-first: a compiled program interleaves operators of its own (a GELU's decomposition)
    that break the contiguous blocks, and the greedy choice then pairs a training call's operators
    with an evaluation call's. One numpy pass per row (a row is a running maximum); rows kept as
    uint16 for the way back."""
    n, m = len(ta), len(tb)
    if not n or not m:
        return []
    if n * m > _LCS_CELLS or min(n, m) >= 65535:
        sm = SequenceMatcher(None, ta, tb, autojunk=False)
        return [(b.a + k, b.b + k) for b in sm.get_matching_blocks() for k in range(b.size)]
    ids: dict[Any, int] = {}
    a = np.array([ids.setdefault(t, len(ids)) for t in ta])
    b = np.array([ids.setdefault(t, len(ids)) for t in tb])
    rows = np.zeros((n + 1, m + 1), dtype=np.uint16)
    for i in range(n):
        prev = rows[i]
        t = np.maximum(prev[1:], np.where(b == a[i], prev[:-1] + 1, 0))
        np.maximum.accumulate(t, out=rows[i + 1, 1:])
    out: list[tuple[int, int]] = []
    i, j = n, m
    while i and j:
        if a[i - 1] == b[j - 1] and rows[i, j] == rows[i - 1, j - 1] + 1:
            out.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif rows[i - 1, j] >= rows[i, j - 1]:
            i -= 1
        else:
            j -= 1
    return out[::-1]


def _operators(g: Graph, taken: set[str]) -> list[tuple[str, tuple[str, str] | None]]:
    """A graph's operators not paired by name, in execution order, each with what its counterpart must
    share (:func:`_key`)."""
    rank = g.execution_index
    nodes = sorted((n for n in g.nodes() if n.name not in taken),
                   key=lambda n: rank.get(n.name, 1 << 30))
    return [(n.name, _key(n)) for n in nodes]


def _key(n: Node) -> tuple[str, str] | None:
    """What an operator must share with its counterpart: scope and operator type; for the loss only
    being the loss (an eager loss operator, a compiled program's loss output). None: nothing to pair by
    (a weight or state the other side lacks, such as an eager optimizer's 0-d step counters; a graph
    input of unknown origin)."""
    if _held(n):
        return None
    if n.kind == Kind.LOSS:
        return ("", "\0loss")
    return (n.scope, n.op_type) if n.scope else None


def _first_shape(g: Graph, name: str) -> Any:
    """The shape of a node's first output (what an operator of the other program must also produce;
    the other outputs may be recorded on one side only: an output nothing reads is not kept)."""
    outs = g.record_of(name).outputs
    return outs[0].shape if outs and outs[0].dtype is not None else None
