"""What the app remembers between requests: the dumps found at its path, their statistics
caches, and per dump the watchpoints the user set and the iterations already checked."""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Iterable

from debugger import Dump, StatsCache, TensorRef, find_dump_roots, open_dump
from debugger import triage as _triage
from debugger import watch as _watch
from debugger.errors import QueryError
from debugger.sourceroots import SourceRoots
from debugger.stats import Stats
from debugger.errors import InvalidQueryError
from debugger import watchstore
from debugger.watch.results import hit_order

class WatchSet:
    """The watchpoints of one dump and the hits found so far, per (rank, iteration) checked."""

    def __init__(self, dump: Dump, cache: StatsCache | None, lock: threading.RLock,
                 store: str | None = None) -> None:
        self.dump = dump
        self.cache = cache
        self._lock = lock
        self._items: dict[int, Any] = {}
        self._next = 1
        self._hits: dict[tuple[int, int], list[dict[str, Any]]] = {}
        self._errors: dict[tuple[int, int], list[dict[str, Any]]] = {}
        self.store = store
        self._fingerprint: str | None = None
        self._load()

    # -- persistence ------------------------------------------------------------------------------
    def _fp(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.dump.fingerprint()
        return self._fingerprint

    def _load(self) -> None:
        """Read the stored watchpoints; their hits only when the dump's files are unchanged."""
        data = watchstore.load(self.store) if self.store else None
        if data is None:
            return
        try:
            items = {int(w["id"]): _watch.Watchpoint.from_dict(w["spec"]) for w in data["watchpoints"]}
            checked = [(int(r), int(it), list(hs), list(es)) for r, it, hs, es in data.get("checked", [])]
        except (ValueError, KeyError, TypeError):
            return      # an unusable store is as good as none: the user's next change rewrites it
        self._items = items
        self._next = max([int(data.get("next", 1)), *[i + 1 for i in items]])
        if data.get("fingerprint") == self._fp():
            for r, it, hs, es in checked:
                self._hits[(r, it)] = hs
                self._errors[(r, it)] = es

    def _save(self) -> None:
        if self.store:   # a read-only cache folder: the watchpoints live as long as the server
            watchstore.save(self.store, {
                "dump": self.dump.root, "fingerprint": self._fp(), "next": self._next,
                "watchpoints": [{"id": i, "spec": w.to_dict()} for i, w in self._items.items()],
                "checked": [[r, it, hs, self._errors.get((r, it), [])] for (r, it), hs in sorted(self._hits.items())]})

    # -- watchpoints ------------------------------------------------------------------------------
    def add(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Add from ``{"name", "params", "node", "scope"}``, ``{"spec": "name:k=v"}`` or ``{"preset": name}``."""
        try:
            if "preset" in spec:
                wps = _watch.preset(str(spec["preset"]))
            elif "spec" in spec:
                wps = [_watch.Watchpoint.parse(str(spec["spec"]))]
            else:
                wps = [_watch.Watchpoint.from_dict(spec)]
        except ValueError as exc:
            raise InvalidQueryError(str(exc)) from None
        out = []
        with self._lock:
            have = {json.dumps(w.to_dict(), sort_keys=True) for w in self._items.values()}
            for wp in wps:
                key = json.dumps(wp.to_dict(), sort_keys=True)
                if key in have:     # a preset added twice does not double its watchpoints
                    continue
                have.add(key)
                wid = self._next
                self._next += 1
                self._items[wid] = wp
                out.append(self._describe(wid, wp))
            if out:
                self._reset()
                self._save()
        return out

    def remove(self, wid: int) -> None:
        """Delete one watchpoint."""
        with self._lock:
            if wid not in self._items:
                raise QueryError(None, f"no watchpoint {wid}")
            del self._items[wid]
            self._reset()
            self._save()

    def clear(self) -> None:
        """Delete every watchpoint."""
        with self._lock:
            self._items.clear()
            self._reset()
            self._save()

    def _reset(self) -> None:
        self._hits.clear()
        self._errors.clear()

    @staticmethod
    def _describe(wid: int, wp: Any) -> dict[str, Any]:
        d = wp.to_dict()
        params = ",".join(f"{k}={v:g}" for k, v in d["params"].items())
        filters = "".join(f",{k}={d[k]}" for k in ("node", "scope") if d.get(k))
        return {"id": wid, **d, "text": d["name"] + (":" + params if params else "") + filters,
                "help": wp.condition.help, "advice": wp.condition.advice, "target": wp.condition.target}

    def items(self) -> list[dict[str, Any]]:
        """Watchpoints in creation order."""
        with self._lock:
            return [self._describe(i, w) for i, w in self._items.items()]

    def __len__(self) -> int:
        return len(self._items)

    # -- checking ---------------------------------------------------------------------------------
    def check(self, rank: int, iterations: Iterable[int]) -> list[int]:
        """Scan the iterations of ``rank`` not checked yet; returns the ones scanned now."""
        with self._lock:
            if not self._items:
                return []
            todo = sorted({it for it in iterations if (rank, it) not in self._hits})
            if not todo:
                return []
            ids = list(self._items)
            wps = [self._items[i] for i in ids]
            res = _watch.scan(self.dump, wps, ranks=[rank], iterations=set(todo), jobs=1, cache=self.cache)
            for it in todo:
                self._hits[(rank, it)] = []
                self._errors[(rank, it)] = []
            names: dict[str, int] = {}
            for i, w in zip(ids, wps):
                names.setdefault(w.name, i)
            for h in res.hits:
                wid = ids[h.order] if 0 <= h.order < len(ids) and wps[h.order].name == h.watchpoint \
                    else names.get(h.watchpoint)
                self._hits.setdefault((h.rank, h.iteration), []).append(h.to_dict() | {"watchpoint_id": wid})
            for e in res.errors:
                self._errors.setdefault((e.rank, e.iteration), []).append(e.to_dict())
            self._save()
            return todo

    def checked(self, rank: int | None = None) -> list[int]:
        """Iterations checked (of one rank, or of any)."""
        with self._lock:
            return sorted({it for (r, it) in self._hits if rank is None or r == rank})

    def hits(self, rank: int | None = None, iteration: int | None = None,
             watchpoint: int | None = None) -> list[dict[str, Any]]:
        """Hits found so far, in the hit order of `tdbg scan`."""
        with self._lock:
            out = [h for (r, it), hs in self._hits.items() for h in hs
                   if (rank is None or r == rank) and (iteration is None or it == iteration)
                   and (watchpoint is None or h["watchpoint_id"] == watchpoint)]
        out.sort(key=hit_order)
        return out

    def errors(self, rank: int | None = None, iteration: int | None = None) -> list[dict[str, Any]]:
        """Error records of the checked iterations."""
        with self._lock:
            return [e for (r, it), es in sorted(self._errors.items()) for e in es
                    if (rank is None or r == rank) and (iteration is None or it == iteration)]

    def next_hit(self, rank: int, after: int, iterations: list[int]) -> tuple[int | None, list[int]]:
        """Check the iterations after ``after`` one by one; stop at the first with a hit."""
        scanned = []
        for it in (i for i in iterations if i > after):
            self.check(rank, [it])
            scanned.append(it)
            if self.hits(rank, it):
                return it, scanned
        return None, scanned


class Workspace:
    """The dumps at one path, opened on first use, with their caches and watchpoints."""

    def __init__(self, path: str, cache_dir: str | None = None, use_cache: bool = True,
                 source_roots: list[str] | None = None) -> None:
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
        self._watch: dict[str, WatchSet] = {}
        self._compared: dict[tuple[str, int], Any] = {}
        self._triage: dict[str, dict[str, Any]] = {}
        self._locks: dict[str, threading.RLock] = {r: threading.RLock() for r in self.ids}
        self._lock = threading.Lock()

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
                d = self._dumps[key] = open_dump(self.ids[key])
            return d

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

    def watch(self, dump_id: str | None) -> WatchSet:
        """The watchpoints of a dump."""
        key = self.resolve(dump_id)
        d, c = self.dump(key), self.cache(key)
        with self._lock:
            w = self._watch.get(key)
            if w is None:
                store = watchstore.store_path(self.ids[key], self.cache_dir) if self.use_cache else None
                w = self._watch[key] = WatchSet(d, c, self._locks[key], store)
            return w

    def warm(self, dump_id: str | None = None) -> None:
        """Open a dump now: every rank's graphs, tensor index and root scope level (what the first
        graph view asks for), so that the first page does not wait for them."""
        from debugger import query

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
        """The triage of a dump: ``{"state": "done", "result"}`` when known (from the cache when warm),
        else ``{"state": "running", "progress"}`` while a background thread computes it."""
        key = self.resolve(dump_id)
        with self._lock:
            job = self._triage.get(key)
            if job is not None and (job["state"] != "error" or not start):
                return dict(job)
        d, cache = self.dump(key), self.cache(key)
        stored = _triage.cached(d, cache)
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
                self._triage[key]["progress"] = {"stage": stage, "done": done, "total": total}
        try:
            d, cache = self.dump(key), self.cache(key)
            # Not under the dump's lock: a cold triage scans the whole dump, and the page's own
            # requests must not wait for it. The cache is safe to share (StatsCache locks its writes).
            res = _triage.triage(d, cache, say)
            if cache is not None:
                cache.flush()
            with self._lock:
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
        return self.stats_of(dump_id, lambda c: (c or StatsCache(enabled=False)).stats(ref))

