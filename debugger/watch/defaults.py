"""A dump's watchpoints as the web UI uses them: the triage's (its recommended scan, whose hits and coverage
are reused as it found them) until the user edits the list, then the user's, each list with what it found
kept in the cache folder (:mod:`debugger.watch.store`); going back to the triage's drops the user's."""
from __future__ import annotations

import threading
from typing import Callable

from ..model import Dump, open_dump
from ..stats.cache import StatsCache
from . import store as watchstore
from .registry import Watchpoint
from .results import ScanResult
from .session import ScanSession


class DumpWatchpoints:
    """The two lists of one dump: ``triage`` (set by :meth:`take_triage`, empty until the triage has
    scanned) and ``user`` (edited, or none); :meth:`current` is the one in use."""

    def __init__(self, dump: Dump, cache: StatsCache | None, cache_dir: str | None, use_store: bool = True,
                 lock: threading.RLock | None = None) -> None:
        self._lock = lock or threading.RLock()
        path = (lambda kind: watchstore.store_path(dump.root, cache_dir, kind)) if use_store else (lambda kind: None)
        self.user = ScanSession(dump, cache, path("watch"), self._lock)
        self.triage = ScanSession(dump, cache, path("triage"), self._lock)

    @property
    def edited(self) -> bool:
        """Whether the user's list is the one in use."""
        return self.user.edited

    def current(self) -> ScanSession:
        """The session in use: the user's once edited, else the triage's. Without the dump's lock (one
        attribute read): asking which list is in use never waits for a check that holds it."""
        return self.user if self.user.edited else self.triage

    def to_edit(self) -> ScanSession:
        """The session an edit changes: the user's, which starts from the triage's list (and what it
        found) at the first edit."""
        with self._lock:
            if not self.user.edited:
                self.user.take_from(self.triage)
            return self.user

    def take_triage(self, watchpoints: list[Watchpoint], res: ScanResult | None) -> None:
        """The triage's watchpoints, and with ``res`` (its scan of them) what they found: the defaults."""
        self.triage.take(watchpoints, res)

    def back_to_defaults(self) -> None:
        """Use the triage's list again; the user's is dropped."""
        self.user.forget()

    def refresh(self, reopen: Callable[[str], Dump] = open_dump) -> None:
        """Both lists keep what still holds in the dump opened again (:meth:`ScanSession.refresh`)."""
        with self._lock:
            self.user.refresh(reopen)
            self.triage.refresh(reopen)


__all__ = ["DumpWatchpoints"]
