"""Run watchpoints over a dump: plan each step's checks, compute their tensors in batches on a pool,
evaluate them, and order the hits by where a problem starts."""
from __future__ import annotations

import hashlib
import json
from collections import deque
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from .. import __version__
from ..cache import StatsCache
from ..formats.records import Kind
from ..model import Dump, Rank
from ..gcpause import paused_gc
from .registry import BACKWARD, BUFFER, COPY, Watchpoint
from .results import ErrorRecord, Hit, ScanResult
from ..selection import parse_iterations

if TYPE_CHECKING:   # the tensor work (numpy, pools) loads after the stored-result lookup, which needs none of it
    from ..executors import Workers
    from .batch import Batch, Parts
    from .conditions import Step
    from ..model.graph import Graph
    from ..model import TensorRef

__all__ = ["ErrorRecord", "Hit", "ScanResult", "parse_iterations", "scan", "scan_warnings"]

_BATCH_TASKS = 2048   # tensors planned per batch on one machine; a cluster gets more (see _batch_tasks)
_AHEAD = 2   # batches computing while the oldest one is evaluated (memory: a few batches of tasks)
_RESULT_FORMAT = 8   # bump when the engine's results change: stored results of older rules are not reused


def scan(dump: Dump, watchpoints: list[Watchpoint], *, ranks: Iterable[int] | None = None,
         iterations: set[int] | str | None = None, where: str | None = None, jobs: int | None = None,
         cache: StatsCache | None = None, progress: Callable[[int, int], None] | None = None,
         workers: Workers | None = None) -> ScanResult:
    """Check ``watchpoints`` on every selected tensor of ``dump``; hits sorted first-occurrence first.

    ``workers`` (a Dask cluster, say) runs the tensor work; default: a local pool of ``jobs`` processes.
    """
    with paused_gc():
        return _scan(dump, watchpoints, ranks, iterations, where, jobs, cache, progress, workers)


def _scan(dump: Dump, watchpoints: list[Watchpoint], ranks: Iterable[int] | None, iterations: set[int] | str | None,
          where: str | None, jobs: int | None, cache: StatsCache | None,
          progress: Callable[[int, int], None] | None, workers: Workers | None) -> ScanResult:
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
    from ..executors import local_workers
    from .select import where_nodes

    selected = where_nodes(dump, where)
    units = [(r, gid) for r in rank_objs for gid in sorted(set(r.graph_ids))]
    all_its = sorted({it for r, gid in units for it in r.iterations(gid)
                      if iterations is None or it in iterations})
    result = ScanResult(dump.root, rank_ids, all_its, list(watchpoints))
    steps = [(r, gid, it) for it in all_its for r, gid in units if it in set(r.iterations(gid))]
    own = workers is None
    pool = local_workers(jobs) if workers is None else workers
    try:
        done = 0
        running: deque[tuple[list[Step], Batch, Parts]] = deque()
        # Pipelined: while the workers compute the batches started, this process plans the next ones;
        # batches finish in order, so hits and progress come as from a run without workers.
        for batch_steps, batch in _batches(steps, watchpoints, selected, cache, _batch_tasks(pool)):
            running.append((batch_steps, batch, batch.start(pool)))
            if len(running) > _AHEAD:
                done += _finish(running.popleft(), result)
                if progress is not None:
                    progress(done, len(steps))
        while running:
            done += _finish(running.popleft(), result)
            if progress is not None:
                progress(done, len(steps))
    finally:
        if own:
            pool.close()
        cache.flush()
    from .steps import apply_step_facts

    apply_step_facts(result, rank_objs)
    result.sort()
    if ranks is None:
        for r in dump.ranks:
            r.index  # noqa: B018 - built already, unless a rank had nothing to scan: its warnings come from it
        result.rank_warnings = [w for r in dump.ranks for w in r.warnings]
    if key is not None:
        cache.put_result(key, {**result.to_dict(), "rank_warnings": result.rank_warnings})
    return result


def scan_warnings(dump: Dump, result: ScanResult) -> list[str]:
    """The dump's load warnings to report with ``result`` (``Dump.all_warnings``, without loading graphs
    and index again when the result, stored or fresh, already knows those of every rank)."""
    if result.rank_warnings is None or [r.rank for r in dump.ranks] != result.ranks:
        return dump.all_warnings()
    return [*dump.warnings, *result.rank_warnings]


def _result_key(dump: Dump, wps: list[Watchpoint], ranks: list[int], iterations: set[int] | None,
                where: str | None) -> str:
    spec = json.dumps([_RESULT_FORMAT, __version__, [w.to_dict() for w in wps], ranks,
                       sorted(iterations) if iterations is not None else None, where,
                       dump.fingerprint(ranks)], sort_keys=True)
    return hashlib.blake2b(spec.encode(), digest_size=16).hexdigest()


def _finish(running: tuple[list[Step], Batch, Parts], result: ScanResult) -> int:
    from .conditions import rule_of
    from .layers import apply_whole_layer
    from .zeros import apply_zero_origins

    steps, batch, parts = running
    result.files_checked += batch.finish(parts)
    for step in steps:
        first_hit = len(result.hits)
        for item in step.planned:
            rule_of(item.wp.condition).evaluate(item, batch, result)
        apply_zero_origins(step, batch, result, first_hit)
        apply_whole_layer(step, result, first_hit)
    return len(steps)


def _batch_tasks(workers: Workers) -> int:
    """Tensors per batch: enough to keep every worker of a cluster busy, bounded for memory."""
    return _BATCH_TASKS if not workers.cluster else max(_BATCH_TASKS, min(1 << 16, 256 * workers.slots))


def _batches(steps: list[tuple[Rank, int, int]], wps: list[Watchpoint], selected: dict[int, set[str]] | None,
             cache: StatsCache, size: int) -> Iterator[tuple[list[Step], Batch]]:
    from .batch import Batch

    batch = Batch(cache)
    pending: list[Step] = []
    for rank, gid, it in steps:
        pending.append(_plan_step(rank, gid, it, wps, selected, batch))
        if batch.size() >= size:
            yield pending, batch
            batch, pending = Batch(cache), []
    if pending:
        yield pending, batch


def _plan_step(rank: Rank, gid: int, it: int, wps: list[Watchpoint], selected: dict[int, set[str]] | None,
               batch: Batch) -> Step:
    from .conditions import Step, rule_of
    from .select import is_float, is_undefined
    from .zeros import plan_upstream

    graph = rank.graphs.get(gid)
    tmap = rank.tensor_map(gid, it)
    where = None if selected is None else selected.get(gid, set())
    floats = [r for r in tmap.values() if is_float(r, graph) and (where is None or r.node in where)
              and not is_undefined(r, graph)]
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
