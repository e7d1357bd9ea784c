"""Following a dump that a running job is still writing: which of its iterations can be read now.

A writer works on its newest iteration (MindSpore and msprobe write files in place; tdbg-h5 renames each
file into place, but an iteration may still gain files). So an iteration is *settled* once a later one
exists on its rank, or once the dump has not changed for :data:`SETTLE_S` seconds (or following ended):
only settled iterations are read, and a file still being written is never called corrupt.
"""
from __future__ import annotations

import time
from typing import Container, Mapping

from ..model import Dump

SETTLE_S = 2.0     # a dump unchanged this long: its newest iteration is complete (a writer pausing mid-file is not)


def settled(dump: Dump, done: Mapping[int, Container[int]], quiet: bool) -> dict[int, list[int]]:
    """Per rank, its iterations not in ``done`` that no writer can still be writing (``quiet``: the dump has
    been unchanged for SETTLE_S seconds, or the job ended, so each rank's newest iteration is complete)."""
    new: dict[int, list[int]] = {}
    for rank in dump.ranks:
        its = rank.iterations()
        seen = done.get(rank.rank, ())
        ready = [i for i in its if i not in seen and (quiet or i < its[-1])]
        if ready:
            new[rank.rank] = ready
    return new


class Quiet:
    """When a followed dump last changed, from its fingerprints as they are seen."""

    def __init__(self) -> None:
        self.fingerprint: str | None = None
        self.last_change = time.monotonic()

    def see(self, fingerprint: str, newest: float | None = None) -> bool:
        """Note the dump's fingerprint now; whether it changed since the last look. At the first look,
        ``newest`` (the newest mtime of its files, :meth:`Dump.stamp`) says when it last changed: a dump
        whose files are all older than SETTLE_S is quiet at once (a finished run waits for nothing)."""
        if fingerprint == self.fingerprint:
            return False
        first = self.fingerprint is None
        self.fingerprint, self.last_change = fingerprint, time.monotonic()
        if first and newest is not None:      # a file stamped in the future (clock skew) counts as now
            self.last_change -= max(0.0, time.time() - newest)
        return True

    def quiet(self) -> bool:
        """Whether the dump has been unchanged for SETTLE_S seconds."""
        return time.monotonic() - self.last_change >= SETTLE_S

    def idle(self) -> float:
        """Seconds since the dump last changed."""
        return time.monotonic() - self.last_change
