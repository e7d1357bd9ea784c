"""Which dumps served by the app a running job is still writing, and what of them may be half-written.

web/live.py says after each look at a followed dump which iteration each rank had newest while the dump
was not yet quiet (:meth:`Writing.mark`), or that it is quiet. The routes ask before they read: an
iteration from a rank's newest at the last look on may hold a half-written file (the served dump lists
its files again after a scan released them, so it may list newer ones), and a reader warning that
appeared since the dump was last quiet may be about such a file.
"""
from __future__ import annotations

import threading
import time

from debugger import Dump
from debugger.watch.follow import Quiet

WAIT_S = 4.0      # a dump still changing this long before any look is taken as being written


class Writing:
    """Per served dump (by id): each rank's newest iteration while a job writes it."""

    def __init__(self) -> None:
        self._newest: dict[str, dict[int, int]] = {}
        self._quiet_warnings: dict[str, set[str]] = {}     # a followed dump's warnings when it was last quiet
        self._judged: set[str] = set()      # dumps looked at (web/live.py) or judged by settle()
        self._lock = threading.Lock()

    def mark(self, key: str, newest: dict[int, int] | None) -> bool:
        """Note each rank's newest iteration of a dump being written (None: it is quiet); whether the dump
        has just gone quiet (it was being written)."""
        with self._lock:
            self._judged.add(key)
            if newest is not None:
                self._newest[key] = newest
                return False
            return self._newest.pop(key, None) is not None

    def settle(self, key: str, dump: Dump) -> None:
        """Before a triage or a comparison reads a dump no look has judged yet (the page's first ask of
        GET live may come after): if its files changed in the last SETTLE_S seconds, wait until they have
        not for SETTLE_S (a run that has just ended), or, if they keep changing for WAIT_S, take the dump
        as being written from the newest iterations ``dump`` lists."""
        changes, give_up = Quiet(), time.monotonic() + WAIT_S
        look = dump       # its own files first (one stat walk); listed again only while they change lately
        while key not in self._judged:
            changes.see(*look.stamp())
            if changes.quiet():
                with self._lock:
                    self._judged.add(key)
                return
            if time.monotonic() >= give_up:
                self.mark(key, {r.rank: its[-1] for r in dump.ranks if (its := r.iterations())})
                return
            time.sleep(0.25)
            look = dump.reopen()           # (a new step or rank counts: the served listing is older)

    def active(self, key: str) -> bool:
        """Whether a job was writing the dump at the last look."""
        return key in self._newest

    def below(self, key: str) -> int | None:
        """The iteration from which on a job may still be writing the dump (the lowest rank's newest at the
        last look; 0 when no rank listed one); None when it is quiet."""
        newest = self._newest.get(key)
        return None if newest is None else min(newest.values(), default=0)

    def readable(self, key: str, rank: int, iterations: list[int]) -> list[int]:
        """``iterations`` less those the job may still be writing on ``rank``: checking them now could
        read a half-written file."""
        newest = self._newest.get(key)
        if newest is None:
            return list(iterations)
        busy = newest.get(rank)       # None: the rank listed nothing at the last look, all it lists is new
        return [i for i in iterations if busy is not None and i < busy]

    def settled_warnings(self, key: str, warnings: list[str]) -> tuple[list[str], list[str]]:
        """(warnings, pending): while a job writes the dump, a warning that was not there when it was last
        quiet may be about a file still being written: it is held back as pending, and reported once the
        job is quiet if the file is still broken. A dump not being written has no pending warning."""
        with self._lock:
            if key not in self._newest:
                self._quiet_warnings[key] = set(warnings)
                return warnings, []
            known = self._quiet_warnings.get(key, set())
        return [w for w in warnings if w in known], [w for w in warnings if w not in known]
