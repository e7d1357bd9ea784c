"""Dump A against dump B (the same rank and iteration in both), and what both compare modes share:
pairs, their computation (cache, fork process pool), grades and the first divergence.

Side a is the run under test, side b the baseline: relative errors divide by b, and a tensor with
no partner is "missing on b" (or "missing on a").
"""
from __future__ import annotations

import os
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..cache import StatsCache
from ..errors import DumpError, QueryError
from ..executors import Workers, local_workers
from ..formats.base import TensorSource
from ..model.graph import Graph
from ..model.locate import optimizer_slots, position, user_location
from ..model import Dump, Rank, TensorRef
from .match import NodeMatch, check_mapping, load_mapping, match_graphs, match_tensors
from .metrics import (ERROR, PASS, WARNING, Metrics, Outcome, Thresholds, as_thresholds, cache_names,
                      cached_outcome, compare_sources, grade, outcome_to_extras)

MISSING_ON_A, MISSING_ON_B = "missing on a", "missing on b"
# Below this many bytes to read, pairs are compared in this process: forking costs more than it saves.
POOL_MIN_BYTES = 32 << 20
_CHUNK_TASKS = 256

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

    @property
    def missing(self) -> bool:
        """Whether the tensor exists on one side only."""
        return self.ref_a is None or self.ref_b is None

    @property
    def source(self) -> str | None:
        """``file:line`` of the user code that made the node (for a parameter: its first reader; for
        an optimizer kernel: the weight it updates)."""
        g = self.graph_obj
        if g is None or self.node not in g.nx:
            return None
        loc = user_location(g, self.node)
        roles = g.node(self.node).input_roles
        if loc is None and "weight" in roles:
            vi = g.value_inputs(self.node)
            w = roles.index("weight")
            if w < len(vi) and vi[w]:
                loc = user_location(g, vi[w]) if vi[w] in g.nx else None
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
                "source": self.source}


@dataclass
class CompareResult:
    """Every pair of a comparison, graded, and where the sides first diverge."""

    mode: str                               # "ranks" | "runs"
    a: str                                  # dump root of side a
    b: str                                  # dump root of side b (the same dump in ranks mode)
    ranks: list[int]
    iterations: list[int]
    thresholds: Thresholds
    base: int | None = None
    pairs: list[Pair] = field(default_factory=list)
    first_divergence: Pair | None = None
    warnings: list[str] = field(default_factory=list)
    computed: int = 0                       # pairs whose files were read
    cached: int = 0                         # pairs answered by the cache
    bytes_compared: int = 0                 # data bytes read
    empty_reason: str = ""                  # why no pair could be made, when the builder knows best

    def nothing_compared(self) -> str | None:
        """Why nothing was compared (no pair; in ranks mode, no tensor that must agree), else None."""
        if any(p.counted for p in self.pairs):
            return None
        if self.empty_reason:
            return self.empty_reason
        its = _fmt(self.iterations)
        if self.mode == "runs":
            return (f"iterations {its} hold no tensor on either side" if self.iterations
                    else "no rank and graph of the two dumps has an iteration dumped on both sides")
        ranks = f"rank{'s' if len(self.ranks) > 1 else ''} {_fmt(self.ranks)}"
        if not self.iterations:
            return f"{ranks} and base rank {self.base} dumped no iteration"
        listed = f" ({len(self.pairs)} tensor(s) that may differ are listed)" if self.pairs else ""
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
        return {"pairs": len(self.pairs), "nothing_compared": self.nothing_compared(), **total,
                "counted": sum(p.counted for p in self.pairs),
                "counted_errors": sum(r["counted_errors"] for r in per.values()),
                "missing": sum(p.missing for p in self.pairs),
                "identical": sum(bool(p.outcome and p.outcome.identical) for p in self.pairs),
                "computed": self.computed, "cached": self.cached, "bytes_compared": self.bytes_compared,
                "iterations": [per[i] for i in sorted(per)]}

    def to_dict(self, all_pairs: bool = False) -> dict[str, Any]:
        """The documented `tdbg compare --json` object; only warning and error pairs unless ``all_pairs``."""
        shown = self.pairs if all_pairs else [p for p in self.pairs if p.grade != PASS]
        return {"mode": self.mode, "a": self.a, "b": self.b, "base": self.base, "ranks": self.ranks,
                "iterations": self.iterations, "thresholds": self.thresholds.to_dict(),
                "summary": self.summary(),
                "first_divergence": self.first_divergence.to_dict() if self.first_divergence else None,
                "pairs": [p.to_dict() for p in shown], "warnings": list(self.warnings)}


