"""What a scan session's checks say so far, as the web UI (and any other caller) shows it: each watchpoint's
coverage, the verdict, the hits counted per watchpoint."""
from __future__ import annotations

from typing import Any

from .session import SWEEP_ID, CoverageSoFar, ScanSession


def coverage_json(cov: CoverageSoFar, wid: int) -> dict[str, Any]:
    """One watchpoint's COVERAGE entry over the keys checked so far (`tdbg scan --json`'s, without its
    name and index); status ``unchecked`` before any check (not ``unanswered``: nothing was asked yet);
    a watchpoint over the per-step series is answered by `tdbg scan --series`, not here."""
    c = cov.by_watchpoint.get(wid)
    if c is None:
        return {"status": "series"}
    return c.to_dict() | ({} if cov.keys else {"status": "unchecked"})


def verdict(hits: int, cov: CoverageSoFar) -> dict[str, Any]:
    """What the checks so far say: ``found`` (a hit), ``unchecked`` (nothing checked yet), ``incomplete`` (a
    watchpoint checked nothing) or ``clean``; with ``coverage_status`` (complete, partial, incomplete)."""
    if hits:
        said = "found"
    elif not cov.keys:
        said = "unchecked"
    else:
        said = "clean" if cov.status != "incomplete" else "incomplete"
    return {"verdict": said, "coverage_status": cov.status if cov.keys else None}


def session_summary(session: ScanSession) -> dict[str, Any]:
    """The session in a few numbers: watchpoints, hits, checks, each watchpoint's hits and coverage (the
    always-on sweep's too, when it found something), and the verdict."""
    hits = session.hits()
    by: dict[int, int] = {}
    for h in hits:
        by[h.watchpoint_id] = by.get(h.watchpoint_id, 0) + 1
    items = session.describe()
    cov = session.coverage()
    swept = [{"id": SWEEP_ID, "text": "nonfinite_sweep (always on)", "hits": by[SWEEP_ID]}] if by.get(SWEEP_ID) else []
    return {"watchpoints": len(items), "hits": len(hits), "checked": session.checked(),
            "by_watchpoint": [{"id": i["id"], "text": i["text"], "hits": by.get(i["id"], 0),
                               "coverage": coverage_json(cov, i["id"])} for i in items] + swept,
            **verdict(len(hits), cov)}


def hit_groups(session: ScanSession, rank: int | None = None, iteration: int | None = None) -> list[dict[str, Any]]:
    """The hits of ``rank`` and ``iteration`` (None: all) counted per watchpoint, every set watchpoint listed
    (0 hits too) and the always-on sweep's as a group of its own when it found something."""
    groups: dict[int, dict[str, Any]] = {}
    for i in session.describe():
        groups[i["id"]] = {"id": i["id"], "text": i["text"], "name": i["name"], "hits": 0}
    for h in session.hits(rank, iteration):
        g = groups.get(h.watchpoint_id)
        if g is None and h.watchpoint_id == SWEEP_ID:
            g = groups[SWEEP_ID] = {"id": SWEEP_ID, "text": f"{h.hit.watchpoint} (always on)",
                                    "name": h.hit.watchpoint, "hits": 0}
        if g is not None:
            g["hits"] += 1
    return list(groups.values())
