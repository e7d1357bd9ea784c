"""Run watchpoints over a dump: hits and error records, ordered by where a problem starts."""
from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import multiprocessing as mp
import os
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from ..cache import StatsCache
from ..graph import Graph
from ..locate import parameters_read, position, readers, user_location
from ..errors import QueryError
from ..model import Dump, Rank, TensorRef
from ..source import parse_location
from ..stats import Stats
from .compute import FileResult, FileTask, PairResult, PairTask, UnitSpec, run_file_task, run_pair_task
from .registry import (HISTORY, INITIAL, LOSS_HISTORY, OPS, OVERFLOW, PREVIOUS, RANGE, UNITS, Watchpoint)

_FLOAT_NAMES = {"float16", "float32", "float64", "bfloat16"}
# SageMaker's non-saturated input ranges of tanh and sigmoid.
_ACTIVE_INPUT = {"tanh": (-9.4999, 9.4999), "sigmoid": (-23.0, 16.99999)}
_BATCH_TASKS = 2048
_RESULT_FORMAT = 3   # bump when the engine's results change: stored results of older rules are not reused


@dataclass
class Hit:
    """A watchpoint that fired on one tensor."""

    watchpoint: str
    rank: int
    graph: int
    iteration: int
    node: str
    kind: str
    param: str | None
    io: str
    slot: int
    actual: dict[str, float]
    threshold: dict[str, float]
    source: str | None
    position: int = 0
    op_type: str = ""
    order: int = 0          # the watchpoint's place in the scan's list
    collective: bool = False   # the node exchanges values between ranks (not in the JSON)

    def sort_key(self) -> tuple:
        """(iteration, rank, execution order, watchpoint, io, slot).

        A collective (all-reduce ...) whose non-finite output came from another rank is an origin on
        its own rank too; within an iteration it sorts after the origins of computing kernels, so
        that ``first`` names the rank where the NaN was made.
        """
        relayed = self.watchpoint == "overflow" and self.collective
        return (self.iteration, relayed, self.rank, self.position, self.order, self.io, self.slot, self.node)

    def to_dict(self) -> dict[str, Any]:
        """The documented HIT object."""
        return {"watchpoint": self.watchpoint, "rank": self.rank, "graph": self.graph,
                "iteration": self.iteration, "node": self.node, "kind": self.kind, "param": self.param,
                "io": self.io, "slot": self.slot, "actual": self.actual, "threshold": self.threshold,
                "source": self.source, "op_type": self.op_type, "position": self.position,
                "watchpoint_index": self.order}


_HIT_FIELDS = ("watchpoint", "rank", "graph", "iteration", "node", "kind", "param", "io", "slot", "actual",
               "threshold", "source", "position", "op_type")


