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


def verdict_exit(verdict: str, strict: bool) -> int:
    """The exit status of a scan's verdict: 1 found, 4 incomplete (1 with --strict), 0 clean."""
    if verdict == "found" or (verdict == "incomplete" and strict):
        return Exit.FOUND
    return Exit.INCOMPLETE if verdict == "incomplete" else Exit.OK
