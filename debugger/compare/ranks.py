"""Every rank of one dump against a base rank, on what data parallelism keeps equal.

In data parallel every rank holds the whole model and trains on its own shard of the batch, so:

- must agree ("invariant", graded errors count): weights and optimizer state (Parameters of kind
  ``weight`` and ``optimizer_state``) at every iteration; the outputs of all-reduce, all-gather and
  Broadcast; and what a kernel computes from invariant values only (the gradient mean after an
  all-reduce, the optimizer update, a forward kernel's weight input), found by following the graph
  in execution order. Kernels with no invariant data input, random ops and the communication ops
  that give each rank its own part (ReduceScatter, AllToAll, Send/Receive...) stop the propagation.
- may differ: activations, local gradients, data inputs. They are compared only with
  ``all_tensors`` and then listed with their grade, but never change the exit status nor the
  first divergence.

Without a layout every compared rank is taken to be in one group with the base rank (one
data-parallel group). A dump whose ranks record a parallel layout (``RankInfo.layout``) or
collectives' process groups is compared group by group instead (:mod:`.peers`): shards only with
their replicas, collective results within their group.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..stats.cache import StatsCache
from ..errors import DumpError, QueryError
from ..common.settings import ranks_at_once
from ..common.executors import Workers, forked, local_workers, shared_with_forks
from ..formats.records import Kind
from ..model.graph import Graph
from ..model import Dump, Rank, dump_at
from ..common.selection import ranges_text
from .evaluate import conclude, finish, start_grading
from .grades import GradeThresholds, as_grade_thresholds
from .layout_ranks import layout_pairs
from .match import match_graphs, match_tensors
from .pairs import CompareResult, Progress, Side, iteration_set, make_pair, open_any
from .peers import has_layout, input_value

INVARIANT_KINDS = frozenset({Kind.WEIGHT, Kind.OPTIMIZER_STATE})


def invariant_nodes(graph: Graph) -> frozenset[str]:
    """Nodes whose outputs must be equal on every data-parallel rank (see the module docstring)."""
    return graph.derived(invariant_nodes, _build_invariant_nodes)


def _build_invariant_nodes(graph: Graph) -> frozenset[str]:
    inv = {n.name for n in graph.nodes() if n.is_parameter and n.kind in INVARIANT_KINDS}
    for k in graph.execution_order:
        a = graph.record_of(k)
        if a.per_rank:
            continue
        if a.is_collective:   # all-reduce, all-gather, broadcast: every rank gets the same value
            inv.add(k)
            continue
        real, ok = 0, True
        for src, edge in a.inputs:
            if edge == "control" or not src:
                continue
            s = graph.value_source(src)
            if s not in graph:
                ok = False
                break
            sa = graph.record_of(s)
            if sa.is_constant or sa.is_routing:   # state tokens, not values
                continue
            if s in inv:
                real += 1
                continue
            ok = False
            break
        if ok and real:
            inv.add(k)
    return frozenset(inv)


def is_invariant(graph: Graph | None, key: tuple[str, str, int]) -> bool:
    """Whether the tensor (node, io, slot) must agree across data-parallel ranks."""
    if graph is None:
        return False
    node, io, slot = key
    if node not in graph:
        return False
    inv = invariant_nodes(graph)
    if io == "output":
        return node in inv
    s = input_value(graph, node, slot)
    if s is None:
        return False
    return s == "" or s in inv or (s in graph and graph.record_of(s).is_constant)


def compare_ranks(dump: "Dump | str", base: int = 0, ranks: Iterable[int] | None = None,
                  iterations: "Iterable[int] | str | None" = None, all_tensors: bool = False,
                  thresholds: "GradeThresholds | Mapping[str, Any] | str | None" = None, jobs: int | None = None,
                  cache: StatsCache | None = None, *, fast: bool = True,
                  progress: Progress | None = None, workers: Workers | None = None,
                  keep_passes: bool = True) -> CompareResult:
    """Compare every selected rank of ``dump`` (side a) with the ``base`` rank (side b), iteration by
    iteration; ``all_tensors`` also lists the tensors that may differ (not counted). ``keep_passes``
    False: passing pairs are only counted (CompareResult.folded), and the ranks are compared a few at a
    time, each forgotten once compared: memory stays bounded whatever the rank count."""
    d = open_any(dump)
    th = as_grade_thresholds(thresholds)
    if len(d.rank_ids) < 2:
        raise DumpError(d.root, f"has only rank {d.rank_ids[0] if d.rank_ids else '-'}: comparing ranks needs "
                        "two or more (to compare two dumps, give both)")
    if base not in d.rank_ids:
        raise QueryError(d.root, f"no base rank {base} (ranks: {d.rank_ids})")
    wanted = sorted(set(int(r) for r in ranks)) if ranks is not None else d.rank_ids
    others = [r for r in wanted if r != base]
    for r in others:
        d.rank(r)  # QueryError when absent
    if not others:
        raise QueryError(d.root, f"no rank to compare with base rank {base}")
    sel = iteration_set(iterations)
    result = CompareResult("ranks", d.root, d.root, others, [], th, base=base)
    layout = has_layout(d)
    if layout or keep_passes:
        d.list_ranks([base, *others])
        if layout:
            all_its = layout_pairs(d, base, others, sel, all_tensors, result)
        else:
            all_its = _data_parallel_pairs(d, base, others, sel, all_tensors, result)
    else:
        all_its = _folded(d, base, others, sel, all_tensors, result, jobs, cache, fast, progress, workers)
    if sel is not None and not all_its:
        raise QueryError(d.root, f"no selected iteration ({ranges_text(sel)}) was dumped")
    if layout or keep_passes:
        return finish(result, all_its, jobs, cache, fast, progress, workers)
    return conclude(result, all_its)


def _folded(d: Dump, base: int, others: list[int], sel: set[int] | None, all_tensors: bool, result: CompareResult,
            jobs: int | None, cache: StatsCache | None, fast: bool, progress: Progress | None,
            workers: Workers | None) -> set[int]:
    """:func:`_in_chunks` graded on ``workers`` (default: one local pool for every chunk; on a local pool of
    several processes, each chunk compared whole by a forked worker)."""
    if workers is None and max(1, jobs or os.cpu_count() or 1) > 1 and len(others) > ranks_at_once(RANKS_AT_ONCE):
        return _on_forks(d, _ChunkJob(base, sel, all_tensors, result.thresholds, cache, fast), others, result,
                         jobs, progress)
    done = [0]

    def start(part: CompareResult) -> Callable[[], None]:
        told = None if progress is None else (lambda n, total: progress(done[0] + n, done[0] + total))
        wait = start_grading(part, jobs, cache, fast, told, pool)

        def finish() -> None:
            wait()
            done[0] += len(part.pairs)
        return finish

    if workers is not None:
        pool = workers
        return _in_chunks(d, base, others, sel, all_tensors, result, start)
    with local_workers(jobs) as pool:
        return _in_chunks(d, base, others, sel, all_tensors, result, start)


RANKS_AT_ONCE = 32    # ranks listed, paired and compared together when passes are folded


def _in_chunks(d: Dump, base: int, others: list[int], sel: set[int] | None, all_tensors: bool,
               result: CompareResult, start: Callable[[CompareResult], Callable[[], None]]) -> set[int]:
    """The data-parallel comparison a few ranks at a time: each chunk listed together, paired, sent to be
    graded (``start(part)`` returns what waits for its grades), its passes folded into ``result`` and its
    ranks forgotten. The next chunk is listed and paired while the workers compare the last one."""
    all_its: set[int] = set()
    pending: tuple[CompareResult, list[Rank], Callable[[], None]] | None = None
    for ranks in d.rank_chunks(others, ranks_at_once(RANKS_AT_ONCE)):
        part = CompareResult("ranks", d.root, d.root, [r.rank for r in ranks], [], result.thresholds, base=base)
        all_its |= _data_parallel_pairs(d, base, part.ranks, sel, all_tensors, part)
        wait = start(part)
        if pending is not None:
            _fold(result, *pending)
        pending = (part, ranks, wait)
    if pending is not None:
        _fold(result, *pending)
    return all_its


def _fold(result: CompareResult, part: CompareResult, ranks: list[Rank], wait: Callable[[], None]) -> None:
    """Wait for a chunk's grades, keep its failures and counts in ``result`` and forget its ranks."""
    wait()
    _absorb(result, part)
    for r in ranks:
        r.release()


