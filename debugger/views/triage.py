"""What is wrong with a dump, before anyone asks: the loss curve of every rank, the recommended
scan's findings grouped by watchpoint (first occurrence and its code line), the ranks' agreement
and the load warnings. The web UI's landing page; the result is kept in the scan-result cache."""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from typing import Any, Callable

from ..common.codeid import code_id
from . import ranks as rank_views
from ..stats import service
from ..stats.cache import StatsCache
from ..compare import compare_ranks
from ..errors import DumpError
from ..common.executors import Workers
from ..formats.records import Kind
from ..model import Dump
from ..watch import ScanResult, Watchpoint, preset, scan
from ..watch.results import headline_order, hit_order

PRESET = "recommended"
_FORMAT = 14    # bump when the triage object changes: stored triages of older shape are recomputed
Progress = Callable[[str, int, int], None]
OnScan = Callable[[list[Watchpoint], ScanResult], None]


def watchpoints() -> list[Watchpoint]:
    """The watchpoints the triage scans with, in its order (its hits' ``watchpoint_index``)."""
    return preset(PRESET)


def _key(dump: Dump) -> str:
    spec = json.dumps(["triage", _FORMAT, code_id(), dump.fingerprint()])
    return hashlib.blake2b(spec.encode(), digest_size=16).hexdigest()


def cached(dump: Dump, cache: StatsCache | None) -> dict[str, Any] | None:
    """The stored triage of an unchanged dump, else None (stat calls only)."""
    if cache is None or not cache.enabled:
        return None
    return cache.results.get(_key(dump))


def loss_curves(dump: Dump, cache: StatsCache, below: int | None = None) -> list[dict[str, Any]]:
    """Per rank, the mean of the loss node's first output in every dumped iteration of the run (below
    ``below``), each iteration from the graph that ran it (:func:`_runs_with`)."""
    out = []
    for r in dump.ranks:
        holders = _graphs_with(r, Kind.LOSS)
        if not holders:
            curve = _series_loss(r)     # no loss in the dumped iterations: the per-step series' own
            if curve is not None:
                out.append(curve)
            continue
        run = _runs_with(r, holders, below)
        points = []
        for it, gid in run.items():
            st = _output_stats(r, cache, gid, it, holders[gid][-1])   # the last loss node is the one training minimises
            if st is not None:
                points.append([it, _finite(st.mean)])
        gid = _main_graph(run, holders)
        out.append({"rank": r.rank, "graph": gid, "graph_spans": _spans(run), "node": holders[gid][-1],
                    "points": points})
    return out


SERIES_POINTS = 2000     # points of a loss curve taken from a per-step series (every k-th step beyond)


