"""Grading the pairs of a comparison: each pair's outcome computed (here, on a fork pool or a Dask cluster)
or read from the cache, graded, and the first divergence found."""
from __future__ import annotations

import os
from concurrent.futures import Future, as_completed
from typing import Callable

from ..stats.cache import StatsCache
from ..common.executors import Workers, local_workers
from ..formats.base import TensorSource
from .cachecodec import cache_names, cached_outcome, outcome_to_extras
from .divergence import first_divergence
from .grades import ERROR, grade
from .outcome import Outcome
from .precision import thresholds_for
from .pairs import MISSING_ON_A, MISSING_ON_B, CompareResult, Pair, Progress
from .values import compare_many

# Below this many bytes to read, pairs are compared in this process: forking costs more than it saves.
POOL_MIN_BYTES = 32 << 20
_CHUNK_TASKS = 256


def _pair_key(p: Pair) -> tuple[str, str]:
    assert p.ref_a is not None and p.ref_b is not None
    return p.ref_a.identity, p.ref_b.identity


def compare_chunk(tasks: list[tuple[TensorSource, TensorSource]], fast: bool) -> list[Outcome]:
    """Worker entry point: compare a list of tensor pairs."""
    return compare_many(tasks, fast)


def evaluate(result: CompareResult, jobs: int | None = None, cache: StatsCache | None = None, fast: bool = True,
             progress: Progress | None = None, workers: Workers | None = None) -> None:
    """Compute (or fetch from the cache) every pair's outcome, grade it, find the first divergence.

    ``workers`` (a Dask cluster, say) compares the pairs; default: a local pool of ``jobs`` processes
    when there is enough to read.
    """
    grade_pairs(result, jobs, cache, fast, progress, workers)
    result.pairs.sort(key=Pair.sort_key)
    result.first_divergence = first_divergence(result.pairs)


def grade_pairs(result: CompareResult, jobs: int | None = None, cache: StatsCache | None = None, fast: bool = True,
                progress: Progress | None = None, workers: Workers | None = None) -> None:
    """Compute (or fetch from the cache) the outcome of every pair of ``result`` and grade it."""
    start_grading(result, jobs, cache, fast, progress, workers)()


def start_grading(result: CompareResult, jobs: int | None, cache: StatsCache | None, fast: bool,
                  progress: Progress | None, workers: Workers | None) -> Callable[[], None]:
    """Start :func:`grade_pairs` and return what waits for the outcomes and grades them: the caller
    prepares more pairs meanwhile. ``workers`` (a Dask cluster, say) compares the pairs; default: a
    local pool of ``jobs`` processes when there is enough to read."""
    cache = cache or StatsCache(enabled=False)
    todo = _by_side_b(_uncached(result, cache))
    total = sum(p.ref_a.stored_bytes + p.ref_b.stored_bytes for p in todo)  # type: ignore[union-attr]
    jobs = max(1, jobs or os.cpu_count() or 1)
    if progress is not None:
        progress(0, len(todo))
    own = None
    if todo and not (workers is not None and workers.cluster) and (jobs == 1 or total < POOL_MIN_BYTES or len(todo) < 2):
        workers = None        # not worth a pool: compared here
    elif todo and workers is None:
        workers = own = local_workers(jobs)
    futs = _submit(todo, total, workers, fast) if todo and workers is not None and workers.executor is not None else None

    def wait_and_grade() -> None:
        try:
            if futs is not None:
                _collect(futs, len(todo), progress)
            else:
                _here(todo, fast, progress)
            _record(result, todo, cache)   # type: ignore[arg-type]
        finally:
            cache.flush()   # type: ignore[union-attr]
            if own is not None:
                own.close()
        _grade(result)
    return wait_and_grade


def _uncached(result: CompareResult, cache: StatsCache) -> list[Pair]:
    """The pairs still to compare: neither missing a side nor answered from the cache (those get theirs)."""
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
    return todo


