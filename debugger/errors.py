"""Errors a user can cause; each names the path and what is wrong with it."""
from __future__ import annotations

import os


class DumpError(Exception):
    """A dump (or a file in it) cannot be used; the message starts with the path."""

    def __init__(self, path: str | os.PathLike[str] | None, problem: str) -> None:
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class NotADumpError(DumpError):
    """The path holds no MindSpore or tdbg dump."""


class CorruptFileError(DumpError):
    """A file in the dump exists but cannot be decoded."""


class QueryError(DumpError):
    """A query (node name, FILE:LINE, range, watchpoint) is malformed or matches nothing."""


class InvalidQueryError(QueryError):
    """A malformed argument (range, slice, location, watchpoint): the caller's mistake, not a miss."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, problem)
