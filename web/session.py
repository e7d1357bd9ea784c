"""What the app remembers between requests: the dumps found at its path, their statistics
caches, and per dump its watchpoints (the triage's until the user edits them) and the iterations checked."""
from __future__ import annotations

import os
import re
import threading
import time
from typing import Any, Callable

from debugger import Dump, StatsCache, TensorRef, find_dump_roots, open_dump, query
from debugger.views import triage as _triage
from debugger.watch.defaults import DumpWatchpoints
from debugger.errors import QueryError
from debugger.common.executors import connect
from debugger.model.sourceroots import SourceRoots
from debugger.stats import service
from debugger.stats.core import Stats
from debugger.watch.session import ScanSession

from .writing import Writing


class Workspace:
    """The dumps at one path, opened on first use, with their caches and watchpoints."""

    def __init__(self, path: str, cache_dir: str | None = None, use_cache: bool = True,
                 source_roots: list[str] | None = None, scheduler: str | None = None) -> None:
        self.path = os.path.abspath(path)
        roots = find_dump_roots(self.path)
        self.ids: dict[str, str] = {}
        for root in roots:
            name = os.path.relpath(root, self.path) if root != self.path else os.path.basename(root)
            self.ids[name.replace(os.sep, "/")] = root
        # Source is shown only from the served tree, --source-root and $TDBG_SOURCE_ROOTS.
        self.sources = SourceRoots([self.path, *roots], source_roots or ())
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        self._dumps: dict[str, Dump] = {}
        self._caches: dict[str, StatsCache | None] = {}
        self._watch: dict[str, DumpWatchpoints] = {}
        self._compared: dict[tuple[str, int], Any] = {}
        self._triage: dict[str, dict[str, Any]] = {}
        self.writing = Writing()      # the dumps a running job is still writing (web/live.py says which)
        self._opened_at: dict[str, float] = {}             # when each dump was first listed (time.time())
        self._locks: dict[str, threading.RLock] = {r: threading.RLock() for r in self.ids}
        self._lock = threading.Lock()
        # `tdbg serve --scheduler`: background triage scans run on that Dask cluster (connected on first use)
        self.workers = connect(scheduler) if scheduler else None
        self._served = re.compile(re.escape(self.path) + r"(?=$|[\\/\s:'\"),])")

    def shown(self, text: str) -> str:
        """``text`` with the served folder's absolute path replaced by its name: a page shows no
        absolute path of the machine that serves it (a message still names the file)."""
        return self._served.sub(lambda _: os.path.basename(self.path), text)

    def resolve(self, dump_id: str | None) -> str:
        """A dump id (None: the first one)."""
        if not dump_id:
            return next(iter(self.ids))
        if dump_id not in self.ids:
            raise QueryError(self.path, f"no dump {dump_id!r} (dumps: {', '.join(self.ids)})")
        return dump_id

    def dump(self, dump_id: str | None) -> Dump:
        """The opened dump."""
        key = self.resolve(dump_id)
        with self._lock:
            d = self._dumps.get(key)
            if d is None:
                self._opened_at[key] = time.time()
                d = self._dumps[key] = open_dump(self.ids[key])
            return d

    def opened_at(self, dump_id: str | None) -> float:
        """When the served dump was first listed (seconds since the epoch; now if it is not open yet)."""
        return self._opened_at.get(self.resolve(dump_id), time.time())

    def replace(self, dump_id: str | None, new: Dump) -> None:
        """Serve ``new`` (the dump opened again: a running job wrote more) from now on: the scan session
        keeps the results that still hold; the rank comparison is worked out again, and the triage when
        next asked (the one known is served meanwhile: a job writing every second would otherwise keep the
        landing page waiting for as long as it runs)."""
        key = self.resolve(dump_id)
        with self.lock(key):
            with self._lock:
                self._dumps[key] = new
                self._compared = {k: v for k, v in self._compared.items() if k[0] != key}
                job = self._triage.get(key)
                if job is not None and job["state"] == "done":
                    job["stale"] = True
                elif job is not None and job["state"] != "running":
                    self._triage.pop(key, None)
                w = self._watch.get(key)
            if w is not None:
                w.refresh(lambda root: new)

    def being_written(self, key: str, newest: dict[int, int] | None) -> None:
        """Say which iteration of each rank a running job may still be writing (None: the dump is quiet;
        then what was worked out without them, the triage and the rank comparison, is done again)."""
        if self.writing.mark(key, newest):
            with self._lock:
                self._compared = {k: v for k, v in self._compared.items() if k[0] != key}
                job = self._triage.get(key, {})
                if job.get("state") == "done" and job["result"].get("below") is not None:
                    self._triage.pop(key, None)

    def settle(self, dump_id: str | None) -> None:
        """As :meth:`Writing.settle`, of a dump by id."""
        key = self.resolve(dump_id)
        self.writing.settle(key, self.dump(key))

    def settled_below(self, dump_id: str | None) -> int | None:
        """As :meth:`Writing.below`, of a dump by id."""
        return self.writing.below(self.resolve(dump_id))

    def readable(self, dump_id: str | None, rank: int, iterations: list[int]) -> list[int]:
        """As :meth:`Writing.readable`, of a dump by id."""
        return self.writing.readable(self.resolve(dump_id), rank, iterations)

    def settled_warnings(self, dump_id: str | None, warnings: list[str]) -> tuple[list[str], list[str]]:
        """As :meth:`Writing.settled_warnings`, of a dump by id."""
        return self.writing.settled_warnings(self.resolve(dump_id), warnings)

    def cache(self, dump_id: str | None) -> StatsCache | None:
        """The statistics cache of a dump (None when disabled)."""
        key = self.resolve(dump_id)
        with self._lock:
            if key not in self._caches:
                self._caches[key] = (StatsCache.for_dump(self.ids[key], self.cache_dir) if self.use_cache else None)
            return self._caches[key]

    def lock(self, dump_id: str | None) -> threading.RLock:
        """The lock that serialises cache and scan work on one dump."""
        return self._locks[self.resolve(dump_id)]

    def watch(self, dump_id: str | None) -> ScanSession:
        """The scan session in use on a dump (its watchpoints and their hits): the triage's, or the user's
        once edited (:class:`DumpWatchpoints`)."""
        return self.watchpoints(dump_id).current()

    def watchpoints(self, dump_id: str | None) -> DumpWatchpoints:
        """Both watchpoint lists of a dump, kept in the cache folder."""
        key = self.resolve(dump_id)
        d, c = self.dump(key), self.cache(key)
        with self._lock:
            w = self._watch.get(key)
            if w is None:
                w = self._watch[key] = DumpWatchpoints(d, c, self.cache_dir, self.use_cache, self._locks[key])
            return w

    def defaults_state(self, dump_id: str | None) -> str:
        """Of the triage's watchpoints, in use until the user edits them: ``known`` (or not in use), ``pending``
        (its scan is running or not started) or ``failed`` (the triage failed: there are none, and the page
        must say so rather than show no hit)."""
        w = self.watchpoints(dump_id)
        if w.edited or len(w.triage):
            return "known"
        with self._lock:
            job = self._triage.get(self.resolve(dump_id))
        if job is not None and job["state"] == "error":
            return "failed"
        return "pending" if job is None or job["state"] == "running" else "known"

    def warm(self, dump_id: str | None = None) -> None:
        """Open a dump now: every rank's graphs, tensor index and root scope level (what the first
        graph view asks for), so that the first page does not wait for them."""
        d = self.dump(dump_id)
        for r in d.ranks:
            r.index  # noqa: B018 - building the index reads every graph too
            for gid in r.graph_ids:
                g = r.graphs.get(gid)
                if g is not None:
                    query.scope_view(g, "")

    def peek_triage(self, dump_id: str | None) -> dict[str, Any] | None:
        """The triage of a dump if this server already knows it (no file is touched)."""
        with self._lock:
            job = self._triage.get(self.resolve(dump_id))
            return job["result"] if job and job["state"] == "done" else None

    def triage(self, dump_id: str | None, start: bool = True) -> dict[str, Any]:
        """The triage of a dump: ``{"state": "done", "result"}`` when known (from the cache when warm; with
        ``stale`` while it is worked out again for a dump that grew), else ``{"state": "running",
        "progress"}`` while a background thread computes it."""
        key = self.resolve(dump_id)
        with self._lock:
            job = self._triage.get(key)
            if job is not None and (job["state"] != "error" or not start):
                if start and job.get("stale") and not job.get("refreshing"):   # the dump grew: redo it behind
                    job["refreshing"] = True
                    threading.Thread(target=self._run_triage, args=(key,), daemon=True, name=f"triage-{key}").start()
                return dict(job)
        d, cache = self.dump(key), self.cache(key)
        stored = _triage.cached(d, cache)
        if stored is not None:     # its scan was not kept: the list alone, checked where a page asks
            self.watchpoints(key).take_triage(_triage.watchpoints(), None)
        with self._lock:
            if stored is not None:
                self._triage[key] = {"state": "done", "result": stored}
            elif not start:
                return {"state": "idle"}
            elif key not in self._triage or self._triage[key]["state"] == "error":
                self._triage[key] = {"state": "running", "progress": {"stage": "start", "done": 0, "total": 1},
                                     "started": time.time()}
                threading.Thread(target=self._run_triage, args=(key,), daemon=True, name=f"triage-{key}").start()
            return dict(self._triage[key])

    def _run_triage(self, key: str) -> None:
        def say(stage: str, done: int, total: int) -> None:
            with self._lock:
                job = self._triage.get(key)     # (dropped meanwhile: the job went quiet, it is redone whole)
                if job is not None:
                    job["progress"] = {"stage": stage, "done": done, "total": total}
        try:
            d, cache = self.dump(key), self.cache(key)
            # Not under the dump's lock: a cold triage scans the whole dump, and the page's own
            # requests must not wait for it. The cache is safe to share (StatsCache locks its writes).
            # the iterations a running job may still be writing are left out (web/live.py says which)
            self.settle(key)
            below = self.settled_below(key)
            res = _triage.triage(d, cache, say, workers=self.workers, below=below,
                                 on_scan=self.watchpoints(key).take_triage)
            if cache is not None:
                cache.flush()
            with self._lock:
                if below is not None and not self.writing.active(key):    # the job went quiet meanwhile: redo it whole
                    self._triage.pop(key, None)
                else:
                    self._triage[key] = {"state": "done", "result": res}
        except Exception as exc:   # shown on the page; the next request tries again
            with self._lock:
                self._triage[key] = {"state": "error", "error": str(exc) or type(exc).__name__}

    def compared(self, dump_id: str | None, base: int, fn: Callable[[Dump, Any], Any]) -> Any:
        """``fn(dump, cache)`` once per (dump, base rank): the comparison of the dump's ranks."""
        key = self.resolve(dump_id)
        d, cache = self.dump(key), self.cache(key)
        with self.lock(key):
            if (key, base) not in self._compared:
                self._compared[(key, base)] = fn(d, cache)
                if cache is not None:
                    cache.flush()
            return self._compared[(key, base)]

    def stats_of(self, dump_id: str | None, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(cache)`` and write new cache entries afterwards.

        Not under the dump's lock: the cache locks its own writes, and one slow tensor must not hold
        up the page's other requests."""
        cache = self.cache(dump_id)
        out = fn(cache)
        if cache is not None:
            cache.flush()
        return out

    def stats(self, dump_id: str | None, ref: TensorRef) -> Stats:
        """Statistics of one tensor, through the cache."""
        return self.stats_of(dump_id, lambda c: service.statistics(ref.source, c))