@dataclass
class ErrorRecord:
    """A watchpoint that could not be checked on one tensor, and why."""

    watchpoint: str
    rank: int
    iteration: int
    node: str
    error: str
    graph: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The documented ERR object."""
        return {"watchpoint": self.watchpoint, "rank": self.rank, "graph": self.graph,
                "iteration": self.iteration, "node": self.node, "error": self.error}


@dataclass
class ScanResult:
    """Everything a scan found."""

    dump: str
    ranks: list[int]
    iterations: list[int]
    watchpoints: list[Watchpoint]
    hits: list[Hit] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    files_checked: int = 0

    @property
    def first(self) -> Hit | None:
        """The earliest hit: where the trouble starts."""
        return self.hits[0] if self.hits else None

    @classmethod
    def from_dict(cls, d: dict[str, Any], watchpoints: list[Watchpoint]) -> "ScanResult":
        """Inverse of :meth:`to_dict` (the watchpoints are given again, as objects)."""
        hits = [Hit(**{k: h[k] for k in _HIT_FIELDS}, order=h.get("watchpoint_index", 0)) for h in d["hits"]]
        errors = [ErrorRecord(**e) for e in d["errors"]]
        return cls(d["dump"], d["ranks"], d["iterations"], watchpoints, hits, errors)

    def to_dict(self) -> dict[str, Any]:
        """The documented `tdbg scan --json` object."""
        return {"dump": self.dump, "ranks": self.ranks, "iterations": self.iterations,
                "watchpoints": [{"name": w.name, "params": dict(w.params)} for w in self.watchpoints],
                "hits": [h.to_dict() for h in self.hits], "errors": [e.to_dict() for e in self.errors],
                "first": self.first.to_dict() if self.first else None}


# -- target selection ---------------------------------------------------------------------------
def parse_iterations(text: str | None) -> set[int] | None:
    """``0-5,8`` -> {0..5, 8}; None for all."""
    if text is None or str(text).strip() in ("", "all"):
        return None
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if lo > hi:
                    raise ValueError
                out.update(range(lo, hi + 1))
            elif part:
                out.add(int(part))
        except ValueError:
            raise ValueError(f"bad iteration range {text!r}: expected e.g. 0-5,8") from None
    return out


def _where_nodes(dump: Dump, where: str | None) -> dict[int, set[str]] | None:
    """graph id -> nodes made by a code line, plus the weights they read and those weights' gradients."""
    if not where:
        return None
    file, line = parse_location(where)
    out: dict[int, set[str]] = {}
    for h in dump.nodes_at(file, line):
        out.setdefault(h["graph"], set()).add(h["node"])
    if not out:
        raise QueryError(dump.root, f"no node was created by {where} (see `tdbg code` for the known lines)")
    for r in dump.ranks:
        for gid, nodes in out.items():
            g = r.graphs.get(gid)
            if g is None:
                continue
            weights = set()
            for n in list(nodes):
                if n in g.nx:
                    weights |= {p for p in parameters_read(g, n) if g.nx.nodes[p].get("kind") == "weight"}
            nodes |= weights
            nodes |= {n for n, a in g.nx.nodes(data=True) if a.get("param") in weights and a.get("kind") == "gradient"}
    return out


def _is_float(ref: TensorRef, graph: Graph | None) -> bool:
    if ref.file_dtype is not None:
        return ref.file_dtype in _FLOAT_NAMES
    if graph is not None and ref.io == "output" and ref.node in graph.nx:
        outs = graph.nx.nodes[ref.node].get("outputs") or []
        if ref.slot < len(outs) and outs[ref.slot].dtype:
            return outs[ref.slot].dtype in _FLOAT_NAMES
    try:
        return ref.dtype.kind == "f"
    except Exception:  # an unreadable header is reported when the file is read
        return True


def _matches(wp: Watchpoint, ref: TensorRef, graph: Graph | None, where: set[str] | None) -> bool:
    if ref.kind not in wp.condition.kinds:
        return False
    if where is not None and ref.node not in where:
        return False
    if wp.condition.op_types and ref.op_type.lower() not in wp.condition.op_types:
        return False
    if wp.node and not (fnmatch.fnmatchcase(ref.node, wp.node) or (ref.param and fnmatch.fnmatchcase(ref.param, wp.node))):
        return False
    if wp.scope:
        names = [ref.node]
        if graph is not None and ref.node in graph.nx and graph.nx.nodes[ref.node].get("is_parameter"):
            names = [k for k, _ in readers(graph).get(ref.node, [])]
        if not any(n.startswith(wp.scope) for n in names):
            return False
    return True


# -- the scan -----------------------------------------------------------------------------------
@dataclass
class _Check:
    wp: Watchpoint
    order: int
    rank: Rank
    graph: Graph | None
    gid: int
    iteration: int
    ref: TensorRef
    extra: list[TensorRef] = field(default_factory=list)   # previous values, history, initial value
    error: str | None = None
    units: UnitSpec | None = None   # the unit-activity spec this check asked for


@dataclass
class _Step:
    rank: Rank
    gid: int
    graph: Graph | None
    iteration: int
    checks: list[_Check]
    overflow: list[tuple[Watchpoint, int, list[TensorRef]]]   # (watchpoint, order, the tensors it searches)
    tmap: dict[tuple[str, str, int], TensorRef]