def _series_loss(r: Any) -> dict[str, Any] | None:
    """A rank's loss curve from its recorded per-step series (every step, or every k-th beyond
    :data:`SERIES_POINTS`), None without one or without a finite loss."""
    import numpy as np   # only for a dump with a series and no loss node

    series = r.reader.series()
    if series is None:
        return None
    try:
        steps, loss = series.scalar("loss")
    except DumpError:
        return None
    if not np.isfinite(loss).any():
        return None
    stride = max(1, -(-len(steps) // SERIES_POINTS))
    points = [[int(s), _finite(float(v))] for s, v in zip(steps[::stride], loss[::stride])]
    return {"rank": r.rank, "graph": None, "graph_spans": [], "node": "loss", "source": "series", "points": points}


def _graphs_with(r: Any, kind: str) -> dict[int, list[str]]:
    """{graph: its nodes of ``kind``} of the rank's graphs holding any, in the rank's order."""
    out = {}
    for gid in r.graph_ids:
        g = r.graphs.get(gid)
        names = [n.name for n in g.nodes(kind)] if g else []
        if names:
            out[gid] = names
    return out


def _runs_with(r: Any, holders: dict[int, list[str]], below: int | None) -> dict[int, int]:
    """{iteration: graph} of every iteration of the rank (below ``below``) that a graph of ``holders`` ran,
    the first of them in the rank's order: a PyTorch run's first step is a graph of its own, a MindSpore
    step may run several graphs."""
    out: dict[int, int] = {}
    for gid in holders:
        for it in r.iterations(gid):
            if below is None or it < below:
                out.setdefault(it, gid)
    return dict(sorted(out.items()))


def _main_graph(run: dict[int, int], holders: dict[int, list[str]]) -> int:
    """The graph that ran most of ``run``'s iterations (the lowest id on a tie); with no iteration (all at
    or after a running job's newest), the first of ``holders``."""
    counts = Counter(run.values())
    return min(counts, key=lambda g: (-counts[g], g)) if counts else next(iter(holders))


def _spans(run: dict[int, int]) -> list[list[int]]:
    """``[[graph, first, last], ...]``: the runs of consecutive iterations of ``run`` from one graph (what
    a page needs to open the graph of an iteration, a few entries for 100,000 steps)."""
    out: list[list[int]] = []
    for it, gid in run.items():
        if out and out[-1][0] == gid:
            out[-1][2] = it
        else:
            out.append([gid, it, it])
    return out


def _output_stats(r: Any, cache: StatsCache, gid: int, it: int, node: str) -> Any:
    """The statistics of ``node``'s first output in ``it`` of graph ``gid``; None when not dumped."""
    try:
        return service.statistics(r.tensor(gid, it, node, "output", 0).source, cache)
    except DumpError:
        return None


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


BAND_STATS = ("mean", "abs_mean", "min", "max", "std", "l2norm")


def stat_series(dump: Dump, graph: int, node: str, io: str, slot: int, stat: str,
                cache: StatsCache) -> dict[int, list[list[Any]]]:
    """Per rank holding the tensor, ``[[iteration, value or None], ...]`` of one statistic over the whole
    run (None: not finite, or NaN/Inf in the tensor), for a band across ranks (a gradient norm: stat="l2norm")."""
    if stat not in BAND_STATS:
        raise ValueError(f"bad statistic {stat!r}: expected one of {', '.join(BAND_STATS)}")
    out: dict[int, list[list[Any]]] = {}
    for r in dump.ranks:
        points = []
        for it, g in r.node_runs(graph, node).items():    # each iteration from the graph that ran it
            try:
                st = service.statistics(r.tensor(g, it, node, io, slot).source, cache)
            except DumpError:
                continue
            points.append([it, None if st.has_nonfinite else _finite(getattr(st, stat))])
        if points:
            out[r.rank] = points
    return out


def band_of(curves: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-rank curves (loss, gradient norm) of many ranks as one band (rank_views.band) naming their node."""
    b = rank_views.band({c["rank"]: c["points"] for c in curves})
    b["node"] = curves[0].get("node") if curves else None
    b["graph"] = curves[0]["graph"] if curves else None
    b["graph_spans"] = curves[0]["graph_spans"] if curves else []
    return b


def divergent_cells(cmp: dict[str, Any]) -> list[tuple[int, int]]:
    """(rank, iteration) of each counted error pair of a ranks comparison: the rank that is not the base."""
    return [(_divergent_rank(p, cmp["base"]), p["iteration"]) for p in cmp.get("pairs", [])
            if p["grade"] == "error" and p.get("counted", True)]


def _divergent_rank(p: dict[str, Any], base: int) -> int:
    """The rank of an error pair that is not the base."""
    a, b = p["a"].get("rank"), p["b"].get("rank")
    return b if a == base else a


def _pair_tensor(p: dict[str, Any], rank: int) -> dict[str, Any]:
    """The tensor of an error pair as ``rank`` names it (side b's name when matched under another)."""
    node = p["node"] if p["a"].get("rank") == rank else p.get("node_b") or p["node"]
    return {"graph": p.get("graph"), "node": node, "io": p["io"], "slot": p["slot"]}


def divergent_tensors(cmp: dict[str, Any]) -> dict[tuple[int, int], dict[str, Any]]:
    """Per (rank, iteration) of a ranks comparison, the tensor a click on its heatmap cell opens: the first
    divergence where it is in the cell, else the cell's first counted error pair in execution order (one
    both ranks hold before one missing on a side: that says nothing of the values)."""
    out: dict[tuple[int, int], dict[str, Any]] = {}
    fd = cmp.get("first_divergence")
    errors = [p for p in cmp.get("pairs", []) if p["grade"] == "error" and p.get("counted", True)]
    held = [p for p in errors if p.get("match")]
    for p in ([fd] if fd else []) + held + errors:
        r = _divergent_rank(p, cmp["base"])
        out.setdefault((r, p["iteration"]), _pair_tensor(p, r))
    return out


def cell_targets(hits: list[dict[str, Any]], cmp: dict[str, Any] | None) -> dict[tuple[int, int], dict[str, Any]]:
    """Per (rank, iteration) heatmap cell, the tensor it opens: its divergent tensor (the cell is drawn
    as divergent), else its first hit's."""
    out = divergent_tensors(cmp) if cmp else {}
    for h in sorted(hits, key=hit_order):
        out.setdefault((h["rank"], h["iteration"]),
                       {"graph": h.get("graph"), "node": h["node"], "io": h.get("io", "output"), "slot": h.get("slot", 0)})
    return out


def rank_heatmap(dump: Dump, hits: list[tuple[int, int]], divergent: list[tuple[int, int]],
                 checked: list[int], opens: dict[tuple[int, int], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The rank x iteration matrix of hits and divergence, rows grouped by the parallel layout; ``opens``:
    the tensor each cell opens (:func:`cell_targets`)."""
    infos = {r.rank: r.info for r in dump.ranks}
    layouts = {k: i.layout for k, i in infos.items()}
    its = sorted(set(checked) | {it for _, it in hits} | {it for _, it in divergent})
    hosts = {k: h for k, i in infos.items() if (h := (i.raw or {}).get("host") or (i.raw or {}).get("hostname"))}
    groups = rank_views.rank_groups(dump.rank_ids, layouts, hosts)
    heat = rank_views.heatmap(dump.rank_ids, its, hits, divergent, groups, opens)
    heat["problems"] = {str(r): p for r, p in rank_views.rank_problems(heat).items() if p["hits"] or p["divergent"]}
    heat["hosts"] = {str(k): h for k, h in hosts.items()}   # what the Ranks tab searches, without listing every rank again
    return heat


def grad_norm_curves(dump: Dump, cache: StatsCache, below: int | None = None) -> list[dict[str, Any]]:
    """Per rank, per iteration of the run (below ``below``), from the graph that ran it: sqrt of the sum
    of the squared L2 norms of every gradient node's first output (None where one holds NaN/Inf)."""
    out = []
    for r in dump.ranks:
        holders = _graphs_with(r, Kind.GRADIENT)
        if not holders:
            continue
        run = _runs_with(r, holders, below)
        points = []
        for it, gid in run.items():
            norm = _global_norm(r, cache, gid, it, holders[gid])
            if norm is not _ABSENT:
                points.append([it, norm])
        gid = _main_graph(run, holders)
        out.append({"rank": r.rank, "graph": gid, "graph_spans": _spans(run), "nodes": len(holders[gid]),
                    "points": points})
    return out


_ABSENT = object()     # no gradient of the iteration was dumped


def _global_norm(r: Any, cache: StatsCache, gid: int, it: int, grads: list[str]) -> Any:
    """sqrt of the summed squared L2 norms of ``grads``' first outputs in ``it``; None when one is not
    finite, _ABSENT when none was dumped."""
    total: float | None = 0.0
    seen = False
    for name in grads:
        st = _output_stats(r, cache, gid, it, name)
        if st is None:
            continue
        seen = True
        bad = st.has_nonfinite or st.l2norm is None or not math.isfinite(st.l2norm)
        total = None if bad or total is None else total + st.l2norm ** 2
    if not seen:
        return _ABSENT
    return None if total is None else math.sqrt(total)


def findings(hits: list[dict[str, Any]], watchpoints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hits grouped by watchpoint, the headline's group first (cause rank, then first occurrence), each
    with its first occurrence."""
    groups: dict[int, dict[str, Any]] = {}
    for h in sorted(hits, key=hit_order):
        i = h.get("watchpoint_index", 0)
        g = groups.get(i)
        if g is None:
            wp = watchpoints[i] if 0 <= i < len(watchpoints) else {"name": h["watchpoint"]}
            g = groups[i] = {"watchpoint": wp, "hits": 0, "ranks": set(), "iterations": set(), "first": h}
        g["hits"] += 1
        g["ranks"].add(h["rank"])
        g["iterations"].add(h["iteration"])
    ordered = sorted(groups.values(), key=lambda g: headline_order(g["first"]))
    return [{**g, "ranks": sorted(g["ranks"]), "iterations": sorted(g["iterations"])} for g in ordered]


SERIES_SHOWN = 50     # series findings kept in the triage object (their count is whole)


def series_findings(dump: Dump) -> tuple[list[dict[str, Any]], list[str]]:
    """The loss spikes and non-finite losses of every rank's per-step series (``loss_spike``, default
    parameters), first steps first, and the warnings of reading them: what a scan of the dumped iterations
    does not see between them (a spike at a step no iteration holds). A running job's series is read as far
    as its segments are whole (the reader leaves out one being written), whatever iterations it writes."""
    from ..watch.registry import Watchpoint
    from ..watch.series_conditions import run_series

    wp = Watchpoint.parse("loss_spike")
    hits: list[dict[str, Any]] = []
    warnings: list[str] = []
    for r in dump.ranks:
        series = r.series
        if series is None:
            continue
        try:
            hits += [h.as_dict() for h in run_series(r.rank, series, [wp])]
        except (ValueError, DumpError) as exc:
            warnings.append(f"rank {r.rank} series: {exc}")
    hits.sort(key=lambda h: (h["step"], h["rank"]))
    return hits, warnings


def iterations_below(dump: Dump, below: int) -> set[int]:
    """The dump's iterations (of any rank) below ``below``: what a running job has finished writing."""
    return {i for r in dump.ranks for i in r.iterations() if i < below}


def triage(dump: Dump, cache: StatsCache | None = None, progress: Progress | None = None,
           workers: Workers | None = None, below: int | None = None, on_scan: OnScan | None = None) -> dict[str, Any]:
    """The triage object of ``dump`` (from the cache when the dump is unchanged); ``workers`` (a Dask
    cluster) runs its scan and comparison, else this process does. ``below``: iterations from this one on
    are left out, not read (a running job may still be writing them; its dump may list more of them while
    the triage runs); such a triage is not stored. ``on_scan(watchpoints, result)`` is handed the scan
    (not when the triage comes from the cache): the web UI's default watchpoints reuse it."""
    cache = cache or StatsCache(enabled=False)
    stored = cached(dump, cache)
    if stored is not None:
        return stored
    say = progress or (lambda stage, done, total: None)
    say("loss", 0, 1)
    warnings = dump.all_warnings()
    curves = loss_curves(dump, cache, below)
    wps = watchpoints()
    listed = {i for r in dump.ranks for i in r.iterations()}
    kept = None if below is None else iterations_below(dump, below)
    leave_out = sorted(listed - kept) if kept is not None else []
    res = scan(dump, wps, iterations=kept, jobs=1, cache=cache, progress=lambda d, t: say("scan", d, t),
               workers=workers, series_sweep=False)    # the series' losses: series_findings below
    if on_scan is not None:
        on_scan(wps, res)
    data = res.to_dict()
    hits = data.get("hits", [])
    wp_dicts = [w.to_dict() for w in wps]
    for w, d in zip(wps, wp_dicts):
        d["help"] = w.condition.help
    agreement, divergent, cmp = None, [], None
    if len(dump.rank_ids) > 1 and (kept is None or kept):     # (every iteration left out: nothing to compare)
        say("compare", 0, 1)
        cmp = compare_ranks(dump, base=dump.rank_ids[0], iterations=kept, jobs=1, cache=cache, workers=workers,
                           keep_passes=False).to_dict()
        agreement = {"base": cmp["base"], "ranks": cmp["ranks"], "iterations": cmp["iterations"],
                     "summary": cmp["summary"], "first_divergence": cmp["first_divergence"]}
        divergent = divergent_cells(cmp)
    many = len(dump.rank_ids) >= rank_views.LINES_BELOW
    grads = grad_norm_curves(dump, cache, below)
    spikes, series_warnings = series_findings(dump)
    warnings = warnings + series_warnings
    out = {"preset": PRESET, "ranks": dump.rank_ids, "loss": [] if many else curves,
           "loss_band": band_of(curves) if many else None,
           "grad_norm": [] if many else grads, "grad_norm_band": band_of(grads) if many and grads else None,
           "heatmap": rank_heatmap(dump, [(h["rank"], h["iteration"]) for h in hits], divergent, res.iterations,
                                   cell_targets(hits, cmp)),
           "findings": findings(hits, wp_dicts), "hits": len(hits), "errors": len(data.get("errors", [])),
           "skipped": data.get("skipped", []), "skipped_steps": data.get("skipped_steps", []),
           "level_notes": data.get("level_notes", []), "coverage": data["coverage"],
           "series_findings": spikes[:SERIES_SHOWN], "series_hits": len(spikes),
           "agreement": agreement, "warnings": warnings[:200], "warning_count": len(warnings),
           "checked": res.iterations, "left_out": leave_out, "below": below}
    out["health"] = health(out)
    if cache.enabled and below is None:
        cache.results.put(_key(dump), out)
        cache.flush()
    say("done", 1, 1)
    return out


def health(t: dict[str, Any]) -> dict[str, Any]:
    """At a glance: ``problems`` (findings, divergent ranks), ``warnings``, and a one-word ``status``."""
    a = t.get("agreement")
    diverged = bool(a and a["first_divergence"])
    problems = len(t["findings"]) + (1 if diverged else 0) + (1 if t["series_hits"] else 0)
    incomplete = t["coverage"]["status"] == "incomplete"
    status = "problems" if problems else "incomplete" if incomplete else "warnings" if t["warning_count"] else "ok"
    return {"status": status, "problems": problems, "hits": t["hits"], "warnings": t["warning_count"],
            "diverged": diverged, "series_hits": t["series_hits"], "unanswered": t["coverage"]["unanswered"]}


__all__ = ["BAND_STATS", "PRESET", "OnScan", "watchpoints",
           "band_of", "stat_series", "cached", "cell_targets", "divergent_cells", "divergent_tensors",
           "findings", "grad_norm_curves", "health", "loss_curves", "rank_heatmap", "triage"]
