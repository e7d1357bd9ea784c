"""The tensor work of a scan: plan each step's checks, compute their tensors in batches on a pool, evaluate
them. Imported by :func:`debugger.watch.engine.scan` once no stored result answers (numpy and pools load here)."""
from __future__ import annotations

from collections import deque
from typing import Callable, Iterable, Iterator

from ..cache import StatsCache
from ..executors import Workers, local_workers
from ..formats.records import Kind
from ..model import Dump, Rank, TensorRef
from ..model.graph import Graph
from .batch import Batch, Parts
from .conditions import Step, rule_of
from .layers import apply_whole_layer
from .registry import BACKWARD, BUFFER, COPY, Watchpoint
from .results import ScanResult
from .select import is_float, is_undefined, where_nodes
from .steps import apply_step_facts
from .zeros import apply_zero_origins, plan_upstream

_BATCH_TASKS = 2048   # tensors planned per batch on one machine; a cluster gets more (see _batch_tasks)
_AHEAD = 2   # batches computing while the oldest one is evaluated (memory: a few batches of tasks)


def run_steps(dump: Dump, watchpoints: list[Watchpoint], rank_objs: list[Rank], iterations: set[int] | None,
              where: str | None, jobs: int | None, cache: StatsCache,
              progress: Callable[[int, int], None] | None, workers: Workers | None,
              scope: Iterable[int] | None = None) -> ScanResult:
    """Check ``watchpoints`` on the selected tensors of ``rank_objs``; the hits are not sorted yet. A logical
    tensor (a sharded parameter's) is judged whole, once: by the lowest rank of ``scope`` (default: the
    ranks scanned) that holds a part of it."""
    rank_ids = [r.rank for r in rank_objs]
    reporters = frozenset(scope if scope is not None else rank_ids)
    selected = where_nodes(dump, where)
    all_its = sorted({it for r in rank_objs for gid in set(r.graph_ids) for it in r.iterations(gid)
                      if iterations is None or it in iterations})
    result = ScanResult(dump.root, rank_ids, all_its, list(watchpoints))
    chunks = _rank_chunks(dump, rank_objs)
    total = sum(len(_steps(chunk, all_its)) for chunk in chunks)
    own = workers is None
    pool = local_workers(jobs) if workers is None else workers
    try:
        done = 0
        running: deque[tuple[list[Step], Batch, Parts, list[Rank]]] = deque()
        # Pipelined: while the workers compute the batches started, this process plans the next ones;
        # batches finish in order, so hits and progress come as from a run without workers.
        for chunk in chunks:
            dump.list_ranks([r.rank for r in chunk])   # every step reads its rank's listing: one shared call
            for batch_steps, batch in _batches(_steps(chunk, all_its), watchpoints, selected, cache,
                                               _batch_tasks(pool), reporters):
                running.append((batch_steps, batch, batch.start(pool), []))
                if len(running) > _AHEAD:
                    done += _finish(running.popleft(), result)
                    if progress is not None:
                        progress(done, total)
            if len(chunks) > 1 and running:
                running[-1][3].extend(chunk)   # forgotten once its last batch is evaluated
        while running:
            done += _finish(running.popleft(), result)
            if progress is not None:
                progress(done, total)
    finally:
        if own:
            pool.close()
        cache.flush()
    apply_step_facts(result, rank_objs)
    return result


RANKS_AT_ONCE = 64   # ranks listed, scanned and forgotten together (a dump without a parallel layout)


def _rank_chunks(dump: Dump, ranks: list[Rank]) -> list[list[Rank]]:
    """The ranks a chunk at a time, so that a scan holds a chunk's listings whatever the rank count; all at
    once when a rank has a parallel layout (a sharded parameter is judged from every rank's part)."""
    if len(ranks) <= RANKS_AT_ONCE or any(r.layout is not None for r in ranks):
        return [ranks]
    return [ranks[at:at + RANKS_AT_ONCE] for at in range(0, len(ranks), RANKS_AT_ONCE)]


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
            rule_of(item.wp.condition).evaluate(item, batch, result)
        apply_zero_origins(step, batch, result, first_hit)
        apply_whole_layer(step, result, first_hit)
        # a check holds its step and the step its checks: a cycle the paused collector leaves, with the
        # step's tensors in it (a GB at 1,000 ranks); broken, reference counting frees them here
        step.planned.clear()
    for r in done_ranks:
        r.release()
    return len(steps)


def _batch_tasks(workers: Workers) -> int:
    """Tensors per batch: enough to keep every worker of a cluster busy, bounded for memory."""
    return _BATCH_TASKS if not workers.cluster else max(_BATCH_TASKS, min(1 << 16, 256 * workers.slots))


def _batches(steps: list[tuple[Rank, int, int]], wps: list[Watchpoint], selected: dict[int, set[str]] | None,
             cache: StatsCache, size: int, reporters: frozenset[int]) -> Iterator[tuple[list[Step], Batch]]:
    batch = Batch(cache)
    pending: list[Step] = []
    for rank, gid, it in steps:
        pending.append(_plan_step(rank, gid, it, wps, selected, batch, reporters))
        if batch.size() >= size:
            yield pending, batch
            batch, pending = Batch(cache), []
    if pending:
        yield pending, batch


def _plan_step(rank: Rank, gid: int, it: int, wps: list[Watchpoint], selected: dict[int, set[str]] | None,
               batch: Batch, reporters: frozenset[int]) -> Step:
    graph = rank.graphs.get(gid)
    tmap = rank.tensor_map(gid, it)
    where = None if selected is None else selected.get(gid, set())
    floats = [r for r in tmap.values() if is_float(r, graph) and (where is None or r.node in where)
              and not is_undefined(r, graph) and _reports(r, rank.rank, reporters)]
    step = Step(rank, gid, graph, it, tmap, floats)
    in_place = {n for n in {r.node for r in floats} if graph is not None and n in graph
                and graph.node(n).input_roles}
    for r in floats:
        # an optimizer kernel updates its inputs in place: its outputs are aliases or, on some devices,
        # all-zero placeholders, never the values to check (the updated parameters are, as their own tensors)
        if r.io == "output" and r.node not in in_place:
            step.outputs.setdefault(_target_kind(r, graph), []).append(r)
    for order, wp in enumerate(wps):
        rule_of(wp.condition).plan(wp, order, step, batch)
    plan_upstream(step, batch)
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
