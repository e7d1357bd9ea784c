"""Dump A (under test) against dump B (baseline): the same rank and iteration on both sides, tensors matched
by full name, then by aligned execution orders, then by an optional mapping."""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from ..cache import StatsCache
from ..errors import DumpError, QueryError
from ..executors import Workers
from ..model import Dump, Rank
from ..selection import ranges_text
from .evaluate import finish
from .grades import GradeThresholds, as_grade_thresholds
from .match import NodeMatch, check_mapping, load_mapping, match_graphs, match_tensors
from .peers import shard_of, shard_text
from .precision import coarser, weight_precision
from .localmap import local_map
from .pairs import CompareResult, Progress, Side, iteration_set, make_pair, open_any


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
    gids_a, gids_b = set(ra.graph_ids), set(rb.graph_ids)
    layout = ra.info.layout
    for gid in sorted(gids_a ^ gids_b):
        where = result.a if gid in gids_a else result.b
        result.warnings.append(f"{where}: rank {ra.rank} graph {gid} exists on one side only; not compared")
    for gid in sorted(gids_a & gids_b):
        ga, gb = ga_all.get(gid), gb_all.get(gid)
        nm: NodeMatch = match_graphs(ga, gb, names, result.warnings,
                                     (ra.alias_resolver(gid), rb.alias_resolver(gid)), ra.rank, gid)
        if nm.programs is not None:
            result.programs.append(nm.programs)
        its_a, its_b = set(ra.iterations(gid)), set(rb.iterations(gid))
        if sel is not None:
            its_a, its_b = its_a & sel, its_b & sel
        for only, side in ((its_a - its_b, result.a), (its_b - its_a, result.b)):
            if only:
                result.warnings.append(f"{side}: rank {ra.rank} graph {gid} iteration(s) {ranges_text(only)} dumped on "
                                       "this side only; not compared")
        for it in sorted(its_a & its_b):
            all_its.add(it)
            for ta, tb, method in match_tensors(local_map(ra, gid, it), local_map(rb, gid, it), nm):
                p = make_pair(it, side_a, side_b, gid, ta, tb, method, ga, gb)
                if layout is not None and ga is not None and ta is not None and ta.io == "output" and ta.node in ga:
                    s = shard_of(layout, ga.record_of(ta.node), ta.slot)
                    p.shard = shard_text(s, layout) if s is not None and not s.covers_whole() else None
                result.pairs.append(p)
