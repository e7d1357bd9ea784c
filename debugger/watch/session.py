"""A scan session: the watchpoints set on one dump and what they found, (rank, iteration) by
(rank, iteration), checked on demand, only once, and kept between runs.

The web UI's watch panel, a follow mode over a growing dump and a CLI scan share it. Each watchpoint
has a stable id; every hit and error record names the id of the watchpoint it belongs to.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from . import store as watchstore
from ..stats.cache import StatsCache
from ..model import Dump, open_dump
from .coverage import Coverage, StepCounts, add_step, read_counts, scan_status
from .engine import scan
from .registry import SERIES, Watchpoint, preset
from .results import ErrorRecord, Hit, ScanResult

SWEEP_ID = 0     # the watchpoint id of the always-on non-finite sweep's hits (ids of set ones start at 1)
# The shape of the stored "checked" results: a store of another shape keeps its watchpoints, and
# their results are checked again (stores before sessions tied error records to no watchpoint; before
# format 4 they kept no coverage, and a key without it would read as one where nothing was checked).
_RESULTS_FORMAT = 4

Key = tuple[int, int]   # (rank, iteration)


@dataclass(frozen=True)
class SessionHit:
    """A hit of the session, tied to the watchpoint that fired by its id."""

    watchpoint_id: int
    hit: Hit

    def to_dict(self) -> dict[str, Any]:
        """The documented HIT object plus ``watchpoint_id``."""
        return self.hit.to_dict() | {"watchpoint_id": self.watchpoint_id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SessionHit":
        """Inverse of :meth:`to_dict`."""
        return cls(int(d["watchpoint_id"]), Hit.from_dict(d))


@dataclass(frozen=True)
class SessionError:
    """An error record of the session, tied to the watchpoint that could not be checked by its id."""

    watchpoint_id: int
    error: ErrorRecord

    def to_dict(self) -> dict[str, Any]:
        """The documented ERR object plus ``watchpoint_id``."""
        return self.error.to_dict() | {"watchpoint_id": self.watchpoint_id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SessionError":
        """Inverse of :meth:`to_dict`."""
        return cls(int(d["watchpoint_id"]), ErrorRecord.from_dict(d))


@dataclass(frozen=True)
class CoverageSoFar:
    """What each watchpoint of a session checked over the (rank, iteration) keys checked so far."""

    by_watchpoint: dict[int, Coverage]   # id -> its coverage summed over the keys (a series watchpoint: none)
    status: str                          # scan_status of those: complete | partial | incomplete
    keys: int                            # (rank, iteration) keys checked (0: nothing checked yet)


def watchpoints_from_request(spec: Mapping[str, Any]) -> list[Watchpoint]:
    """``{"name", "params", "node", "scope"}``, ``{"spec": "name:k=v"}`` or ``{"preset": name}`` (ValueError)."""
    if "preset" in spec:
        return preset(str(spec["preset"]))
    if "spec" in spec:
        return [Watchpoint.parse(str(spec["spec"]))]
    return [Watchpoint.from_dict(dict(spec))]


def describe_watchpoint(wid: int, wp: Watchpoint) -> dict[str, Any]:
    """The JSON of one watchpoint of a session: its id, spec, one-line text and its condition's help."""
    d = wp.to_dict()
    params = ",".join(f"{k}={v:g}" for k, v in d["params"].items())
    filters = "".join(f",{k}={d[k]}" for k in ("node", "scope") if d.get(k))
    return {"id": wid, **d, "text": d["name"] + (":" + params if params else "") + filters,
            "help": wp.condition.help, "advice": wp.condition.advice, "target": wp.condition.target}


