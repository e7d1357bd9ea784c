"""The tensor work of a scan: plan each step's checks, compute their tensors in batches on a pool, evaluate
them. Imported by :func:`debugger.watch.engine.scan` once no stored result answers (numpy and pools load here)."""
from __future__ import annotations

import contextlib
import os
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

from ..stats.cache import StatsCache
from ..common.settings import ranks_at_once
from ..common.executors import Workers, forked, local_workers, shared_with_forks
from ..formats.records import Kind
from ..model import Dump, Rank, TensorRef, dump_at
from ..model.graph import Graph
from .batch import Batch, Parts
from .rules import ByDesign, Planned, RunStart, Search, Step, rule_of
from .layers import apply_whole_layer
from .layerscale import apply_layer_scale, plan_layer_scale
from .registry import BACKWARD, BUFFER, COPY, SERIES, Watchpoint
from .request import ScanRequest, ScanRuntime
from .results import ScanResult
from .select import is_float, is_undefined, where_nodes
from .steps import apply_step_facts
from .sweep import apply_sweep, plan_sweep, sweep_step
from .undumped import undumped
from .zeros import apply_zero_origins, plan_upstream

_BATCH_TASKS = 2048   # tensors planned per batch on one machine; a cluster gets more (see _batch_tasks)
_AHEAD = 2   # batches computing while the oldest one is evaluated (memory: a few batches of tasks)


