"""Watchpoints on a dump: the conditions and presets, the list in use (the triage's until the user edits
it), adding and removing, going back to the triage's, hits with their coverage and verdict, running to
the next hit."""
from __future__ import annotations

from typing import Any

from flask import Blueprint

from debugger import QueryError, query, watch
from debugger.views import triage as _triage
from debugger.errors import InvalidQueryError
from debugger.watch import summary
from debugger.watch.session import describe_watchpoint, watchpoints_from_request

from .. import validate
from ..params import current_dump_id, flag_arg, int_arg, json_body, paged, workspace

watch_bp = Blueprint("watch", __name__, url_prefix="/api")


@watch_bp.get("/conditions")
def conditions() -> dict[str, Any]:
    """The condition registry (forms are generated from it) and the presets."""
    return paged(watch.describe_conditions(), presets=watch.PRESETS)


@watch_bp.get("/watchpoints")
def watchpoints() -> dict[str, Any]:
    """Watchpoints in use on the dump, each with its coverage over what was checked so far (of ``rank``),
    and the verdict of those checks; ``source`` says whose list it is (:func:`_source`)."""
    return _listed(current_dump_id(), int_arg("rank"))


def _listed(dump_id: str | None, rank: int | None) -> dict[str, Any]:
    w = workspace().watch(dump_id)
    cov = w.coverage(rank)
    items = [{**i, "coverage": summary.coverage_json(cov, i["id"])} for i in w.describe()]
    return paged(items, source=_source(dump_id), **summary.verdict(len(w.hits(rank)), cov))


def _source(dump_id: str | None) -> dict[str, Any]:
    """``{"from": "user"}`` once the user edited the list, else ``{"from": "triage", "preset", "pending"}``:
    the triage's findings are the watchpoints, ``pending`` while its scan has not given them yet."""
    ws = workspace()
    if ws.watchpoints(dump_id).edited:
        return {"from": "user"}
    said = ws.defaults_state(dump_id)
    return {"from": "triage", "preset": _triage.PRESET, "pending": said == "pending", "failed": said == "failed"}


@watch_bp.post("/watchpoints")
def add_watchpoint() -> tuple[dict[str, Any], int]:
    """Add one (``{"name", "params", "node", "scope"}`` or ``{"spec": "name:k=v"}``) or a preset."""
    try:
        wps = watchpoints_from_request(validate.watchpoint_request(json_body()))
    except ValueError as exc:
        raise InvalidQueryError(str(exc)) from None
    w = workspace().watchpoints(current_dump_id()).to_edit()
    ids = w.add(wps)
    have = w.watchpoints()
    return {"created": [describe_watchpoint(i, have[i]) for i in ids], "watchpoints": w.describe()}, 201


@watch_bp.delete("/watchpoints/<int:wid>")
def delete_watchpoint(wid: int) -> dict[str, Any]:
    """Remove one watchpoint (its hits go with it)."""
    w = workspace().watchpoints(current_dump_id()).to_edit()
    try:
        w.remove(wid)
    except KeyError:
        raise QueryError(None, f"no watchpoint {wid}") from None
    return {"deleted": wid, "watchpoints": w.describe()}


@watch_bp.delete("/watchpoints")
def clear_watchpoints() -> dict[str, Any]:
    """Remove every watchpoint (an empty list of the user's: the triage's are not used either)."""
    workspace().watchpoints(current_dump_id()).to_edit().clear()
    return {"deleted": "all", "watchpoints": []}


@watch_bp.post("/watchpoints/defaults")
def back_to_defaults() -> dict[str, Any]:
    """Use the triage's watchpoints again (the user's list is dropped); answers as GET watchpoints."""
    dump_id = current_dump_id()
    workspace().watchpoints(dump_id).back_to_defaults()
    return _listed(dump_id, None)


@watch_bp.get("/hits")
def hits() -> dict[str, Any]:
    """Hits, first occurrence first: of ``iteration`` (checked now if needed), or with ``all=1`` of
    every iteration; ``rank`` and ``watchpoint`` filter. ``groups`` counts them per watchpoint;
    ``coverage`` (per watchpoint id) and ``verdict`` say what the checks of that rank and iteration cover."""
    dump_id = current_dump_id()
    d = workspace().dump(dump_id)
    w = workspace().watch(dump_id)
    rank, it, wid = int_arg("rank"), int_arg("iteration"), int_arg("watchpoint")
    ranks = [rank] if rank is not None else d.rank_ids
    for r in ranks:
        its = d.rank(r).iterations()
        if it is not None:
            if it not in its:
                raise QueryError(d.rank(r).path, f"no iteration {it}")
            w.check(r, workspace().readable(dump_id, r, [it]))
        elif flag_arg("all"):
            w.check(r, workspace().readable(dump_id, r, its))
    found = [h.to_dict() for h in w.hits(rank, it, wid)]
    cov = w.coverage(rank, it)
    errors = w.errors(rank, it)
    return paged(found, groups=summary.hit_groups(w, rank, it), checked=w.checked(rank),
                 errors=[e.to_dict() for e in errors[:100]], error_count=len(errors),
                 coverage=[{"id": i, **summary.coverage_json(cov, i)} for i in w.watchpoints()],
                 **summary.verdict(len(w.hits(rank, it)), cov))


@watch_bp.post("/replay/next_hit")
def next_hit() -> dict[str, Any]:
    """Check the iterations after ``iteration`` one by one and stop at the first with a hit."""
    body = json_body()
    dump_id = current_dump_id()
    d = workspace().dump(dump_id)
    w = workspace().watch(dump_id)
    if not len(w):
        raise InvalidQueryError("no watchpoint is set: add one first")
    rank = validate.int_field(body, "rank") or 0
    after = validate.int_field(body, "iteration")
    after = -1 if after is None else after
    r = d.rank(rank)
    it, scanned = w.next_hit(rank, after, workspace().readable(dump_id, rank, r.iterations()))
    found = [h.to_dict() for h in w.hits(rank, it)] if it is not None else []
    return {"rank": rank, "after": after, "iteration": it, "checked": scanned,
            "hits": query.page(found, 0, None, 200).to_dict()}