class _Batch:
    """Tasks of several steps, de-duplicated and served from the cache where possible."""

    def __init__(self, cache: StatsCache) -> None:
        self.cache = cache
        self.files: dict[str, FileTask] = {}
        self.pairs: dict[tuple[str, str], PairTask] = {}
        self.file_results: dict[str, FileResult] = {}
        self.pair_results: dict[tuple[str, str], PairResult] = {}
        self.refs: dict[str, TensorRef] = {}
        self.reads = 0

    def want_stats(self, ref: TensorRef, ranges: Iterable[tuple[float, float]] = (),
                   units: Iterable[UnitSpec] = ()) -> None:
        t = self.files.get(ref.identity)
        if t is None:
            t = self.files[ref.identity] = FileTask(ref.source)
            self.refs[ref.identity] = ref
        if ranges:
            t.ranges.update(ranges)
        if units:
            t.units.update(units)

    def want_pair(self, cur: TensorRef, prev: TensorRef, rtol: float | None = None) -> None:
        k = (cur.identity, prev.identity)
        t = self.pairs.get(k)
        if t is None:
            t = self.pairs[k] = PairTask(cur.source, prev.source)
            self.refs[cur.identity] = cur
            self.refs[prev.identity] = prev
        if rtol is not None:
            t.rtols.add(rtol)
        self.want_stats(prev)
        self.want_stats(cur)

    def size(self) -> int:
        return len(self.files) + len(self.pairs)

    def _from_cache(self) -> tuple[list[FileTask], list[PairTask]]:
        if not self.cache.enabled:
            self.file_results = {p: FileResult() for p in self.files}
            self.pair_results = {k: PairResult() for k in self.pairs}
            return list(self.files.values()), list(self.pairs.values())
        return self._files_from_cache(), self._pairs_from_cache()

    def _files_from_cache(self) -> list[FileTask]:
        todo: list[FileTask] = []
        for ident, t in self.files.items():
            res = FileResult(stats=self.cache.get(ident))
            missing = FileTask(t.source, base=res.stats is None)
            for r in t.ranges:
                count = self.cache.get_extra(f"{ident}|range|{r[0]!r}|{r[1]!r}")
                if count is None:
                    missing.ranges.add(r)
                else:
                    res.ranges[r] = int(count)
            for u in t.units:
                pct = self.cache.get_extra(f"{ident}|units|{u!r}")
                if pct is None:
                    missing.units.add(u)
                else:
                    res.units[u] = pct
            self.file_results[ident] = res
            if missing.base or missing.ranges or missing.units:
                todo.append(missing)
        return todo

    def _pairs_from_cache(self) -> list[PairTask]:
        todo: list[PairTask] = []
        for k, t in self.pairs.items():
            ident = f"{k[0]}>{k[1]}"
            res = PairResult(self.cache.get_extra(f"{ident}|dmean"))
            missing = PairTask(t.cur, t.prev)
            for rtol in t.rtols:
                excess = self.cache.get_extra(f"{ident}|excess|{rtol!r}")
                if excess is None:
                    missing.rtols.add(rtol)
                else:
                    res.excess[rtol] = excess
            self.pair_results[k] = res
            if res.diff_abs_mean is None or missing.rtols:
                todo.append(missing)
        return todo

    def start(self, pool: Executor | None, jobs: int) -> list[tuple[str, list, Future | None]]:
        """Look up the cache and hand what it lacks to the pool in a few large chunks."""
        todo_f, todo_p = self._from_cache()
        self.reads = len(todo_f) + 2 * len(todo_p)
        parts: list[tuple[str, list, Future | None]] = []
        for kind, todo in (("file", todo_f), ("pair", todo_p)):
            if not todo:
                continue
            if pool is None or len(todo) < 16:
                parts.append((kind, todo, None))
                continue
            # A few chunks per worker: IPC per chunk, not per tensor, and still balanced.
            n = max(1, len(todo) // (jobs * 4))
            for i in range(0, len(todo), n):
                chunk = todo[i:i + n]
                parts.append((kind, chunk, pool.submit(_run_chunk, kind, chunk)))
        return parts

    def finish(self, parts: list[tuple[str, list, Future | None]]) -> int:
        """Merge the computed results; returns the number of tensor reads."""
        for kind, chunk, fut in parts:
            results = fut.result() if fut is not None else _run_chunk(kind, chunk)
            merge = self._merge_file if kind == "file" else self._merge_pair
            for t, res in zip(chunk, results):
                merge(t, res)  # type: ignore[arg-type]
        return self.reads

    def _merge_file(self, t: FileTask, res: FileResult) -> None:
        ident = t.source.identity
        have = self.file_results[ident]
        if res.error:
            have.error = res.error
            return
        if res.stats is not None and t.base:
            have.stats = res.stats
            self.cache.put(ident, res.stats)
        for r, count in res.ranges.items():
            have.ranges[r] = count
            self.cache.put_extra(f"{ident}|range|{r[0]!r}|{r[1]!r}", count)
        for u, pct in res.units.items():
            have.units[u] = pct
            self.cache.put_extra(f"{ident}|units|{u!r}", pct)

    def _merge_pair(self, t: PairTask, res: PairResult) -> None:
        k = (t.cur.identity, t.prev.identity)
        have = self.pair_results[k]
        if res.error:
            have.error = res.error
            return
        ident = f"{k[0]}>{k[1]}"
        if res.diff_abs_mean is not None:
            have.diff_abs_mean = res.diff_abs_mean
            self.cache.put_extra(f"{ident}|dmean", res.diff_abs_mean)
        for r, v in res.excess.items():
            have.excess[r] = v
            self.cache.put_extra(f"{ident}|excess|{r!r}", v)

    def stats(self, ref: TensorRef) -> tuple[Stats | None, str | None]:
        res = self.file_results.get(ref.identity)
        if res is None:
            return None, f"{ref.location}: not computed"
        return res.stats, res.error


def scan(dump: Dump, watchpoints: list[Watchpoint], *, ranks: Iterable[int] | None = None,
         iterations: set[int] | str | None = None, where: str | None = None, jobs: int | None = None,
         cache: StatsCache | None = None, progress: Callable[[int, int], None] | None = None) -> ScanResult:
    """Check ``watchpoints`` on every selected tensor of ``dump``; hits sorted first-occurrence first."""
    if isinstance(iterations, str):
        iterations = parse_iterations(iterations)
    rank_ids = sorted(ranks) if ranks is not None else dump.rank_ids
    rank_objs = [dump.rank(r) for r in rank_ids]
    cache = cache or StatsCache(enabled=False)
    key = None
    if cache.enabled:
        # An unchanged dump (same names, sizes, mtimes) and the same request: reuse the result.
        key = _result_key(dump, watchpoints, rank_ids, iterations, where)
        stored = cache.get_result(key)
        if stored is not None:
            return ScanResult.from_dict(stored, list(watchpoints))
    where_nodes = _where_nodes(dump, where)
    units = [(r, gid) for r in rank_objs for gid in sorted(set(r.graph_ids))]
    all_its = sorted({it for r, gid in units for it in r.iterations(gid)
                      if iterations is None or it in iterations})
    result = ScanResult(dump.root, rank_ids, all_its, list(watchpoints))
    steps = [(r, gid, it) for it in all_its for r, gid in units if it in set(r.iterations(gid))]
    jobs = jobs or os.cpu_count() or 1
    pool: Executor | None = None
    if jobs > 1:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork"))
    try:
        done = 0
        running: tuple[list[_Step], _Batch, list] | None = None
        # Pipelined: while the workers compute one batch, this process plans the next.
        for batch_steps, batch in _batches(steps, watchpoints, where_nodes, cache):
            parts = batch.start(pool, jobs)
            if running is not None:
                done += _finish(running, result)
                if progress is not None:
                    progress(done, len(steps))
            running = (batch_steps, batch, parts)
        if running is not None:
            done += _finish(running, result)
            if progress is not None:
                progress(done, len(steps))
    finally:
        if pool is not None:
            pool.shutdown()
        cache.flush()
    result.hits.sort(key=Hit.sort_key)
    result.errors.sort(key=lambda e: (e.iteration, e.rank, e.watchpoint, e.node))
    if key is not None:
        cache.put_result(key, result.to_dict())
    return result


def _result_key(dump: Dump, wps: list[Watchpoint], ranks: list[int], iterations: set[int] | None,
                where: str | None) -> str:
    from .. import __version__

    spec = json.dumps([_RESULT_FORMAT, __version__, [w.to_dict() for w in wps], ranks,
                       sorted(iterations) if iterations is not None else None, where,
                       dump.fingerprint(ranks)], sort_keys=True)
    return hashlib.blake2b(spec.encode(), digest_size=16).hexdigest()


def _run_chunk(kind: str, tasks: list) -> list:
    """Worker entry point: compute a list of file or pair tasks."""
    fn = run_file_task if kind == "file" else run_pair_task
    return [fn(t) for t in tasks]


def _finish(running: tuple[list[_Step], _Batch, list], result: ScanResult) -> int:
    steps, batch, parts = running
    result.files_checked += batch.finish(parts)
    for st in steps:
        _evaluate(st, batch, result)
    return len(steps)


def _batches(steps: list[tuple[Rank, int, int]], wps: list[Watchpoint], where_nodes: dict[int, set[str]] | None,
             cache: StatsCache) -> Iterator[tuple[list[_Step], _Batch]]:
    batch = _Batch(cache)
    pending: list[_Step] = []
    for rank, gid, it in steps:
        pending.append(_plan_step(rank, gid, it, wps, where_nodes, batch))
        if batch.size() >= _BATCH_TASKS:
            yield pending, batch
            batch, pending = _Batch(cache), []
    if pending:
        yield pending, batch


def _plan_step(rank: Rank, gid: int, it: int, wps: list[Watchpoint], where_nodes: dict[int, set[str]] | None,
               batch: _Batch) -> _Step:
    graph = rank.graphs.get(gid)
    tmap = rank.tensor_map(gid, it)
    where = None if where_nodes is None else where_nodes.get(gid, set())
    step = _Step(rank, gid, graph, it, [], [], tmap)
    floats = [r for r in tmap.values() if _is_float(r, graph) and (where is None or r.node in where)]
    outputs_by_kind: dict[str, list[TensorRef]] = {}
    for r in floats:
        if r.io == "output":
            outputs_by_kind.setdefault(r.kind, []).append(r)
    for order, wp in enumerate(wps):
        if wp.condition.needs == OVERFLOW:
            # inputs and outputs of the selected nodes: --node and --scope narrow the search too
            mine = floats if not (wp.node or wp.scope) else [r for r in floats if _matches(wp, r, graph, None)]
            step.overflow.append((wp, order, mine))
            for ref in mine:
                batch.want_stats(ref)
            continue
        for kind in wp.condition.kinds:
            for ref in outputs_by_kind.get(kind, ()):
                if not _matches(wp, ref, graph, None):
                    continue
                chk = _Check(wp, order, rank, graph, gid, it, ref)
                _plan_check(chk, batch)
                step.checks.append(chk)
    return step


def _plan_check(chk: _Check, batch: _Batch) -> None:
    wp, ref, rank = chk.wp, chk.ref, chk.rank
    needs = wp.condition.needs
    if needs in (PREVIOUS, HISTORY):
        count = int(wp.setting("num_steps")) if needs == HISTORY else 2
        chain = [ref]
        it = chk.iteration
        while len(chain) < count:
            if needs == PREVIOUS:   # the previous run of the graph
                prev_it = rank.previous_iteration(chk.gid, it)
            else:                   # tensor_unchanged: the last num_steps DUMPED iterations (as SageMaker)
                prev_it = max((i for i in rank.iterations(chk.gid) if i < it), default=None)
            if prev_it is None and needs == PREVIOUS:
                before = _value_before_update(chk)
                if before is not None:
                    chain.append(before)
                    break
            if prev_it is None:
                chk.error = "no previous iteration" if len(chain) == 1 else \
                    f"needs {count} dumped iterations, only {len(chain)} up to this one"
                return
            prev = rank.tensor_map(chk.gid, prev_it).get(ref.key)
            if prev is None:
                chk.error = f"no previous value: iteration {prev_it} has no dump of this tensor"
                return
            chain.append(prev)
            it = prev_it
        chk.extra = chain[1:]
        rtol = wp.params.get("rtol")
        for a, b in zip(chain, chain[1:]):
            batch.want_pair(a, b, rtol)
    elif needs == UNITS:
        op = ref.op_type.lower()
        thr = wp.setting("threshold_inactivity")
        if op in _ACTIVE_INPUT:
            lo, hi = _ACTIVE_INPUT[op]
            src = chk.rank.tensor_map(chk.gid, chk.iteration).get((ref.node, "input", 0))
            if src is None:  # no pre-activation dumped: map the input range through the function
                f = (lambda v: 1.0 / (1.0 + math.exp(-v))) if op == "sigmoid" else math.tanh
                lo, hi, src = f(lo), f(hi), ref
            chk.extra = [src]
            chk.units = ("inside", lo, hi, thr)
            batch.want_stats(ref)
        else:
            chk.extra = [ref]
            chk.units = ("positive", 0.0, 0.0, thr)
        batch.want_stats(chk.extra[0], units=[chk.units])
    elif needs == RANGE:
        lo = wp.params.get("range_start_inclusive", -math.inf)
        hi = wp.params.get("range_end_inclusive", math.inf)
        batch.want_stats(ref, ranges=[(lo, hi)])
    elif needs == INITIAL:
        if rank.previous_iteration(chk.gid, chk.iteration) is not None:
            chk.error = "skip"
            return
        src = _value_before_update(chk) or ref
        chk.extra = [src]
        batch.want_stats(src)
    elif needs == LOSS_HISTORY:
        n = int(wp.setting("num_steps"))
        earlier = [i for i in rank.iterations(chk.gid) if i <= chk.iteration - n]
        if not earlier:
            chk.error = f"no dumped iteration {n} or more iterations earlier"
            return
        prev = rank.tensor_map(chk.gid, max(earlier)).get(ref.key)
        if prev is None:
            chk.error = f"no loss value in iteration {max(earlier)}"
            return
        chk.extra = [prev]
        batch.want_stats(prev)
        batch.want_stats(ref)
    else:
        batch.want_stats(ref)


def _value_before_update(chk: _Check) -> TensorRef | None:
    """A weight's value before this iteration's update: what its first forward reader read."""
    if chk.graph is None or chk.ref.kind != "weight":
        return None
    tmap = chk.rank.tensor_map(chk.gid, chk.iteration)
    for kernel, slot in readers(chk.graph).get(chk.ref.node, []):
        cand = tmap.get((kernel, "input", slot))
        if cand is not None:
            return cand
    return None


def _evaluate(step: _Step, batch: _Batch, result: ScanResult) -> None:
    for chk in step.checks:
        if chk.error == "skip":
            continue
        if chk.error:
            _err(result, chk, chk.error)
            continue
        _evaluate_check(chk, batch, result)
    for wp, order, refs in step.overflow:
        _overflow_origins(step, wp, order, refs, batch, result)


def _err(result: ScanResult, chk: _Check, msg: str) -> None:
    result.errors.append(ErrorRecord(chk.wp.name, chk.rank.rank, chk.iteration, chk.ref.node, msg, chk.gid))


def _hit(result: ScanResult, chk: _Check, actual: dict[str, float], threshold: dict[str, float],
         ref: TensorRef | None = None) -> None:
    ref = ref or chk.ref
    g = chk.graph
    result.hits.append(Hit(
        chk.wp.name, chk.rank.rank, chk.gid, chk.iteration, ref.node, ref.kind, ref.param, ref.io, ref.slot,
        actual, threshold, user_location(g, ref.node) if g is not None else None,
        position(g, ref.node) if g is not None and ref.node in g.nx else 0, ref.op_type, chk.order,
        g is not None and ref.node in g.nx and g.node(ref.node).is_collective))


def _nonfinite_text(s: Stats) -> str:
    parts = [f"{n} {w}" for n, w in ((s.nan, "NaN"), (s.pos_inf, "+Inf"), (s.neg_inf, "-Inf")) if n]
    return "tensor contains " + ", ".join(parts)


def _compare(wp: Watchpoint, values: dict[str, float | None]) -> tuple[dict[str, float], dict[str, float]]:
    actual: dict[str, float] = {}
    threshold: dict[str, float] = {}
    for p, thr in wp.comparisons():
        v = values.get(p.statistic or "")
        if v is not None and OPS[p.op or "gt"](v, thr):
            actual[p.name] = float(v)
            threshold[p.name] = thr
    return actual, threshold


def _evaluate_check(chk: _Check, batch: _Batch, result: ScanResult) -> None:
    wp, ref = chk.wp, chk.ref
    cond = wp.condition
    needs = cond.needs
    stats, err = batch.stats(chk.extra[0] if needs in (INITIAL, UNITS) else ref)
    if err or stats is None:
        _err(result, chk, err or "no statistics")
        return
    if cond.name in ("weight_overflow", "gradient_exploding", "tensor_overflow", "tensor_exploding"):
        only_nan = cond.name == "tensor_exploding" and wp.setting("only_nan") >= 0.5
        if stats.nan or (not only_nan and stats.has_nonfinite):
            _hit(result, chk, {"nan": float(stats.nan), "pos_inf": float(stats.pos_inf),
                               "neg_inf": float(stats.neg_inf)}, {})
        return
    if stats.has_nonfinite:
        _err(result, chk, _nonfinite_text(stats))
        return
    if stats.finite == 0:
        return
    values: dict[str, float | None] = {
        "abs_mean": stats.abs_mean, "max": stats.max, "min": stats.min, "mean": stats.mean,
        "zero_percentage": stats.zero_percentage,
        "max_min": None if stats.max is None or stats.min is None else stats.max - stats.min}
    if needs == RANGE:
        lo = wp.params.get("range_start_inclusive", -math.inf)
        hi = wp.params.get("range_end_inclusive", math.inf)
        count = batch.file_results[ref.identity].ranges.get((lo, hi))
        values["range_percentage"] = None if count is None else 100.0 * count / stats.count
    elif needs in (PREVIOUS, HISTORY):
        _evaluate_previous(chk, batch, result, values)
        return
    elif needs == UNITS:
        res = batch.file_results[chk.extra[0].identity]
        if res.error:
            _err(result, chk, res.error)
            return
        pct = res.units.get(chk.units) if chk.units is not None else None
        thr = wp.setting("threshold_layer")
        if pct is not None and pct > thr:
            _hit(result, chk, {"threshold_layer": pct}, {"threshold_layer": thr}, chk.extra[0])
        return
    elif needs == LOSS_HISTORY:
        then, err = batch.stats(chk.extra[0])
        if err or then is None or then.mean is None or stats.mean is None:
            _err(result, chk, err or "no loss value")
            return
        if then.has_nonfinite:
            _err(result, chk, "earlier " + _nonfinite_text(then))
            return
        decrease = 100.0 * (then.mean - stats.mean) / (abs(then.mean) or 1.0)
        d = wp.setting("diff_percent")
        if decrease <= d:
            _hit(result, chk, {"diff_percent": decrease}, {"diff_percent": d})
        return
    actual, threshold = _compare(wp, values)
    if actual:
        # weight_initialization reads the value before the first update (a forward kernel's input)
        # but the hit is the weight's: node, kind and param name the weight
        _hit(result, chk, actual, threshold)


def _evaluate_previous(chk: _Check, batch: _Batch, result: ScanResult, values: dict[str, float | None]) -> None:
    wp = chk.wp
    chain = [chk.ref] + chk.extra
    for older in chk.extra:
        s, err = batch.stats(older)
        if err or s is None:
            _err(result, chk, err or "no statistics of the previous value")
            return
        if s.has_nonfinite:
            _err(result, chk, "previous value: " + _nonfinite_text(s))
            return
    pairs = [batch.pair_results[(a.identity, b.identity)] for a, b in zip(chain, chain[1:])]
    for p in pairs:
        if p.error:
            _err(result, chk, p.error)
            return
    name = wp.name
    if name in ("weight_not_changed", "tensor_unchanged"):
        rtol, atol = wp.setting("rtol"), wp.setting("atol")
        worst = max(max(p.excess.get(rtol, math.inf), 0.0) for p in pairs)
        if worst <= atol:
            th = {"atol": atol, "rtol": rtol}
            if name == "tensor_unchanged":
                th["num_steps"] = float(len(chain))
            _hit(result, chk, {"atol": worst}, th)
        return
    prev_stats, _ = batch.stats(chk.extra[0])
    assert prev_stats is not None
    if prev_stats.zeros == prev_stats.count:
        # epsilon guards the division; it is not meant to turn a zero-initialised bias into a hit
        _err(result, chk, "previous value is all zero: update ratio undefined")
        return
    eps = wp.setting("epsilon")
    ratio = (pairs[0].diff_abs_mean or 0.0) / ((prev_stats.abs_mean or 0.0) + eps)
    if name == "weight_update_ratio":
        large, small = wp.setting("large_threshold"), wp.setting("small_threshold")
        if ratio > large:
            _hit(result, chk, {"large_threshold": ratio}, {"large_threshold": large})
        elif ratio < small:
            _hit(result, chk, {"small_threshold": ratio}, {"small_threshold": small})
        return
    values["abs_mean_update_ratio"] = ratio
    actual, threshold = _compare(wp, values)
    if actual:
        _hit(result, chk, actual, threshold)


def _overflow_origins(step: _Step, wp: Watchpoint, order: int, refs: list[TensorRef], batch: _Batch,
                      result: ScanResult) -> None:
    """Kernels whose inputs are finite and whose outputs are not; data inputs that are not finite."""
    bad: dict[tuple[str, str, int], Stats] = {}
    for ref in refs:
        key = ref.key
        res = batch.file_results.get(ref.identity)
        if res is None:
            continue
        if res.error:
            result.errors.append(ErrorRecord(wp.name, step.rank.rank, step.iteration, ref.node, res.error, step.gid))
        elif res.stats is not None and res.stats.has_nonfinite:
            bad[key] = res.stats
    if not bad:
        return
    by_node: dict[str, list[tuple[str, int]]] = {}
    for node, io, slot in bad:
        by_node.setdefault(node, []).append((io, slot))
    graph = step.graph
    order_idx = graph.execution_index if graph is not None else {}
    for node, ios in sorted(by_node.items(), key=lambda kv: order_idx.get(kv[0], 1 << 30)):
        outs = sorted(s for io, s in ios if io == "output")
        if not outs:
            continue
        has_bad_input = any(io == "input" for io, _ in ios)
        ref = step.tmap[(node, "output", outs[0])]
        is_data = ref.kind == "input"
        if has_bad_input or (node not in order_idx and not is_data):
            continue
        s = bad[(node, "output", outs[0])]
        chk = _Check(wp, order, step.rank, graph, step.gid, step.iteration, ref)
        _hit(result, chk, {"nan": float(s.nan), "pos_inf": float(s.pos_inf), "neg_inf": float(s.neg_inf)}, {})