# -- building pairs -----------------------------------------------------------------------------
def open_any(dump: "Dump | str") -> Dump:
    """A Dump from a Dump or a path."""
    if isinstance(dump, Dump):
        return dump
    from ..model import open_dump

    return open_dump(os.fspath(dump))


def iteration_set(iterations: "Iterable[int] | str | None") -> set[int] | None:
    """None (all), or the selected iterations from ints or ``0-5,8`` text (DumpError when bad)."""
    if iterations is None:
        return None
    if isinstance(iterations, str):
        from ..selection import parse_iterations

        try:
            return parse_iterations(iterations)
        except ValueError as exc:
            raise DumpError(None, str(exc)) from None
    return {int(i) for i in iterations}


def graph_place(graph: Graph | None, node: str, io: str) -> tuple[int, int]:
    """(position, group) of a tensor in execution order: see :attr:`Pair.group`."""
    if graph is None or node not in graph.nx:
        return (len(graph.execution_order) if graph is not None else 1 << 30), 1
    pos = position(graph, node)
    if graph.nx.nodes[node].get("is_parameter"):
        return pos, (2 if node in optimizer_slots(graph) else -1)
    return pos, (0 if io == "input" else 1)


def make_pair(it: int, side_a: Side, side_b: Side, gid: int, ra: TensorRef | None, rb: TensorRef | None,
              method: str, ga: Graph | None, gb: Graph | None, counted: bool = True) -> Pair:
    """A pair of two matched tensors (one may be None)."""
    ref = ra if ra is not None else rb
    assert ref is not None
    graph = ga if ra is not None else gb
    pos, group = graph_place(graph, ref.node, ref.io)
    node_b = rb.node if rb is not None and ra is not None and rb.node != ra.node else None
    param = ref.param if ref.param is not None else (rb.param if rb else None)
    kind = ref.kind
    if ref.io == "input" and param is None:
        # an input slot carries another node's value: a weight (its gradient, its state) is named as such
        kind, param = _arriving(graph, ref.node, ref.slot, kind)
    return Pair(it, side_a, side_b, ref.node, param, kind, ref.io, ref.slot, gid, ref.op_type, node_b, method,
                counted, pos, group, ref_a=ra, ref_b=rb, graph_obj=graph)


def _arriving(graph: Graph | None, node: str, slot: int, kind: str) -> tuple[str, str | None]:
    """(kind, param) of the value that arrives at input ``slot`` of ``node``, when it belongs to a weight."""
    if graph is None or node not in graph.nx:
        return kind, None
    vi = graph.value_inputs(node)
    src = vi[slot] if slot < len(vi) else ""
    a = graph.nx.nodes.get(src) if src else None
    if a is None or a.get("param") is None or a.get("kind") not in ("weight", "gradient", "optimizer_state"):
        return kind, None
    return a["kind"], a["param"]


# -- computing ----------------------------------------------------------------------------------
def _pair_key(p: Pair) -> str:
    assert p.ref_a is not None and p.ref_b is not None
    return f"{p.ref_a.identity}>{p.ref_b.identity}"


def compare_chunk(tasks: list[tuple[TensorSource, TensorSource]], fast: bool) -> list[Outcome]:
    """Worker entry point: compare a list of tensor pairs."""
    return [compare_sources(a, b, fast) for a, b in tasks]