class ScanSession:
    """The watchpoints of one dump and the hits found so far, per (rank, iteration) checked.

    ``store``: the JSON file that keeps them between runs (:mod:`debugger.watch.store`; None: memory
    only). Stored results are used only while the dump's files are unchanged (its fingerprint).
    """

    def __init__(self, dump: Dump, cache: StatsCache | None = None, store: str | None = None,
                 lock: threading.RLock | None = None, watchpoints: Iterable[Watchpoint] = ()) -> None:
        self.dump = dump
        self.cache = cache
        self.store = store
        self._lock = lock or threading.RLock()
        self._watchpoints: dict[int, Watchpoint] = {}
        self._next_id = 1
        self._hits: dict[Key, list[SessionHit]] = {}
        self._errors: dict[Key, list[SessionError]] = {}
        self._coverage: dict[Key, dict[int, StepCounts]] = {}   # per key: watchpoint id -> what it met
        self._fingerprint: str | None = None
        self.files_checked = 0    # tensor files this session's checks read (results it reused read none)
        self.edited = False       # the user changed this list (debugger.watch.defaults: else the triage's is used)
        self._load()
        for wp in watchpoints:    # given as they are: a scan's list keeps its repeats and its order
            self._put(wp)

    # -- persistence ------------------------------------------------------------------------------
    def _fp(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.dump.fingerprint()
        return self._fingerprint

    def _load(self) -> None:
        """Read the stored watchpoints; their results only when the dump's files are unchanged."""
        data = watchstore.load(self.store) if self.store else None
        if data is None:
            return
        try:
            items = {int(w["id"]): Watchpoint.from_dict(w["spec"]) for w in data["watchpoints"]}
            checked = _stored_results(data)
        except (ValueError, KeyError, TypeError):
            return      # an unusable store is as good as none: the user's next change rewrites it
        self._watchpoints = items
        # a store from before the triage's defaults: a list set by hand is the user's, an empty one was the default
        self.edited = bool(data.get("edited", bool(items)))
        self._next_id = max([int(data.get("next", 1)), *[i + 1 for i in items]])
        if checked and data.get("fingerprint") == self._fp():
            for key, hits, errors, coverage in checked:
                self._hits[key], self._errors[key], self._coverage[key] = hits, errors, coverage

    def _save(self) -> None:
        if not self.store:   # a read-only cache folder: the watchpoints live as long as the session
            return
        checked = [[r, it, [h.to_dict() for h in hs], [e.to_dict() for e in self._errors.get((r, it), [])],
                    [[wid, *n] for wid, n in self._coverage.get((r, it), {}).items()]]
                   for (r, it), hs in sorted(self._hits.items())]
        watchstore.save(self.store, {
            "dump": self.dump.root, "fingerprint": self._fp(), "next": self._next_id, "edited": self.edited,
            "watchpoints": [{"id": i, "spec": w.to_dict()} for i, w in self._watchpoints.items()],
            "results_format": _RESULTS_FORMAT, "checked": checked})

    # -- watchpoints ------------------------------------------------------------------------------
    def add(self, watchpoints: Iterable[Watchpoint]) -> list[int]:
        """Add watchpoints not set yet (a preset added twice does not double them); their new ids."""
        with self._lock:
            have = {_spec_key(w) for w in self._watchpoints.values()}
            new = []
            for wp in watchpoints:
                if _spec_key(wp) not in have:
                    have.add(_spec_key(wp))
                    new.append(self._put(wp))
            if new:
                self._reset()
                self._save()
            return new

    def _put(self, wp: Watchpoint) -> int:
        wid = self._next_id
        self._next_id += 1
        self._watchpoints[wid] = wp
        return wid

    def remove(self, wid: int) -> None:
        """Delete one watchpoint (KeyError when there is none of that id)."""
        with self._lock:
            if wid not in self._watchpoints:
                raise KeyError(f"no watchpoint {wid}")
            del self._watchpoints[wid]
            self._reset()
            self._save()

    def clear(self) -> None:
        """Delete every watchpoint."""
        with self._lock:
            self._watchpoints.clear()
            self._reset()
            self._save()

    def take(self, watchpoints: list[Watchpoint], res: ScanResult | None = None) -> None:
        """Make ``watchpoints`` the list (ids anew when it differs; what was found stays when it does not),
        and ``res``, a scan of exactly that list in that order, what they found in the keys it scanned:
        a whole scan made elsewhere (the triage's) is reused, not done again."""
        with self._lock:
            if [_spec_key(w) for w in self._watchpoints.values()] != [_spec_key(w) for w in watchpoints]:
                self._watchpoints.clear()
                self._reset()
                for wp in watchpoints:
                    self._put(wp)
            if res is not None:
                self._record(res, list(self._watchpoints), [(r, it) for r in res.ranks for it in res.iterations])
            self._save()

    def take_from(self, other: "ScanSession") -> None:
        """Start from ``other``'s watchpoints (their ids kept) and what they found: the first edit of a
        list shown as another's; marks this list as edited."""
        with self._lock:
            self._watchpoints = dict(other._watchpoints)
            self._next_id = max(self._next_id, other._next_id)
            self._hits = {k: list(v) for k, v in other._hits.items()}
            self._errors = {k: list(v) for k, v in other._errors.items()}
            self._coverage = {k: dict(v) for k, v in other._coverage.items()}
            self.edited = True
            self._save()

    def forget(self) -> None:
        """Drop every watchpoint and the edited mark: the list is no one's choice again."""
        with self._lock:
            self._watchpoints.clear()
            self._reset()
            self.edited = False
            self._save()

    def _reset(self) -> None:
        # the hit order counts in the list of watchpoints scanned together: a changed list checks again
        self._hits.clear()
        self._errors.clear()
        self._coverage.clear()

    def watchpoints(self) -> dict[int, Watchpoint]:
        """id -> watchpoint, in creation order."""
        with self._lock:
            return dict(self._watchpoints)

    def describe(self) -> list[dict[str, Any]]:
        """The JSON of every watchpoint (:func:`describe_watchpoint`), in creation order."""
        return [describe_watchpoint(i, w) for i, w in self.watchpoints().items()]

    def __len__(self) -> int:
        return len(self._watchpoints)

    # -- checking ---------------------------------------------------------------------------------
    def check(self, rank: int, iterations: Iterable[int]) -> list[int]:
        """Scan the iterations of ``rank`` not checked yet; returns the ones scanned now."""
        with self._lock:
            if not self._watchpoints:
                return []
            todo = sorted({it for it in iterations if (rank, it) not in self._hits})
            if not todo:
                return []
            ids = list(self._watchpoints)
            # scope: the whole dump, so that a logical tensor is reported by the same rank as in a whole scan
            res = scan(self.dump, list(self._watchpoints.values()), ranks=[rank], iterations=set(todo),
                       jobs=1, cache=self.cache, scope=self.dump.rank_ids, series_sweep=False)
            self.files_checked += res.files_checked
            self._record(res, ids, [(rank, it) for it in todo])
            self._save()
            return todo

    def _record(self, res: ScanResult, ids: list[int], keys: Iterable[Key]) -> None:
        """Keep a scan's findings as those of ``keys``, each tied to its watchpoint's id (``ids[order]``)."""
        for key in keys:
            self._hits[key], self._errors[key], self._coverage[key] = [], [], {}
        for key, by_order in res.step_coverage.items():
            self._coverage[key] = {ids[o]: n for o, n in by_order.items() if o < len(ids)}
        for h in res.hits:    # the non-finite sweep's hits (order past the list) belong to no watchpoint
            wid = ids[h.order] if h.order < len(ids) else SWEEP_ID
            self._hits.setdefault((h.rank, h.iteration), []).append(SessionHit(wid, h))
        for e in res.errors:
            self._errors.setdefault((e.rank, e.iteration), []).append(SessionError(ids[e.order], e))

    def coverage(self, rank: int | None = None, iteration: int | None = None) -> CoverageSoFar:
        """Each watchpoint's coverage summed over the keys checked so far (of one rank, one iteration),
        and their scan status (:func:`debugger.watch.coverage.scan_status`, as `tdbg scan` states it)."""
        with self._lock:
            wps = {i: w for i, w in self._watchpoints.items() if w.condition.needs != SERIES}
            total = {i: Coverage() for i in wps}
            keys = [k for k in self._hits if (rank is None or k[0] == rank) and (iteration is None or k[1] == iteration)]
            for r, it in keys:
                for wid, counts in self._coverage.get((r, it), {}).items():
                    if wid in total:
                        add_step(total[wid], counts, r, it)
        return CoverageSoFar(total, scan_status(total.values()), len(keys))

    def checked(self, rank: int | None = None) -> list[int]:
        """Iterations checked (of one rank, or of any)."""
        with self._lock:
            return sorted({it for (r, it) in self._hits if rank is None or r == rank})

    def hits(self, rank: int | None = None, iteration: int | None = None,
             watchpoint: int | None = None) -> list[SessionHit]:
        """Hits found so far, in the hit order of `tdbg scan`."""
        with self._lock:
            out = [h for (r, it), hs in self._hits.items() for h in hs
                   if (rank is None or r == rank) and (iteration is None or it == iteration)
                   and (watchpoint is None or h.watchpoint_id == watchpoint)]
        out.sort(key=lambda h: h.hit.sort_key())
        return out

    def errors(self, rank: int | None = None, iteration: int | None = None) -> list[SessionError]:
        """Error records of the checked iterations, by rank and iteration."""
        with self._lock:
            return [e for (r, it), es in sorted(self._errors.items()) for e in es
                    if (rank is None or r == rank) and (iteration is None or it == iteration)]

    def next_hit(self, rank: int, after: int, iterations: Iterable[int]) -> tuple[int | None, list[int]]:
        """Check the iterations after ``after`` one by one; stop at the first with a hit.
        (that iteration or None, the iterations looked at)."""
        scanned = []
        for it in sorted(i for i in iterations if i > after):
            self.check(rank, [it])
            scanned.append(it)
            if self.hits(rank, it):
                return it, scanned
        return None, scanned

    # -- a growing dump ---------------------------------------------------------------------------
    def refresh(self, reopen: Callable[[str], Dump] = open_dump) -> list[Key]:
        """Open the dump again (a training job may have written iterations since) and keep what was
        found in the iterations it still has, up to the first new one of each rank: an iteration
        written before one checked changes that one's previous value. The dropped keys."""
        with self._lock:
            old = {r.rank: set(r.iterations()) for r in self.dump.ranks}
            self.dump = reopen(self.dump.root)
            self._fingerprint = None
            if not self._watchpoints and not self._hits:     # nothing to keep: no store to write (nor fingerprint)
                return []
            new = {r.rank: set(r.iterations()) for r in self.dump.ranks}
            dropped = [key for key in list(self._hits) if not _still_valid(key, old, new)]
            for key in dropped:
                self._hits.pop(key, None)
                self._errors.pop(key, None)
                self._coverage.pop(key, None)
            self._save()
            return sorted(dropped)

    # -- a whole scan -----------------------------------------------------------------------------
    def scan(self, ranks: Iterable[int] | None = None, iterations: set[int] | str | None = None,
             where: str | None = None, jobs: int | None = None,
             progress: Callable[[int, int], None] | None = None, workers: Any = None) -> ScanResult:
        """One scan of every watchpoint, in id order (:func:`debugger.watch.engine.scan`): the result
        `tdbg scan` prints. Without ``where`` its findings become the session's for every rank and
        iteration it scanned."""
        with self._lock:
            ids = list(self._watchpoints)
            res = scan(self.dump, list(self._watchpoints.values()), ranks=ranks, iterations=iterations,
                       where=where, jobs=jobs, cache=self.cache, progress=progress, workers=workers)
            self.files_checked += res.files_checked
            if where is None:
                self._record(res, ids, [(r, it) for r in res.ranks for it in res.iterations])
                self._save()
            return res


def _spec_key(wp: Watchpoint) -> str:
    return json.dumps(wp.to_dict(), sort_keys=True)


def _still_valid(key: Key, old: dict[int, set[int]], new: dict[int, set[int]]) -> bool:
    """Whether a result checked before a dump grew still holds: its rank has the same iterations up to
    this one (none lost, none gained before it: a chain of previous values reads only those)."""
    rank, it = key
    before, after = old.get(rank, set()), new.get(rank, set())
    return {i for i in after if i <= it} == {i for i in before if i <= it}


Stored = tuple[Key, list[SessionHit], list[SessionError], dict[int, StepCounts]]


def _stored_results(data: Mapping[str, Any]) -> list[Stored]:
    """The stored (rank, iteration) results, or none when stored in another shape."""
    if data.get("results_format") != _RESULTS_FORMAT:
        return []
    return [((int(r), int(it)), [SessionHit.from_dict(h) for h in hs], [SessionError.from_dict(e) for e in es],
             {int(wid): read_counts(n) for wid, *n in cov})
            for r, it, hs, es, cov in data.get("checked", [])]


__all__ = ["SWEEP_ID", "CoverageSoFar", "ScanSession", "SessionError", "SessionHit", "describe_watchpoint", "watchpoints_from_request"]
