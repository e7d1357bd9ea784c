"""Run watchpoints over a dump: plan each step's checks, compute their tensors in batches on a pool,
evaluate them, and order the hits by where a problem starts."""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Callable, Iterable

from ..common.codeid import code_id
from ..stats.cache import StatsCache
from ..model import Dump
from ..common.gcpause import paused_gc
from .levels import coarse_iterations
from .registry import Watchpoint
from .request import ScanRequest, ScanRuntime
from .results import ErrorRecord, Hit, ScanResult
from ..common.selection import parse_iterations

if TYPE_CHECKING:   # the tensor work (numpy, pools) loads after the stored-result lookup, which needs none of it
    from ..common.executors import Workers

__all__ = ["ErrorRecord", "Hit", "ScanResult", "parse_iterations", "scan", "scan_warnings"]

_RESULT_FORMAT = 14   # bump when the engine's results change: stored results of older rules are not reused


def scan(dump: Dump, watchpoints: list[Watchpoint], *, ranks: Iterable[int] | None = None,
         iterations: set[int] | str | None = None, where: str | None = None, jobs: int | None = None,
         cache: StatsCache | None = None, progress: Callable[[int, int], None] | None = None,
         workers: Workers | None = None, scope: Iterable[int] | None = None,
         series_sweep: bool = True) -> ScanResult:
    """Check ``watchpoints`` on every selected tensor of ``dump``; hits sorted first-occurrence first.

    ``workers`` (a Dask cluster, say) runs the tensor work; default: a local pool of ``jobs`` processes.
    A logical tensor (a sharded parameter's weight, gradient or state) is judged whole and reported once,
    by the lowest rank of ``scope`` (default: ``ranks``) holding a part of it. ``series_sweep``: also read
    the recorded per-step series' loss for its first non-finite step (``result.series_sweep``; a caller that
    reads the series itself, the triage, or checks an iteration at a time, the web session, leaves it off).
    """
    request = ScanRequest.of(watchpoints, ranks=ranks, iterations=iterations, where=where, scope=scope,
                             series_sweep=series_sweep)
    runtime = ScanRuntime(cache or StatsCache(enabled=False), jobs, workers, progress)
    with paused_gc():
        return run_request(dump, request, runtime)


def run_request(dump: Dump, request: ScanRequest, runtime: ScanRuntime) -> ScanResult:
    """The result of ``request`` on ``dump``: stored (an unchanged dump, the same request), else computed and
    stored."""
    rank_ids = list(request.ranks) if request.ranks is not None else dump.rank_ids
    iterations = request.iterations
    cache = runtime.cache
    key = None
    if cache.enabled:
        # An unchanged dump (same names, sizes, mtimes) and the same request: reuse the result.
        key = _result_key(dump, request, rank_ids)
        stored = cache.results.get(key)
        if stored is not None:
            return ScanResult.from_dict(stored, list(request.watchpoints))
    # The tensor work (numpy, pools, the rules) loads here, after the stored-result lookup, which needs none
    # of it (tests/test_lazy_imports.py): the one local import of the engine.
    from .run import run_steps
    from .sweep import series_nonfinite

    result = run_steps(dump, request, runtime, [dump.rank(r) for r in rank_ids])
    if request.series_sweep:
        result.series_sweep = [h for h in series_nonfinite(dump, rank_ids, result.hits)
                               if iterations is None or h.step in iterations]
    result.sort()
    result.levels = coarse_iterations(dump, rank_ids, result.iterations)
    if request.ranks is None:
        for r in dump.ranks:
            if not r.indexed:   # a rank with nothing to scan: its warnings come from its index
                r.index  # noqa: B018 - (a scanned rank's were found, and it may be released since)
        result.rank_warnings = [w for r in dump.ranks for w in r.warnings]
    if key is not None:
        cache.results.put(key, {**result.to_dict(), "rank_warnings": result.rank_warnings,
                               "series_sweep": [h.as_dict() for h in result.series_sweep],
                               "step_coverage": result.step_coverage_json()})
    return result


def scan_warnings(dump: Dump, result: ScanResult) -> list[str]:
    """The dump's load warnings to report with ``result`` (``Dump.all_warnings``, without loading graphs
    and index again when the result, stored or fresh, already knows those of every rank)."""
    if result.rank_warnings is None or [r.rank for r in dump.ranks] != result.ranks:
        return dump.all_warnings()
    return [*dump.warnings, *result.rank_warnings]


def _has_layout(dump: Dump) -> bool:
    """Whether any rank of the dump is a part of a parallel job with a recorded layout (its metadata only)."""
    return any(r.layout is not None for r in dump.ranks)


def _result_key(dump: Dump, request: ScanRequest, ranks: list[int]) -> str:
    # a logical tensor reads every rank's part: when some ranks are left out of a parallel job's scan,
    # the fingerprint still covers every rank
    fp_ranks = None if len(ranks) < len(dump.rank_ids) and _has_layout(dump) else ranks
    its, scope = request.iterations, request.scope
    spec = json.dumps([_RESULT_FORMAT, code_id(), [w.to_dict() for w in request.watchpoints], ranks,
                       sorted(its) if its is not None else None, request.where, dump.fingerprint(fp_ranks),
                       list(scope) if scope is not None else None, request.series_sweep], sort_keys=True)
    return hashlib.blake2b(spec.encode(), digest_size=16).hexdigest()