def evaluate(result: CompareResult, jobs: int | None = None, cache: StatsCache | None = None, fast: bool = True,
             progress: Progress | None = None, workers: Workers | None = None) -> None:
    """Compute (or fetch from the cache) every pair's outcome, grade it, find the first divergence.

    ``workers`` (a Dask cluster, say) compares the pairs; default: a local pool of ``jobs`` processes
    when there is enough to read.
    """
    cache = cache or StatsCache(enabled=False)
    todo: list[Pair] = []
    for p in result.pairs:
        if p.missing:
            continue
        if cache.enabled:
            o = cached_outcome(cache.get_extra, _pair_key(p))
            if o is not None:
                p.outcome = o
                result.cached += 1
                continue
        todo.append(p)
    total = sum(p.ref_a.size + p.ref_b.size for p in todo if p.ref_a is not None and p.ref_b is not None)
    jobs = max(1, jobs or os.cpu_count() or 1)
    done = 0
    if progress is not None:
        progress(0, len(todo))
    try:
        if workers is not None and workers.cluster and todo:
            done = _in_pool(todo, total, workers, fast, progress)
        elif jobs == 1 or total < POOL_MIN_BYTES or len(todo) < 2 or (workers is not None and workers.executor is None):
            for p in todo:
                p.outcome = compare_sources(p.ref_a.source, p.ref_b.source, fast)  # type: ignore[union-attr]
                done += 1
                if progress is not None:
                    progress(done, len(todo))
        elif workers is not None:
            done = _in_pool(todo, total, workers, fast, progress)
        else:
            with local_workers(jobs) as pool:
                done = _in_pool(todo, total, pool, fast, progress)
        for p in todo:
            assert p.outcome is not None
            result.bytes_compared += p.outcome.nbytes
            extras = outcome_to_extras(p.outcome)
            if extras is not None and cache.enabled:
                for k, v in cache_names(_pair_key(p), extras):
                    cache.put_extra(k, v)
        result.computed += len(todo)
    finally:
        cache.flush()
    th = result.thresholds
    for p in result.pairs:
        if p.missing:
            p.grade, p.reason = ERROR, (MISSING_ON_B if p.ref_b is None else MISSING_ON_A)
            continue
        assert p.outcome is not None
        p.grade, p.reason = grade(p.outcome, th)
        p.metrics = p.outcome.metrics if p.outcome.metrics is not None and not p.outcome.shape_mismatch else None
    result.pairs.sort(key=Pair.sort_key)
    result.first_divergence = first_divergence(result.pairs)


