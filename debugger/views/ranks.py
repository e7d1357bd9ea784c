"""Summaries that stay small at 1,000 ranks (pure numpy, no Flask): a per-rank series as a band
(min, quartiles, median, max per iteration) with its outlier ranks named; a rank x iteration matrix
of hits and divergence as sparse cells, rows grouped by the parallel layout; the ranks' problem rows
the Ranks tab searches, sorts and pages. The web sends these instead of one object per rank."""
from __future__ import annotations

import math
import warnings
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..common.selection import ranks_phrase

LINES_BELOW = 16        # below this many ranks a band says little: draw every rank's line
OUTLIER_IQRS = 5.0      # a value further than this many IQRs (or scaled MADs) from the median is an outlier
# (3 names a dozen healthy ranks of 1,000 whose losses differ by their batches: losses are skewed)
MAX_OUTLIERS = 24       # outlier ranks sent with their whole series (the worst first); the rest counted
BLOCK = 64              # ranks per row group when the dump records no layout

Points = Sequence[Sequence[Any]]    # [[iteration, value or None], ...]; None: not finite


def _matrix(series: Mapping[int, Points]) -> tuple[list[int], list[int], np.ndarray, np.ndarray]:
    """(ranks, iterations, values [rank x iteration] with NaN for non-finite, present mask)."""
    ranks = sorted(series)
    its = sorted({int(p[0]) for pts in series.values() for p in pts})
    col = {it: j for j, it in enumerate(its)}
    vals = np.full((len(ranks), len(its)), np.nan)
    present = np.zeros(vals.shape, dtype=bool)
    for i, r in enumerate(ranks):
        for it, v in series[r]:
            j = col[int(it)]
            present[i, j] = True
            if v is not None and math.isfinite(v):
                vals[i, j] = v
    return ranks, its, vals, present


def _scores(vals: np.ndarray, present: np.ndarray, k: float) -> np.ndarray:
    """Per cell, how far from its iteration's median in robust units (inf: non-finite; 0: absent)."""
    with np.errstate(all="ignore"):
        q1, med, q3 = (np.nanpercentile(vals, q, axis=0) for q in (25, 50, 75))
        spread = q3 - q1
        mad = 1.4826 * np.nanmedian(np.abs(vals - med), axis=0)
        unit = np.where(spread > 0, spread, mad)
        dist = np.abs(vals - med)
        # identical ranks (no spread at all): any departure is an outlier
        score = np.where(unit > 0, dist / np.where(unit > 0, unit, 1.0), np.where(dist > 0, np.inf, 0.0))
    score = np.where(np.isnan(vals), np.inf, score)
    return np.where(present, score, 0.0)


def band(series: Mapping[int, Points], k: float = OUTLIER_IQRS, max_outliers: int = MAX_OUTLIERS) -> dict[str, Any]:
    """The band of a per-rank series: per iteration min/q1/median/q3/max over the finite values, and the
    outlier ranks (non-finite anywhere, or further than ``k`` IQRs from the median) with their series."""
    ranks, its, vals, present = _matrix(series)
    out: dict[str, Any] = {"ranks": len(ranks), "iterations": its, "outliers": [], "outlier_count": 0}
    if not ranks or not its:
        return {**out, **{s: [] for s in ("min", "q1", "median", "q3", "max")}}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # an iteration where no rank is finite
        stats = {"min": np.nanmin(vals, axis=0), "q1": np.nanpercentile(vals, 25, axis=0),
                 "median": np.nanmedian(vals, axis=0), "q3": np.nanpercentile(vals, 75, axis=0),
                 "max": np.nanmax(vals, axis=0)}
        score = _scores(vals, present, k)
    for name, arr in stats.items():
        out[name] = [float(v) if math.isfinite(v) else None for v in arr]
    worst = score.max(axis=1)
    rows = [i for i in np.argsort(-worst, kind="stable") if worst[i] > k]
    out["outlier_count"] = len(rows)
    for i in rows[:max_outliers]:
        pts = [[its[j], None if np.isnan(vals[i, j]) else float(vals[i, j])] for j in range(len(its)) if present[i, j]]
        flagged = [its[j] for j in range(len(its)) if score[i, j] > k]
        out["outliers"].append({"rank": ranks[i], "points": pts, "iterations": flagged,
                                "score": None if math.isinf(worst[i]) else float(worst[i])})
    return out


def rank_groups(rank_ids: Sequence[int], layouts: Mapping[int, Any], hosts: Mapping[int, str] | None = None,
                block: int = BLOCK) -> list[dict[str, Any]]:
    """Row groups of the ranks: by pipeline stage, else by the outermost mesh dimension (dp, pp ...) of
    the recorded layout, else by host where every rank names one, else blocks of ``block`` ranks. Each
    ``{"name", "ranks"}``, in rank order."""
    for key_of in (lambda r: _layout_key(r, layouts.get(r)), lambda r: (hosts or {}).get(r)):
        keyed: dict[str, list[int]] = {}
        for r in rank_ids:
            key = key_of(r)
            if key is None:
                keyed = {}
                break
            keyed.setdefault(str(key), []).append(r)
        if keyed:
            return [{"name": k, "ranks": v} for k, v in sorted(keyed.items(), key=lambda kv: kv[1][0])]
    ids = list(rank_ids)
    return [{"name": ranks_phrase(ids[i:i + block]), "ranks": ids[i:i + block]} for i in range(0, len(ids), block)]


