"""Dump A (under test) against dump B (baseline): the same rank and iteration on both sides, tensors matched
by full name, then by aligned execution orders, then by an optional mapping."""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from ..stats.cache import StatsCache
from ..errors import DumpError, QueryError
from ..common.executors import Workers
from ..model import Dump, Rank, TensorRef
from ..model.graph import Graph
from ..common.selection import ranges_text
from .evaluate import finish
from .grades import GradeThresholds, as_grade_thresholds
from .match import NodeMatch, check_mapping, load_mapping, match_graphs, match_tensors
from .pairs import Unpaired
from .peers import shard_of, shard_text
from .precision import coarser, weight_precision
from .localmap import local_map
from .pairs import CompareResult, Progress, Side, iteration_set, make_pair, open_any
from .valueless import holds_no_value


def compare_runs(dump_a: "Dump | str", dump_b: "Dump | str", ranks: Iterable[int] | None = None,
                 iterations: "Iterable[int] | str | None" = None, mapping: "Mapping[str, str] | str | None" = None,
                 thresholds: "GradeThresholds | Mapping[str, Any] | str | None" = None, jobs: int | None = None,
                 cache: StatsCache | None = None, *, fast: bool = True,
                 progress: Progress | None = None, workers: Workers | None = None) -> CompareResult:
    """Compare run A (under test) with run B (baseline): the same rank and iteration on both sides.

    ``mapping`` is a dict or the path of a JSON file ``{"a_name": "b_name"}``; ``fast=False``
    computes every metric even of byte-identical chunks (for benchmarks).
    """
    da, db = open_any(dump_a), open_any(dump_b)
    th = as_grade_thresholds(thresholds)
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
        raise QueryError(da.root, f"no selected iteration ({ranges_text(sel)}) was dumped on both sides")
    run_precision = coarser(weight_precision(da), weight_precision(db))
    if run_precision is not None:
        for p in result.pairs:
            p.precision = coarser(p.precision, run_precision)
    if not all_its:
        its_a, its_b = ({it for r in common for it in d.rank(r).iterations()} for d in (da, db))
        result.empty_reason = (f"no iteration was dumped on both sides (a has {ranges_text(its_a)}, b has {ranges_text(its_b)}, "
                               f"ranks {ranges_text(common)})")
    return finish(result, all_its, jobs, cache, fast, progress, workers)


def _runs_rank(result: CompareResult, ra: Rank, rb: Rank, sel: set[int] | None, names: Mapping[str, str],
               all_its: set[int]) -> None:
    side_a, side_b = Side(result.a, ra.rank), Side(result.b, rb.rank)
    ga_all, gb_all = ra.graphs, rb.graphs
    layout = ra.info.layout
    plan = _graph_plan(result, ra, rb, sel)
    for (gid, gid_b), its in sorted(plan.items()):
        ga, gb = ga_all.get(gid), gb_all.get(gid_b)
        nm: NodeMatch = match_graphs(ga, gb, names, result.warnings,
                                     (ra.alias_resolver(gid), rb.alias_resolver(gid_b)), ra.rank, gid)
        if nm.programs is not None:
            result.programs.append(nm.programs)
        elif nm.skipped_a or nm.skipped_b:
            result.unpaired.append(Unpaired(ra.rank, gid, sorted(nm.skipped_a), sorted(nm.skipped_b)))
        for it in its:
            all_its.add(it)
            for ta, tb, method in match_tensors(local_map(ra, gid, it), local_map(rb, gid_b, it), nm):
                if _no_value(ga, ta) or _no_value(gb, tb):
                    continue
                p = make_pair(it, side_a, side_b, gid, ta, tb, method, ga, gb)
                if layout is not None and ga is not None and ta is not None and ta.io == "output" and ta.node in ga:
                    s = shard_of(layout, ga.record_of(ta.node), ta.slot)
                    p.shard = shard_text(s, layout) if s is not None and not s.covers_whole() else None
                result.pairs.append(p)
        unread = nm.programs.unread() if nm.programs is not None else None
        if unread:
            result.warnings.append(unread)


def _no_value(graph: Graph | None, t: TensorRef | None) -> bool:
    """Whether ``t`` is memory that holds no value (valueless.py): never a divergence."""
    return t is not None and holds_no_value(graph, t.key)


def _graph_plan(result: CompareResult, ra: Rank, rb: Rank, sel: set[int] | None) -> dict[tuple[int, int], list[int]]:
    """Which graph of a is compared with which of b, at which iterations: the same graph id where both
    sides dumped the iteration in it; else, for an iteration each side dumped in exactly one graph not
    paired so, those two (a recorder numbers its graphs in the order it meets them: an eager run's
    iteration 1 can be graph 1 where a compiled run's is graph 0). What is left is a warning."""
    def dumped(r: Rank) -> dict[int, set[int]]:
        return {g: set(r.iterations(g)) & sel if sel is not None else set(r.iterations(g)) for g in r.graph_ids}
    left_a, left_b = dumped(ra), dumped(rb)
    plan: dict[tuple[int, int], list[int]] = {}
    for g in sorted(left_a.keys() & left_b.keys()):
        common = left_a[g] & left_b[g]
        if common:
            plan[(g, g)] = sorted(common)
            left_a[g] -= common
            left_b[g] -= common
    owners_a, owners_b = _owners(left_a), _owners(left_b)
    for it in sorted(owners_a.keys() & owners_b.keys()):
        if len(owners_a[it]) == 1 and len(owners_b[it]) == 1:
            (ga,), (gb,) = owners_a[it], owners_b[it]
            plan.setdefault((ga, gb), []).append(it)
            left_a[ga].discard(it)
            left_b[gb].discard(it)
    for (ga, gb), its in sorted(plan.items()):
        if ga != gb:
            result.warnings.append(f"rank {ra.rank}: graph {ga} of {result.a} compared with graph {gb} of {result.b} "
                                   f"at iteration(s) {ranges_text(its)} (the runs number their graphs differently)")
    planned_a, planned_b = {ga for ga, _ in plan}, {gb for _, gb in plan}
    for root, left, planned, other in ((result.a, left_a, planned_a, left_b), (result.b, left_b, planned_b, left_a)):
        for g, its in sorted(left.items()):
            if g not in other and g not in planned:
                result.warnings.append(f"{root}: rank {ra.rank} graph {g} exists on one side only; not compared")
            elif its:
                result.warnings.append(f"{root}: rank {ra.rank} graph {g} iteration(s) {ranges_text(its)} dumped on "
                                       "this side only; not compared")
    return plan


def _owners(dumped: dict[int, set[int]]) -> dict[int, list[int]]:
    """Iteration -> the graphs that dumped it."""
    out: dict[int, list[int]] = {}
    for g, its in dumped.items():
        for it in its:
            out.setdefault(it, []).append(g)
    return out