def run_steps(dump: Dump, request: ScanRequest, runtime: ScanRuntime, rank_objs: list[Rank]) -> ScanResult:
    """Check the request's watchpoints on the selected tensors of ``rank_objs``; the hits are not sorted yet. A
    logical tensor (a sharded parameter's) is judged whole, once: by the lowest rank of the request's scope
    (default: the ranks scanned) that holds a part of it."""
    rank_ids = [r.rank for r in rank_objs]
    wanted, scope, cache = request.iterations, request.scope, runtime.cache
    jobs, workers = runtime.jobs, runtime.workers
    plan = _Plan(list(request.watchpoints), where_nodes(dump, request.where),
                 frozenset(scope if scope is not None else rank_ids), cache,
                 sorted({it for r in rank_objs for gid in set(r.graph_ids) for it in r.iterations(gid)
                         if wanted is None or it in wanted}))
    result = ScanResult(dump.root, rank_ids, plan.iterations, list(request.watchpoints))
    chunks = _rank_chunks(dump, rank_objs)
    told = _Told(runtime.progress, sum(len(_steps(chunk, plan.iterations)) for chunk in chunks))
    cores = max(1, jobs or os.cpu_count() or 1)
    try:
        if workers is None and cores > 1 and len(chunks) > 1:
            _on_forks(dump, [(chunk, plan.iterations) for chunk in chunks], plan, jobs, result, told, True)
        elif workers is None and cores > 1 and _worth_splitting(dump, chunks[0], plan, cores):
            its, n = plan.iterations, cores * 2   # runs of iterations: a step's previous one is mostly in its run
            units = [(chunks[0], its[k * len(its) // n:(k + 1) * len(its) // n]) for k in range(n)]
            _on_forks(dump, [u for u in units if u[1]], plan, jobs, result, told, False)
        else:
            with _workers(jobs, workers) as pool:
                _pipelined(dump, chunks, plan, pool, result, told)
    finally:
        cache.flush()
    apply_step_facts(result, rank_objs)
    apply_sweep(result)
    return result


@dataclass(frozen=True)
class _Plan:
    """What every step of one scan is checked for: the watchpoints, the nodes selected, the ranks that report
    logical tensors, the statistics cache and the iterations scanned."""

    watchpoints: list[Watchpoint]
    selected: dict[int, set[str]] | None
    reporters: frozenset[int]
    cache: StatsCache
    iterations: list[int]


class _Told:
    """Progress: steps done of the total, told as each batch (or chunk of ranks) is evaluated."""

    def __init__(self, progress: Callable[[int, int], None] | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def add(self, steps: int) -> None:
        """Count ``steps`` more as done and tell."""
        self.done += steps
        if self.progress is not None:
            self.progress(self.done, self.total)


@contextlib.contextmanager
def _workers(jobs: int | None, workers: Workers | None) -> Iterator[Workers]:
    """The workers given, else a local pool of ``jobs`` processes closed after."""
    if workers is not None:
        yield workers
        return
    with local_workers(jobs) as pool:
        yield pool


def _pipelined(dump: Dump, chunks: list[list[Rank]], plan: _Plan, pool: Workers, result: ScanResult,
               told: _Told) -> None:
    """The scan planned and judged here, its tensors' statistics computed on ``pool``: while the workers
    compute the batches started, this process plans the next ones; batches finish in order, so hits and
    progress come as from a run without workers. Each chunk of ranks is forgotten once judged."""
    running: deque[tuple[list[Step], Batch, Parts, list[Rank]]] = deque()
    for chunk in chunks:
        dump.list_ranks([r.rank for r in chunk])   # every step reads its rank's listing: one shared call
        for batch_steps, batch in _batches(_steps(chunk, plan.iterations), plan, _batch_tasks(pool)):
            running.append((batch_steps, batch, batch.start(pool), []))
            if len(running) > _AHEAD:
                told.add(_finish(running.popleft(), result))
        if len(chunks) > 1 and running:
            running[-1][3].extend(chunk)   # forgotten once its last batch is evaluated
    while running:
        told.add(_finish(running.popleft(), result))


SPLIT_FILES = 20_000   # one chunk of ranks with this many tensor files is split by iteration over the cores


def _worth_splitting(dump: Dump, ranks: list[Rank], plan: _Plan, cores: int) -> bool:
    """Whether one chunk of ranks is scanned faster split by iteration over forked workers (then listed here,
    first, for them all): enough files and iterations, no parallel layout (its logical tensors stay here)."""
    if len(plan.iterations) < cores or any(r.layout is not None for r in ranks):
        return False
    dump.list_ranks([r.rank for r in ranks])
    return sum(len(refs) for r in ranks for refs in r.index.values()) >= SPLIT_FILES


def _on_forks(dump: Dump, units: list[tuple[list[Rank], list[int]]], plan: _Plan, jobs: int | None,
              result: ScanResult, told: _Told, release: bool) -> None:
    """Each unit of work (ranks, iterations) scanned whole (listed, planned, computed, judged) by a forked
    worker, the parts added in order: the listing and the judging spread over the cores too, not only the
    statistics. ``release``: a worker forgets a unit's ranks after it (chunks of ranks; not when split by
    iteration, which the parent listed for every worker)."""
    dump.load_graphs(dict.fromkeys(r.rank for ranks, _ in units for r in ranks))
    with local_workers(jobs) as pool, shared_with_forks(dump=dump, scan_plan=plan):
        futures = [pool.submit(scan_ranks, dump.root, [r.rank for r in ranks], its, release) for ranks, its in units]
        for (ranks, its), future in zip(units, futures):
            part, warnings, entries = future.result()
            result.absorb(part)
            plan.cache.add_new(entries)
            for r in ranks:
                r.adopt_warnings(warnings[r.rank])
            told.add(len(_steps(ranks, its)))


def scan_ranks(root: str, rank_ids: list[int], iterations: list[int], release: bool
               ) -> tuple[ScanResult, dict[int, list[str]], Any]:
    """Worker entry point: scan some ranks' iterations in this process with the plan its parent shared;
    (what was found, each rank's new warnings, the statistics computed for the cache)."""
    dump, plan = dump_at(root), replace(forked("scan_plan"), iterations=iterations)
    ranks = [dump.rank(r) for r in rank_ids]
    seen = {r.rank: len(r.warnings) for r in ranks}
    part = ScanResult(root, rank_ids, iterations, list(plan.watchpoints))
    _pipelined(dump, [ranks], plan, Workers(None, 1), part, _Told(None, 0))
    new = {r.rank: r.warnings[seen[r.rank]:] for r in ranks}
    for r in ranks if release else ():
        r.release()
    return part, new, plan.cache.take_new()


RANKS_AT_ONCE = 64   # ranks listed, scanned and forgotten together (a dump without a parallel layout)


def _rank_chunks(dump: Dump, ranks: list[Rank]) -> list[list[Rank]]:
    """The ranks a chunk at a time, so that a scan holds a chunk's listings whatever the rank count; all at
    once when a rank has a parallel layout (a sharded parameter is judged from every rank's part)."""
    at_once = ranks_at_once(RANKS_AT_ONCE)
    if len(ranks) <= at_once or any(r.layout is not None for r in ranks):
        return [ranks]
    return [ranks[at:at + at_once] for at in range(0, len(ranks), at_once)]


def _steps(ranks: list[Rank], all_its: list[int]) -> list[tuple[Rank, int, int]]:
    """(rank, graph, iteration) of every dumped step of ``ranks``, iteration by iteration."""
    units = [(r, gid) for r in ranks for gid in sorted(set(r.graph_ids))]
    dumped = {(r.rank, gid): set(r.iterations(gid)) for r, gid in units}
    return [(r, gid, it) for it in all_its for r, gid in units if it in dumped[r.rank, gid]]


def _finish(running: tuple[list[Step], Batch, Parts, list[Rank]], result: ScanResult) -> int:
    steps, batch, parts, done_ranks = running
    result.files_checked += batch.finish(parts)
    for step in steps:
        first_hit = len(result.hits)
        for item in step.planned:
            result.pending.clear()
            rule_of(item.wp.condition).evaluate(item, batch, result)
            _tally(item, step, result.pending)
        result.keep_step(step.rank.rank, step.iteration, step.coverage)
        sweep_step(step, batch, result)
        apply_zero_origins(step, batch, result, first_hit)
        apply_layer_scale(step, batch, result, first_hit)
        apply_whole_layer(step, result, first_hit)
        # a check holds its step and the step its checks: a cycle the paused collector leaves, with the
        # step's tensors in it (a GB at 1,000 ranks); broken, reference counting frees them here
        step.planned.clear()
    for r in done_ranks:
        r.release()
    return len(steps)


def _tally(item: Planned, step: Step, notes: list[str]) -> None:
    """Count one evaluated item in its step's coverage: checked, not applicable by design, or a gap (the
    notes its evaluation left: conditions.add_error)."""
    met = step.coverage[item.order]
    gaps = [n for n in notes if not isinstance(n, (ByDesign, RunStart))]
    if isinstance(item, Search):     # one search over many tensors: each unreadable one is a gap
        for n in gaps:
            met.gap(n)
        ran = len(item.refs) - len(gaps)
        met.not_applicable += len(item.left_out)
    elif gaps:
        met.gap(gaps[0])
        ran = 0
    elif notes:
        met.not_applicable += 1
        ran = 0
    else:
        ran = 1
    if ran > 0:
        met.checked += ran
        met.iterations.add(step.iteration)
        met.ranks.add(step.rank.rank)


def _batch_tasks(workers: Workers) -> int:
    """Tensors per batch: enough to keep every worker of a cluster busy, bounded for memory."""
    return _BATCH_TASKS if not workers.cluster else max(_BATCH_TASKS, min(1 << 16, 256 * workers.slots))


def _batches(steps: list[tuple[Rank, int, int]], plan: _Plan, size: int) -> Iterator[tuple[list[Step], Batch]]:
    batch = Batch(plan.cache)
    pending: list[Step] = []
    for rank, gid, it in steps:
        pending.append(_plan_step(rank, gid, it, plan.watchpoints, plan.selected, batch, plan.reporters))
        if batch.size() >= size:
            yield pending, batch
            batch, pending = Batch(plan.cache), []
    if pending:
        yield pending, batch


def _plan_step(rank: Rank, gid: int, it: int, wps: list[Watchpoint], selected: dict[int, set[str]] | None,
               batch: Batch, reporters: frozenset[int]) -> Step:
    graph = rank.graphs.get(gid)
    tmap = rank.tensor_map(gid, it)
    where = None if selected is None else selected.get(gid, set())
    floats = [r for r in tmap.values() if is_float(r, graph) and (where is None or r.node in where)
              and not is_undefined(r, graph) and _reports(r, rank.rank, reporters)]
    # a format whose iterations record what ran in each (msprobe) lacks by design what did not run
    missing = {} if rank.info.iterations_vary else undumped(rank.rank, gid, it, graph, tmap, where)
    step = Step(rank, gid, graph, it, tmap, floats, undumped=missing)
    in_place = {n for n in {r.node for r in floats} if graph is not None and n in graph
                and graph.node(n).input_roles}
    for r in floats:
        # an optimizer kernel updates its inputs in place: its outputs are aliases or, on some devices,
        # all-zero placeholders, never the values to check (the updated parameters are, as their own tensors)
        if r.io == "output" and r.node not in in_place:
            step.outputs.setdefault(_target_kind(r, graph), []).append(r)
    for order, wp in enumerate(wps):
        if wp.condition.needs == SERIES:    # over the per-step series (cli/scan_series), not iterations
            continue
        rule_of(wp.condition).plan(wp, order, step, batch)
    plan_upstream(step, batch)
    plan_layer_scale(step, batch)
    plan_sweep(step, batch, wps)
    return step


def _reports(ref: TensorRef, rank: int, reporters: frozenset[int]) -> bool:
    """Whether ``rank`` judges ``ref``: its own tensors always; a logical tensor only when it is the lowest
    rank among ``reporters`` holding a part (the others' parts are in the whole it judges)."""
    if not ref.is_logical:
        return True
    holders = [p.rank for p in ref.pieces if p.rank in reporters]
    return not holders or min(holders) == rank


def _target_kind(ref: TensorRef, graph: Graph | None) -> str:
    """The key a scan step sorts a tensor's output under: its kind, except that the backward pass's
    intermediates (gradients of activations, kind other) are BACKWARD and copies of values made elsewhere
    (kind other on a routing node: clone, detach, Load) COPY, and the model's buffers (kind other on a
    parameter with a value of its own: BatchNorm's running statistics) BUFFER, which only "any" targets. A backward
    intermediate that is all zero follows from a zero gradient above it (a dead layer, a loss term
    weighted 0, the max shift of a log-softmax, whose gradient is exactly zero), and the weights' gradients
    below it are checked as gradients; a copy's value is checked where it was made."""
    if ref.kind != Kind.OTHER or graph is None or ref.node not in graph:
        return ref.kind
    node = graph.node(ref.node)
    if node.is_routing:
        return COPY
    if node.is_parameter and node.has_default:
        return BUFFER
    return BACKWARD if node.is_backward else ref.kind