def _in_pool(todo: list[Pair], total: int, workers: Workers, fast: bool, progress: Progress | None) -> int:
    """Compare pairs on the workers, a few chunks of similar size per worker (results keyed by pair, so a
    chunk Dask runs again after losing a worker gives the same outcomes)."""
    target = max(4 << 20, total // (workers.slots * 8))
    chunks: list[list[Pair]] = [[]]
    size = 0
    for p in todo:
        if chunks[-1] and (size >= target or len(chunks[-1]) >= _CHUNK_TASKS):
            chunks.append([])
            size = 0
        chunks[-1].append(p)
        size += p.ref_a.size + p.ref_b.size  # type: ignore[union-attr]
    done = 0
    futs = {workers.submit(compare_chunk, [(p.ref_a.source, p.ref_b.source) for p in c], fast): c  # type: ignore[union-attr]
            for c in chunks}
    for fut in as_completed(futs):
        chunk = futs[fut]
        for p, o in zip(chunk, fut.result()):
            p.outcome = o
        done += len(chunk)
        if progress is not None:
            progress(done, len(todo))
    return done


# -- first divergence ---------------------------------------------------------------------------
def first_divergence(pairs: list[Pair]) -> Pair | None:
    """The earliest iteration with a counted error, and in it the first tensor in execution order
    whose divergence is not inherited: a kernel output whose inputs agree, a kernel input whose
    producer's output agrees, an updated parameter whose optimizer's other inputs agree.

    Missing tensors count only when nothing else diverged (they say nothing about values)."""
    cands = [p for p in pairs if p.counted and p.grade == ERROR]
    real = [p for p in cands if not p.missing]
    pool = real or cands
    if not pool:
        return None
    it0 = min(p.iteration for p in pool)
    first = sorted((p for p in pool if p.iteration == it0),
                   key=lambda p: (p.position, p.group, p.a.rank, p.b.rank, p.slot, p.node, p.io))
    idx: dict[tuple[int, int, str, str, int], Pair] = {}
    outs: dict[tuple[int, int, str], list[Pair]] = {}
    for p in pairs:
        if p.iteration == it0 and p.counted:
            idx[(p.a.rank, p.b.rank, p.node, p.io, p.slot)] = p
            if p.io == "output":
                outs.setdefault((p.a.rank, p.b.rank, p.node), []).append(p)
    for p in first:
        if not _inherited(p, idx, outs):
            return p
    return first[0]


def _bad(p: Pair | None) -> bool:
    return p is not None and p.grade == ERROR and not p.missing


def _inherited(p: Pair, idx: dict, outs: dict) -> bool:
    """Whether the pair's divergence comes from an earlier diverging tensor of the same iteration."""
    g = p.graph_obj
    if g is None or p.node not in g.nx:
        return False
    ranks = (p.a.rank, p.b.rank)
    a = g.nx.nodes[p.node]
    if a.get("is_parameter"):
        opt = optimizer_slots(g).get(p.node)
        if opt is None:
            return False   # read-only parameters (data, learning rates) start a divergence themselves
        return _inputs_bad(g, opt[0], ranks, idx, outs)
    if p.io == "input":
        if p.slot in _in_place_slots(g, p.node):
            # an in-place input holds the updated value: it comes from this kernel's own update
            return any(_bad(q) for q in outs.get((*ranks, p.node), ())) or _inputs_bad(g, p.node, ranks, idx, outs)
        ins = a.get("inputs", ())
        if p.slot >= len(ins) or not ins[p.slot][0]:
            return False
        return _producer_bad(g, ins[p.slot][0], ranks, idx, outs)
    return _inputs_bad(g, p.node, ranks, idx, outs)


def _inputs_bad(g: Graph, kernel: str, ranks: tuple[int, int], idx: dict, outs: dict) -> bool:
    """Whether a kernel's inputs (not counting in-place optimizer slots) disagree."""
    a = g.nx.nodes[kernel]
    skip = _in_place_slots(g, kernel)
    ins = a.get("inputs", ())
    seen_any = False
    for s, (src, edge) in enumerate(ins):
        if s in skip or edge == "control" or not src:
            continue
        q = idx.get((*ranks, kernel, "input", s))
        if q is not None:
            seen_any = True
            if _bad(q):
                return True
    if seen_any:
        return False
    # inputs not dumped: ask the producers' outputs
    return any(_producer_bad(g, src, ranks, idx, outs) for s, (src, edge) in enumerate(ins)
               if s not in skip and edge != "control" and src)


def _in_place_slots(g: Graph, kernel: str) -> set[int]:
    """Input slots an optimizer kernel updates in place (the weight and its state)."""
    return {i for i, r in enumerate(g.node(kernel).input_roles) if r in ("weight", "state")}


def _producer_bad(g: Graph, src: str, ranks: tuple[int, int], idx: dict, outs: dict) -> bool:
    node = g.value_source(src)
    if node not in g.nx:
        return False
    na = g.nx.nodes[node]
    if na.get("is_constant"):
        return False
    if na.get("is_parameter"):
        # a forward reader reads the value of the previous iteration, which agreed; an in-place read
        # of an updated parameter is handled with its optimizer
        return False
    return any(_bad(q) for q in outs.get((*ranks, node), ()))


# -- runs ---------------------------------------------------------------------------------------
def compare_runs(dump_a: "Dump | str", dump_b: "Dump | str", ranks: Iterable[int] | None = None,
                 iterations: "Iterable[int] | str | None" = None, mapping: "Mapping[str, str] | str | None" = None,
                 thresholds: "Thresholds | Mapping[str, Any] | str | None" = None, jobs: int | None = None,
                 cache: StatsCache | None = None, *, fast: bool = True,
                 progress: Progress | None = None, workers: Workers | None = None) -> CompareResult:
    """Compare run A (under test) with run B (baseline): the same rank and iteration on both sides.

    ``mapping`` is a dict or the path of a JSON file ``{"a_name": "b_name"}``; ``fast=False``
    computes every metric even of byte-identical chunks (for benchmarks).
    """
    da, db = open_any(dump_a), open_any(dump_b)
    th = as_thresholds(thresholds)
    sel = iteration_set(iterations)
    if isinstance(mapping, (str, os.PathLike)):
        names = load_mapping(os.fspath(mapping))
    else:
        names = check_mapping(mapping) if mapping is not None else {}
    warnings: list[str] = []
    common = sorted(set(da.rank_ids) & set(db.rank_ids))
    if ranks is not None:
        want = sorted(set(int(r) for r in ranks))
        for r in want:
            for d in (da, db):
                if r not in d.rank_ids:
                    raise QueryError(d.root, f"no rank {r} (ranks: {d.rank_ids})")
        common = want
    else:
        for d, other in ((da, db), (db, da)):
            extra = sorted(set(d.rank_ids) - set(other.rank_ids))
            if extra:
                warnings.append(f"{d.root}: rank(s) {extra} have no counterpart in {other.root}; not compared")
    if not common:
        raise DumpError(da.root, f"no rank in common with {db.root} (ranks {da.rank_ids} vs {db.rank_ids})")
    result = CompareResult("runs", da.root, db.root, common, [], th, warnings=warnings)
    all_its: set[int] = set()
    for r in common:
        ra, rb = da.rank(r), db.rank(r)
        _runs_rank(result, ra, rb, sel, names, all_its)
    if sel is not None and not all_its:
        raise QueryError(da.root, f"no selected iteration ({_fmt(sel)}) was dumped on both sides")
    if not all_its:
        its_a, its_b = ({it for r in common for it in d.rank(r).iterations()} for d in (da, db))
        result.empty_reason = (f"no iteration was dumped on both sides (a has {_fmt(its_a)}, b has {_fmt(its_b)}, "
                               f"ranks {_fmt(common)})")
    return finish(result, all_its, jobs, cache, fast, progress, workers)


def finish(result: CompareResult, iterations: set[int], jobs: int | None, cache: StatsCache | None,
           fast: bool, progress: Callable[[int, int], None] | None, workers: Workers | None = None) -> CompareResult:
    """Record the iterations, de-duplicate warnings and compute every pair's metrics."""
    result.iterations = sorted(iterations)
    result.warnings = list(dict.fromkeys(result.warnings))
    evaluate(result, jobs, cache, fast, progress, workers)
    return result


def _fmt(its: Iterable[int]) -> str:
    from ..selection import ranges_text

    return ranges_text(its)


def _runs_rank(result: CompareResult, ra: Rank, rb: Rank, sel: set[int] | None, names: Mapping[str, str],
               all_its: set[int]) -> None:
    side_a, side_b = Side(result.a, ra.rank), Side(result.b, rb.rank)
    ga_all, gb_all = ra.graphs, rb.graphs
    gids_a, gids_b = set(ra.graph_ids), set(rb.graph_ids)
    for gid in sorted(gids_a ^ gids_b):
        where = result.a if gid in gids_a else result.b
        result.warnings.append(f"{where}: rank {ra.rank} graph {gid} exists on one side only; not compared")
    for gid in sorted(gids_a & gids_b):
        ga, gb = ga_all.get(gid), gb_all.get(gid)
        nm: NodeMatch = match_graphs(ga, gb, names, result.warnings,
                                     (ra.alias_resolver(gid), rb.alias_resolver(gid)))
        its_a, its_b = set(ra.iterations(gid)), set(rb.iterations(gid))
        if sel is not None:
            its_a, its_b = its_a & sel, its_b & sel
        for only, side in ((its_a - its_b, result.a), (its_b - its_a, result.b)):
            if only:
                result.warnings.append(f"{side}: rank {ra.rank} graph {gid} iteration(s) {_fmt(only)} dumped on "
                                       "this side only; not compared")
        for it in sorted(its_a & its_b):
            all_its.add(it)
            for ta, tb, method in match_tensors(ra.tensor_map(gid, it), rb.tensor_map(gid, it), nm):
                result.pairs.append(make_pair(it, side_a, side_b, gid, ta, tb, method, ga, gb))
