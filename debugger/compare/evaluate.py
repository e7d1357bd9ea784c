"""Grading the pairs of a comparison: each pair's outcome computed (here, on a fork pool or a Dask cluster)
or read from the cache, graded, and the first divergence found."""
from __future__ import annotations

import os
from concurrent.futures import as_completed

from ..cache import StatsCache
from ..executors import Workers, local_workers
from ..formats.base import TensorSource
from .cachecodec import cache_names, cached_outcome, outcome_to_extras
from .divergence import first_divergence
from .grades import ERROR, grade
from .outcome import Outcome
from .precision import thresholds_for
from .pairs import MISSING_ON_A, MISSING_ON_B, CompareResult, Pair, Progress
from .values import compare_sources

# Below this many bytes to read, pairs are compared in this process: forking costs more than it saves.
POOL_MIN_BYTES = 32 << 20
_CHUNK_TASKS = 256


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
    grade_pairs(result, jobs, cache, fast, progress, workers)
    result.pairs.sort(key=Pair.sort_key)
    result.first_divergence = first_divergence(result.pairs)


def grade_pairs(result: CompareResult, jobs: int | None = None, cache: StatsCache | None = None, fast: bool = True,
                progress: Progress | None = None, workers: Workers | None = None) -> None:
    """Compute (or fetch from the cache) the outcome of every pair of ``result`` and grade it."""
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
    total = sum(p.ref_a.stored_bytes + p.ref_b.stored_bytes for p in todo if p.ref_a is not None and p.ref_b is not None)
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
        p.grade, p.reason = grade(p.outcome, thresholds_for(th, p.precision), p.precision is not None)
        if p.precision is not None:
            p.reason += f" (graded at {p.precision} precision)"
        p.metrics = p.outcome.metrics if p.outcome.metrics is not None and not p.outcome.shape_mismatch else None


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
        size += p.ref_a.stored_bytes + p.ref_b.stored_bytes  # type: ignore[union-attr]
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
