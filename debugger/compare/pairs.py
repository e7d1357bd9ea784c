"""What a comparison is made of, in both modes (ranks of one dump, dump A against dump B): the two sides,
the pairs of tensors that should agree, and the result that grades them.

Side a is the run under test, side b the baseline: relative errors divide by b, and a tensor with
no partner is "missing on b" (or "missing on a").
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..errors import DumpError
from ..formats.records import Kind
from ..model.graph import Graph
from ..model.locate import optimizer_slots, position, user_location
from ..model import Dump, TensorRef, open_dump
from ..common.selection import parse_iterations, ranges_text
from .grades import ERROR, PASS, WARNING, GradeThresholds
from .outcome import Metrics, Outcome
from .precision import coarser, declared_dtype
from .programs import ProgramPairing

MISSING_ON_A, MISSING_ON_B = "missing on a", "missing on b"

Progress = Callable[[int, int], None]



@dataclass(frozen=True, slots=True)
class Side:
    """One side of a pair: a dump root and a rank."""

    dump: str
    rank: int

    def to_dict(self) -> dict[str, Any]:
        """``{"dump": str, "rank": int}``."""
        return {"dump": self.dump, "rank": self.rank}


@dataclass(eq=False, slots=True)
class Pair:
    """Two tensors that should agree, and how far they differ."""

    iteration: int
    a: Side
    b: Side
    node: str                   # full name (side a's; side b's when missing on a)
    param: str | None
    kind: str
    io: str
    slot: int
    graph: int = 0
    op_type: str = ""
    node_b: str | None = None   # side b's name when matched under another name
    match: str = ""             # "exact" | "fuzzy" | "mapping" | "" (missing)
    counted: bool = True        # counts for the exit status and the first divergence
    position: int = 0           # execution order on side a (parameters: their optimizer kernel)
    group: int = 1              # inputs 0, outputs 1, updated parameters 2, read-only parameters -1
    metrics: Metrics | None = None
    grade: str = ""
    reason: str = ""
    ref_a: TensorRef | None = field(default=None, repr=False)
    ref_b: TensorRef | None = field(default=None, repr=False)
    outcome: Outcome | None = field(default=None, repr=False)
    graph_obj: Graph | None = field(default=None, repr=False)
    precision: str | None = None          # the low-precision float it is graded against (precision.py)
    shard: str | None = None              # the local shard's place in its logical tensor, for messages

    @property
    def missing(self) -> bool:
        """Whether the tensor exists on one side only."""
        return self.ref_a is None or self.ref_b is None

    @property
    def source(self) -> str | None:
        """``file:line`` of the user code that made the node (for a parameter: its first reader; for
        an optimizer kernel: the weight it updates)."""
        g = self.graph_obj
        if g is None or self.node not in g:
            return None
        loc = user_location(g, self.node)
        roles = g.node(self.node).input_roles
        if loc is None and "weight" in roles:
            vi = g.value_inputs(self.node)
            w = roles.index("weight")
            if w < len(vi) and vi[w]:
                loc = user_location(g, vi[w]) if vi[w] in g else None
        return loc

    def sort_key(self) -> tuple:
        """Execution order: (iteration, ranks, position, inputs before outputs, slot, node)."""
        return (self.iteration, self.a.rank, self.b.rank, self.position, self.group, self.slot, self.node)

    def severity_key(self) -> tuple:
        """Worst first: counted before not counted, errors before warnings; among errors NaN/Inf on
        one side and unreadable files, then shape/dtype, then by cosine (lowest first), missing last."""
        g = {ERROR: 0, WARNING: 1, PASS: 2}.get(self.grade, 3)
        m, o = self.metrics, self.outcome
        if self.missing:
            cls = 3
        elif o is not None and (o.error or o.only_a or o.only_b or o.nonfinite_differ):
            cls = 0
        elif m is None or (o is not None and o.dtype_a != o.dtype_b):
            cls = 1
        else:
            cls = 2
        return (not self.counted, g, cls, m.cosine if m else 2.0, -(m.max_abs_err if m else 0.0), self.sort_key())

    def to_dict(self) -> dict[str, Any]:
        """The documented PAIR object (plus graph, op_type, node_b, match, counted and source)."""
        return {"iteration": self.iteration, "a": self.a.to_dict(), "b": self.b.to_dict(), "node": self.node,
                "param": self.param, "kind": self.kind, "io": self.io, "slot": self.slot,
                "metrics": self.metrics.to_dict() if self.metrics is not None else None,
                "grade": self.grade, "reason": self.reason, "graph": self.graph, "op_type": self.op_type,
                "node_b": self.node_b, "match": self.match or None, "counted": self.counted,
                "source": self.source, "precision": self.precision, "shard": self.shard}


@dataclass
class Unpaired:
    """Nodes of one rank's graph that the other side's graph does not have at all: not compared."""

    rank: int
    graph: int
    a_only: list[str]
    b_only: list[str]

    def to_dict(self) -> dict[str, Any]:
        """The documented UNPAIRED object of ``tdbg compare --json``."""
        return {"rank": self.rank, "graph": self.graph, "a_only": len(self.a_only), "b_only": len(self.b_only),
                "a_only_examples": self.a_only[:5], "b_only_examples": self.b_only[:5]}

    def text(self) -> str:
        """One line for the report."""
        ex = "".join(f"; {side} e.g. {', '.join(names[:3])}" for side, names in (("a", self.a_only), ("b", self.b_only))
                     if names)
        return (f"rank {self.rank} graph {self.graph}: {len(self.a_only)} node(s) of a and {len(self.b_only)} of b are "
                f"not in the other's graph (another program: not compared){ex}")


@dataclass
class CompareResult:
    """Every pair of a comparison, graded, and where the sides first diverge."""

    mode: str                               # "ranks" | "runs"
    a: str                                  # dump root of side a
    b: str                                  # dump root of side b (the same dump in ranks mode)
    ranks: list[int]
    iterations: list[int]
    thresholds: GradeThresholds
    base: int | None = None
    pairs: list[Pair] = field(default_factory=list)
    first_divergence: Pair | None = None
    warnings: list[str] = field(default_factory=list)
    computed: int = 0                       # pairs whose files were read
    cached: int = 0                         # pairs answered by the cache
    bytes_compared: int = 0                 # data bytes read
    empty_reason: str = ""                  # why no pair could be made, when the builder knows best
    # Passing pairs counted, not kept (a comparison of many ranks keeps what diverged): per iteration,
    # [pairs, counted, identical]
    folded: dict[int, list[int]] = field(default_factory=dict)
    programs: list[ProgramPairing] = field(default_factory=list)   # graphs of different programs, paired by operator
    unpaired: list["Unpaired"] = field(default_factory=list)   # nodes one graph has and the other does not

    def keep(self, pairs: Iterable[Pair], passes: bool) -> None:
        """Add graded ``pairs``; passing ones only counted unless ``passes`` (they never make a divergence)."""
        for p in pairs:
            if passes or p.grade != PASS:
                self.pairs.append(p)
                continue
            row = self.folded.setdefault(p.iteration, [0, 0, 0])
            row[0] += 1
            row[1] += p.counted
            row[2] += bool(p.outcome and p.outcome.identical)

    def nothing_compared(self) -> str | None:
        """Why nothing was compared (no pair; in ranks mode, no tensor that must agree), else None."""
        if any(p.counted for p in self.pairs) or any(row[1] for row in self.folded.values()):
            return None
        if self.empty_reason:
            return self.empty_reason
        its = ranges_text(self.iterations)
        if self.mode in ("runs", "logical"):
            return (f"iterations {its} hold no tensor on either side" if self.iterations
                    else "no rank and graph of the two dumps has an iteration dumped on both sides")
        ranks = f"rank{'s' if len(self.ranks) > 1 else ''} {ranges_text(self.ranks)}"
        if not self.iterations:
            return f"{ranks} and base rank {self.base} dumped no iteration"
        n = len(self.pairs) + sum(row[0] for row in self.folded.values())
        listed = f" ({n} tensor(s) that may differ are listed)" if n else ""
        return (f"iterations {its} hold no tensor that must agree across ranks (weights, optimizer state, "
                f"collective outputs){listed}")

    @property
    def errors(self) -> list[Pair]:
        """Pairs graded error that count (every error in runs mode; invariant tensors in ranks mode)."""
        return [p for p in self.pairs if p.counted and p.grade == ERROR]

    @property
    def exit_code(self) -> int:
        """0 when nothing counted is graded error, else 1."""
        return 1 if any(p.counted and p.grade == ERROR for p in self.pairs) else 0

    def divergent(self) -> list[Pair]:
        """Warning and error pairs, worst first."""
        return sorted((p for p in self.pairs if p.grade != PASS), key=Pair.severity_key)

    def summary(self) -> dict[str, Any]:
        """Counts overall and per iteration."""
        per: dict[int, dict[str, int]] = {}
        total = {PASS: 0, WARNING: 0, ERROR: 0}
        for p in self.pairs:
            row = per.setdefault(p.iteration, {"iteration": p.iteration, "pairs": 0, PASS: 0, WARNING: 0, ERROR: 0,
                                               "counted_errors": 0})
            row["pairs"] += 1
            row[p.grade] += 1
            total[p.grade] += 1
            if p.counted and p.grade == ERROR:
                row["counted_errors"] += 1
        for it, (n, _, _) in self.folded.items():
            row = per.setdefault(it, {"iteration": it, "pairs": 0, PASS: 0, WARNING: 0, ERROR: 0, "counted_errors": 0})
            row["pairs"] += n
            row[PASS] += n
            total[PASS] += n
        folded = [sum(row[i] for row in self.folded.values()) for i in range(3)]
        return {"pairs": len(self.pairs) + folded[0], "nothing_compared": self.nothing_compared(), **total,
                "counted": sum(p.counted for p in self.pairs) + folded[1],
                "counted_errors": sum(r["counted_errors"] for r in per.values()),
                "missing": sum(p.missing for p in self.pairs),
                "identical": sum(bool(p.outcome and p.outcome.identical) for p in self.pairs) + folded[2],
                "computed": self.computed, "cached": self.cached, "bytes_compared": self.bytes_compared,
                "iterations": [per[i] for i in sorted(per)]}

    def to_dict(self, all_pairs: bool = False) -> dict[str, Any]:
        """The documented `tdbg compare --json` object; only warning and error pairs unless ``all_pairs``."""
        shown = self.pairs if all_pairs else [p for p in self.pairs if p.grade != PASS]
        return {"mode": self.mode, "a": self.a, "b": self.b, "base": self.base, "ranks": self.ranks,
                "iterations": self.iterations, "thresholds": self.thresholds.to_dict(),
                "summary": self.summary(),
                "first_divergence": self.first_divergence.to_dict() if self.first_divergence else None,
                "pairs": [p.to_dict() for p in shown], "warnings": list(self.warnings),
                "programs": [p.to_dict() for p in self.programs], "unpaired": [u.to_dict() for u in self.unpaired]}


def open_any(dump: "Dump | str") -> Dump:
    """A Dump from a Dump or a path."""
    if isinstance(dump, Dump):
        return dump
    return open_dump(os.fspath(dump))


def iteration_set(iterations: "Iterable[int] | str | None") -> set[int] | None:
    """None (all), or the selected iterations from ints or ``0-5,8`` text (DumpError when bad)."""
    if iterations is None:
        return None
    if isinstance(iterations, str):
        try:
            return parse_iterations(iterations)
        except ValueError as exc:
            raise DumpError(None, str(exc)) from None
    return {int(i) for i in iterations}


def graph_place(graph: Graph | None, node: str, io: str) -> tuple[int, int]:
    """(position, group) of a tensor in execution order: see :attr:`Pair.group`."""
    if graph is None or node not in graph:
        return (len(graph.execution_order) if graph is not None else 1 << 30), 1
    pos = position(graph, node)
    if graph.record_of(node).is_parameter:
        return pos, (2 if node in optimizer_slots(graph) else -1)
    return pos, (0 if io == "input" else 1)


def make_pair(it: int, side_a: Side, side_b: Side, gid: int, ra: TensorRef | None, rb: TensorRef | None,
              method: str, ga: Graph | None, gb: Graph | None, counted: bool = True) -> Pair:
    """A pair of two matched tensors (one may be None)."""
    ref = ra if ra is not None else rb
    assert ref is not None
    graph = ga if ra is not None else gb
    pos, group = graph_place(graph, ref.node, ref.io)
    if group == -1 and ra is not None and rb is not None and ga is not None and gb is not None \
            and gb is not ga and rb.node in optimizer_slots(gb):
        # a weight side a records without its optimizer (a compiled program's operators, a coarser
        # level) that side b's optimizer updates: its value is the step's result, placed after a's kernels
        pos, group = len(ga.execution_order) + graph_place(gb, rb.node, rb.io)[0], 2
    node_b = rb.node if rb is not None and ra is not None and rb.node != ra.node else None
    param = ref.param if ref.param is not None else (rb.param if rb else None)
    kind = ref.kind
    if ref.io == "input" and param is None:
        # an input slot carries another node's value: a weight (its gradient, its state) is named as such
        kind, param = _arriving(graph, ref.node, ref.slot, kind)
    precision = coarser(declared_dtype(ga, ra.node, ra.io, ra.slot) if ra is not None else None,
                        declared_dtype(gb, rb.node, rb.io, rb.slot) if rb is not None else None)
    return Pair(it, side_a, side_b, ref.node, param, kind, ref.io, ref.slot, gid, ref.op_type, node_b, method,
                counted, pos, group, ref_a=ra, ref_b=rb, graph_obj=graph, precision=precision)


def _arriving(graph: Graph | None, node: str, slot: int, kind: str) -> tuple[str, str | None]:
    """(kind, param) of the value that arrives at input ``slot`` of ``node``, when it belongs to a weight."""
    if graph is None or node not in graph:
        return kind, None
    vi = graph.value_inputs(node)
    src = vi[slot] if slot < len(vi) else ""
    a = graph.get(src) if src else None
    if a is None or a.param is None or a.kind not in (Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE):
        return kind, None
    return a.kind, a.param