def _layout_key(rank: int, layout: Any) -> str | None:
    """The group of a rank by its layout, or None when it records none."""
    if layout is None:
        return None
    if getattr(layout, "stage", None) is not None:
        return f"stage {layout.stage}"
    for mesh in getattr(layout, "meshes", {}).values():
        at = mesh.coordinate(rank)
        if at is not None and len(mesh.dims) > 1:
            return f"{mesh.dims[0]} {at[0]}"
    return None


Cell = tuple[int, int]     # (rank, iteration)


def heatmap(rank_ids: Sequence[int], iterations: Sequence[int], hits: Iterable[Cell],
            divergent: Iterable[Cell], groups: list[dict[str, Any]],
            opens: Mapping[Cell, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The rank x iteration matrix: rows ordered by group, sparse ``cells`` [row, column, hits, divergent]
    for the cells that hold something (counts, not hit objects), and the tensor a cell opens
    (:func:`_opens`) from ``opens`` {(rank, iteration): {graph, node, io, slot}}."""
    order = [r for g in groups for r in g["ranks"]]
    row = {r: i for i, r in enumerate(order)}
    col = {it: j for j, it in enumerate(iterations)}
    cells: dict[tuple[int, int], list[int]] = {}
    for which, pairs in ((0, hits), (1, divergent)):
        for r, it in pairs:
            if r in row and it in col:
                cells.setdefault((row[r], col[it]), [0, 0])[which] += 1
    spans, start = [], 0
    for g in groups:
        spans.append({"name": g["name"], "start": start, "count": len(g["ranks"])})
        start += len(g["ranks"])
    return {"rows": order, "iterations": list(iterations), "groups": spans,
            "cells": [[i, j, h, d] for (i, j), (h, d) in sorted(cells.items())],
            **_opens(row, col, opens or {})}


def _opens(row: Mapping[int, int], col: Mapping[int, int],
           opens: Mapping[Cell, Mapping[str, Any]]) -> dict[str, Any]:
    """``tensors`` (each named once: 1,000 ranks diverge in the same few) and ``opens`` [row, column,
    index into tensors]: what a click on a cell shows, the cell's tensor rather than the graph's root."""
    tensors: list[dict[str, Any]] = []
    index: dict[tuple[Any, ...], int] = {}
    out = []
    for (r, it), t in opens.items():
        if r not in row or it not in col:
            continue
        key = (t.get("graph"), t["node"], t.get("io", "output"), t.get("slot", 0))
        if key not in index:
            index[key] = len(tensors)
            tensors.append(dict(zip(("graph", "node", "io", "slot"), key)))
        out.append([row[r], col[it], index[key]])
    return {"tensors": tensors, "opens": sorted(out)}


def rank_problems(heat: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Per rank, its hits and divergent pairs summed over the heatmap's iterations, and ``first``: its
    earliest cell that opens a tensor, [iteration, index into the heatmap's tensors] (:func:`first_tensor`)."""
    out: dict[int, dict[str, Any]] = {r: {"hits": 0, "divergent": 0} for r in heat["rows"]}
    for i, _, h, d in heat["cells"]:
        p = out[heat["rows"][i]]
        p["hits"] += h
        p["divergent"] += d
    for i, j, k in sorted(heat.get("opens", []), key=lambda o: (o[0], o[1])):
        out[heat["rows"][i]].setdefault("first", [heat["iterations"][j], k])   # two numbers: 1,000 ranks stay small
    return out


def first_tensor(heat: Mapping[str, Any], problems: Mapping[str, Any]) -> dict[str, Any] | None:
    """A rank's first problem (:func:`rank_problems`) as the tensor the Ranks tab opens, with its ``iteration``."""
    first = problems.get("first")
    return None if first is None else {"iteration": first[0], **heat["tensors"][first[1]]}


SORTS = ("rank", "problems", "hits", "divergent", "warnings")


def select_rows(rows: list[dict[str, Any]], q: str = "", sort: str = "rank") -> list[dict[str, Any]]:
    """The rows whose rank, host or group contains ``q``, sorted (problems: most first, then rank)."""
    q = q.strip().lower()
    if q:
        rows = [x for x in rows if q in str(x["rank"]) or q in f"rank {x['rank']}"
                or q in str(x.get("host") or "").lower() or q in str(x.get("group") or "").lower()]
    if sort == "problems":
        rows = sorted(rows, key=lambda x: (-(x["hits"] + x["divergent"]), -x["warnings"], x["rank"]))
    elif sort in ("hits", "divergent", "warnings"):
        rows = sorted(rows, key=lambda x: (-x[sort], x["rank"]))
    else:
        rows = sorted(rows, key=lambda x: x["rank"])
    return rows


__all__ = ["LINES_BELOW", "SORTS", "band", "first_tensor", "heatmap", "rank_groups", "rank_problems", "select_rows"]
