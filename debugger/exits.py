"""Exit statuses, the same for every command (documented in the README)."""
from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """Exit codes, the same for every command."""

    OK = 0
    FOUND = 1          # scan: hits; compare: pairs graded error
    USAGE = 2          # bad usage or unreadable dump
    INTERNAL = 3       # a bug in tdbg: one line on stderr (the traceback with --debug)
    INCOMPLETE = 4     # scan: no hit, but a watchpoint could check nothing (README "Coverage")
    INTERRUPTED = 130