def _by_side_b(todo: list[Pair]) -> list[Pair]:
    """The pairs grouped by their side b, first seen first (otherwise in their order): pairs sharing a b
    (every rank against the base) then come together, and the b is read once for them all."""
    groups: dict[str, list[Pair]] = {}
    for p in todo:
        groups.setdefault(p.ref_b.identity, []).append(p)  # type: ignore[union-attr]
    return todo if len(groups) == len(todo) else [p for g in groups.values() for p in g]


def _here(todo: list[Pair], fast: bool, progress: Progress | None) -> None:
    """Compare the pairs in this process."""
    for i in range(0, len(todo), _CHUNK_TASKS):
        part = todo[i:i + _CHUNK_TASKS]
        for p, o in zip(part, compare_many([(p.ref_a.source, p.ref_b.source) for p in part], fast)):  # type: ignore[union-attr]
            p.outcome = o
        if progress is not None:
            progress(i + len(part), len(todo))


def _submit(todo: list[Pair], total: int, workers: Workers, fast: bool) -> dict[Future, list[Pair]]:
    """Send the pairs to the workers, a few chunks of similar size per worker (results keyed by pair, so a
    chunk Dask runs again after losing a worker gives the same outcomes)."""
    target = max(4 << 20, total // (workers.slots * 8))
    chunks: list[list[Pair]] = [[]]
    size = 0
    for p in todo:
        if chunks[-1] and (size >= target or len(chunks[-1]) >= _CHUNK_TASKS):
            chunks.append([])
            size = 0
        chunks[-1].append(p)
        size += p.ref_a.stored_bytes + p.ref_b.stored_bytes  # type: ignore[union-attr]
    return {workers.submit(compare_chunk, [(p.ref_a.source, p.ref_b.source) for p in c], fast): c  # type: ignore[union-attr]
            for c in chunks}


def _collect(futs: dict[Future, list[Pair]], total: int, progress: Progress | None) -> None:
    """Wait for the workers' outcomes and give each to its pair."""
    done = 0
    for fut in as_completed(futs):
        chunk = futs[fut]
        for p, o in zip(chunk, fut.result()):
            p.outcome = o
        done += len(chunk)
        if progress is not None:
            progress(done, total)


def _record(result: CompareResult, todo: list[Pair], cache: StatsCache) -> None:
    """Count what was compared and store the outcomes in the cache."""
    for p in todo:
        assert p.outcome is not None
        result.bytes_compared += p.outcome.nbytes
        extras = outcome_to_extras(p.outcome) if cache.enabled else None
        if extras is not None:
            for k, v in cache_names(_pair_key(p), extras):
                cache.put_extra(k, v)
    result.computed += len(todo)


def _grade(result: CompareResult) -> None:
    """Grade every pair from its outcome (a pair missing a side is an error)."""
    th = result.thresholds
    for p in result.pairs:
        if p.missing:
            p.grade, p.reason = ERROR, (MISSING_ON_B if p.ref_b is None else MISSING_ON_A)
            continue
        assert p.outcome is not None
        p.grade, p.reason = grade(p.outcome, thresholds_for(th, p.precision), p.precision is not None)
        if p.precision is not None:
            p.reason += f" (graded at {p.precision} precision)"
        p.metrics = p.outcome.metrics if p.outcome.metrics is not None and not p.outcome.shape_mismatch else None


def finish(result: CompareResult, iterations: set[int], jobs: int | None, cache: StatsCache | None,
           fast: bool, progress: Progress | None, workers: Workers | None = None) -> CompareResult:
    """Record the iterations, de-duplicate warnings and compute every pair's metrics."""
    result.iterations = sorted(iterations)
    result.warnings = list(dict.fromkeys(result.warnings))
    evaluate(result, jobs, cache, fast, progress, workers)
    return result


def conclude(result: CompareResult, iterations: set[int]) -> CompareResult:
    """:func:`finish` of a result whose pairs are graded already (compared part by part)."""
    result.iterations = sorted(iterations)
    result.warnings = list(dict.fromkeys(result.warnings))
    result.pairs.sort(key=Pair.sort_key)
    result.first_divergence = first_divergence(result.pairs)
    return result