def _absorb(result: CompareResult, part: CompareResult) -> None:
    """Keep the failures, warnings and counts of a graded chunk in ``result``."""
    result.keep(part.pairs, passes=False)
    for it, row in part.folded.items():   # passes a worker folded already
        mine = result.folded.setdefault(it, [0, 0, 0])
        for i, n in enumerate(row):
            mine[i] += n
    result.warnings.extend(part.warnings)
    result.computed += part.computed
    result.cached += part.cached
    result.bytes_compared += part.bytes_compared


@dataclass(frozen=True)
class _ChunkJob:
    """What every chunk of a comparison of ranks on forked workers is compared with and graded by."""

    base: int
    sel: set[int] | None
    all_tensors: bool
    thresholds: GradeThresholds
    cache: StatsCache | None
    fast: bool


def _on_forks(d: Dump, job: _ChunkJob, others: list[int], result: CompareResult, jobs: int | None,
              progress: Progress | None) -> set[int]:
    """Each chunk of ranks listed, paired, compared and graded whole by a forked worker, its failures and
    counts kept in rank order: the listing and the pairing spread over the cores too. The iterations seen."""
    d.load_graphs([job.base, *others])
    d.rank(job.base).index  # noqa: B018 - and the base's tensors listed once for them all
    at_once = ranks_at_once(RANKS_AT_ONCE)
    chunks = [others[at:at + at_once] for at in range(0, len(others), at_once)]
    all_its: set[int] = set()
    with local_workers(jobs) as pool, shared_with_forks(dump=d, compare_job=job):
        futures = [pool.submit(compare_rank_chunk, d.root, chunk) for chunk in chunks]
        for chunk, future in zip(chunks, futures):
            part, its, warnings = future.result()
            for p in part.pairs:   # the graph each pair was made on, from this process (it was not shipped)
                p.graph_obj = d.rank(p.a.rank if p.ref_a is not None else p.b.rank).graphs.get(p.graph)
            _absorb(result, part)
            all_its |= its
            for r in chunk:
                d.rank(r).adopt_warnings(warnings[r])
            if progress is not None:   # counted in ranks here: a chunk's pairs are known when it is done
                progress(others.index(chunk[-1]) + 1, len(others))
    return all_its


