"""`tdbg serve` on a dump that a running job is still writing: ``GET /api/live``, which the page asks
every second.

At most once per :data:`LOOK_S` seconds per dump (less often when stating its files is slow: at most
:data:`LOOK_SHARE` of the time goes to looking), the server opens the dump afresh (a listing: stat only)
and compares its fingerprint with the one served. When it changed, the fresh dump is served from then on
(:meth:`Workspace.replace`) and the dump's ``generation`` goes up (a slow look runs in the background, and the
next answer says what it found): the page reloads its ranks, graphs and
iterations in place. Iterations that appeared after the server opened the dump are checked against the
watchpoints in a background thread as soon as they are settled (:mod:`debugger.watch.follow`: a file
still being written is never read, so never called corrupt); ``hits`` and ``checked`` tell the page when
to redraw its hits. Iterations present when the server opened the dump are checked when a page asks for
them, as before: a finished dump is never scanned behind the user's back. At the first look the files'
newest mtime (:meth:`Dump.stamp`) says how long the dump has been quiet, so a finished dump is quiet at
once, and whether the job wrote after the server listed the dump (then the fresh dump is served).
"""
from __future__ import annotations

import threading
import time
from typing import Any

from flask import Blueprint, current_app

from debugger import Dump
from debugger.watch.follow import Quiet, settled

from .params import current_dump_id, int_arg, workspace
from .session import Workspace

LOOK_S = 0.5        # the page asks every second (and each ask may look): a new step shows within about one
LOOK_SHARE = 0.05   # a dump whose listing takes 1 s (a thousand ranks) is looked at every 20 s
INLINE_S = 0.25     # a look that took longer runs beside the requests: the page's ask never waits for it
OPENED_SLACK_S = 1.0   # a file changed this close before the server listed the dump may be missing from it

live_bp = Blueprint("live", __name__, url_prefix="/api")


class Follower:
    """One served dump as it grows: its generation, when it last changed, the new iterations checked."""

    def __init__(self, ws: Workspace, key: str) -> None:
        self.ws, self.key = ws, key
        self.generation = 0
        self.looks = 0              # looks done (0: what the answers say is not from the files yet)
        self.changes = Quiet()
        self.quiet = False          # whether the last look found the dump unchanged for SETTLE_S seconds
        self.known: dict[int, set[int]] | None = None    # iterations when first looked at: checked on demand
        self.next_look = 0.0
        self.cost: float | None = None    # seconds the last look took (None: none yet)
        self.checking = False
        self.counts = {"hits": 0, "checked": 0}      # as of the last look the lock allowed
        self.error: str | None = None
        self._lock = threading.Lock()

    def look(self) -> None:
        """Open the dump afresh if it is time to; serve it when it changed; check what settled since."""
        with self._lock:
            due = time.monotonic() >= self.next_look
            if due:
                self.next_look = float("inf")      # one look at a time
        if due and self.cost is not None and self.cost <= INLINE_S and not self.checking:
            self._look()         # cheap: this answer says what it found
        elif due:                # slow, not yet timed or behind a check: the ask does not wait, the next answer says
            threading.Thread(target=self._look, daemon=True, name=f"look-{self.key}").start()
        self._check_settled()

    def _look(self) -> None:
        """Open the dump afresh; serve it if its files changed; say which iterations may be being written."""
        t0 = time.monotonic()
        try:
            served = self.ws.dump(self.key)
            fresh = served.reopen(self.ws.ids[self.key])
            fingerprint, newest = fresh.stamp()
            if self.known is None:     # the first look: the served dump is as the server listed it
                self.known = {r.rank: set(r.iterations()) for r in served.ranks}
                self.changes.see(fingerprint, newest)       # a finished dump is quiet at once
                changed = newest is None or newest >= self.ws.opened_at(self.key) - OPENED_SLACK_S
            else:
                changed = self.changes.see(fingerprint)
            # quiet as of this look (between looks the files may change unseen); what may be being written is
            # said before the fresh dump is served, so no check reads it meanwhile
            self.quiet = self.changes.quiet()
            self.ws.being_written(self.key, None if self.quiet else {
                r.rank: its[-1] for r in (fresh if changed else served).ranks if (its := r.iterations())})
            if changed:
                self.ws.replace(self.key, fresh)
                self.generation += 1
            self.error = None
        except Exception as exc:   # shown by /api/live; the next look tries again
            self.error = str(exc) or type(exc).__name__
        finally:
            self.looks += 1
            self.cost = time.monotonic() - t0
            with self._lock:
                self.next_look = time.monotonic() + max(LOOK_S, self.cost / LOOK_SHARE)

    def _check_settled(self) -> None:
        """Start checking the new settled iterations (a background thread) unless a check is running."""
        if self.checking or self.known is None:     # one check at a time; no look yet: nothing known to be new
            return
        w, lock = self.ws.watch(self.key), self.ws.lock(self.key)
        if not lock.acquire(blocking=False):        # a page's own check runs: the next ask starts this one
            return
        try:
            d = self.ws.dump(self.key)
            done = {r: set(w.checked(r)) | self.known.get(r, set()) for r in d.rank_ids}
            todo = settled(d, done, self.quiet) if len(w) else {}
        finally:
            lock.release()
        with self._lock:
            if not todo or self.checking:
                return
            self.checking = True
        threading.Thread(target=self._check, args=(todo,), daemon=True, name=f"live-{self.key}").start()

    def _check(self, todo: dict[int, list[int]]) -> None:
        try:
            w = self.ws.watch(self.key)
            for rank, its in sorted(todo.items()):
                w.check(rank, its)
            self.error = None
        except Exception as exc:   # shown by /api/live; the next look tries again
            self.error = str(exc) or type(exc).__name__
        finally:
            with self._lock:
                self.checking = False

    def state(self, rank: int | None) -> dict[str, Any]:
        """What the page compares with its last answer."""
        d: Dump = self.ws.dump(self.key)
        w, lock = self.ws.watch(self.key), self.ws.lock(self.key)
        if lock.acquire(blocking=False):     # else a check runs: the counts as last seen, the ask does not wait
            try:
                self.counts = {"hits": len(w.hits()), "checked": len(w.checked())}
            finally:
                lock.release()
        # the watchpoints' count is a list's length, read at any time: a check that holds the lock (one
        # may start at the first look) must not make a new page believe none is set
        out: dict[str, Any] = {"generation": self.generation, "looks": self.looks, "ranks": d.rank_ids,
                               "idle": round(self.changes.idle(), 3), "quiet": self.quiet, **self.counts,
                               "watchpoints": len(w), "checking": self.checking, "error": self.error}
        if rank is not None and rank in d.rank_ids:
            out["rank"], out["iterations"] = rank, d.rank(rank).iterations()
        return out


def follower(ws: Workspace, key: str) -> Follower:
    """The follower of one served dump (made on the first look)."""
    with _FOLLOWERS_LOCK:
        table = current_app.extensions.setdefault("tdbg_live", {})
        if key not in table:
            table[key] = Follower(ws, key)
        return table[key]


_FOLLOWERS_LOCK = threading.Lock()


@live_bp.get("/live")
def live() -> dict[str, Any]:
    """``?dump=&rank=``: the dump's generation (up when its files changed), its ranks, the watchpoints'
    hit and checked counts, and ``rank``'s iterations; looks at the dump again when it is time to."""
    key = current_dump_id()
    f = follower(workspace(), key)
    f.look()
    return f.state(int_arg("rank"))