def compare_rank_chunk(root: str, chunk: list[int]) -> tuple[CompareResult, set[int], dict[int, list[str]]]:
    """Worker entry point: some ranks compared with the base and graded here, with the job its parent shared;
    (their failures and counts, the iterations seen, each rank's new warnings)."""
    d, job = dump_at(root), forked("compare_job")
    ranks = [d.rank(r) for r in chunk]
    seen = {r.rank: len(r.warnings) for r in ranks}
    d.list_ranks(chunk)
    part = CompareResult("ranks", d.root, d.root, chunk, [], job.thresholds, base=job.base)
    its = _data_parallel_pairs(d, job.base, chunk, job.sel, job.all_tensors, part)
    start_grading(part, 1, job.cache, job.fast, None, None)()   # the cache is written under its file lock
    kept = CompareResult("ranks", d.root, d.root, chunk, [], job.thresholds, base=job.base)
    _absorb(kept, part)
    for p in kept.pairs:
        p.graph_obj = None   # the parent has it
    for r in ranks:
        r.index  # noqa: B018 - a rank without a pair has its warnings from its index too
        r.release()
    return kept, its, {r.rank: r.warnings[seen[r.rank]:] for r in ranks}


def _data_parallel_pairs(d: Dump, base: int, others: list[int], sel: set[int] | None, all_tensors: bool,
                         result: CompareResult) -> set[int]:
    """Every rank against the base on what data parallelism keeps equal; the iterations seen."""
    rb = d.rank(base)
    all_its: set[int] = set()
    side_b = Side(d.root, base)
    base_invariant: dict[tuple[int, tuple[str, str, int]], bool] = {}
    for r in others:
        ra = d.rank(r)
        side_a = Side(d.root, r)
        for gid in sorted(set(ra.graph_ids) | set(rb.graph_ids)):
            ga, gb = ra.graphs.get(gid), rb.graphs.get(gid)
            if gb is None and ga is None:
                result.warnings.append(f"{d.root}: graph {gid} has no readable graph on rank {r} nor {base}: "
                                       "its invariant tensors are unknown (use --all-tensors to list them)")
            nm = match_graphs(ga, gb, None, result.warnings)
            its_a, its_b = set(ra.iterations(gid)), set(rb.iterations(gid))
            if sel is not None:
                its_a, its_b = its_a & sel, its_b & sel
            for only, who in ((its_b - its_a, r), (its_a - its_b, base)):
                if only:
                    result.warnings.append(f"{d.root}: rank {who} has no dump of graph {gid} iteration(s) "
                                           f"{ranges_text(only)}: its tensors are missing")
            for it in sorted(its_a | its_b):
                all_its.add(it)
                tb_map = rb.tensor_map(gid, it)
                for ta, tb, method in match_tensors(ra.tensor_map(gid, it), tb_map, nm):
                    if tb is not None:   # the base's graph and tensor: the same answer for every rank
                        counted = base_invariant.get((gid, tb.key))
                        if counted is None:
                            counted = base_invariant[gid, tb.key] = is_invariant(gb, tb.key)
                    else:
                        counted = is_invariant(ga, ta.key)  # type: ignore[union-attr]
                    if counted or all_tensors:
                        result.pairs.append(make_pair(it, side_a, side_b, gid, ta, tb, method, ga, gb, counted))
    return all_its
