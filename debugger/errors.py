"""Errors a user can cause; each names the path and what is wrong with it."""
from __future__ import annotations

import os


class DumpError(Exception):
    """A dump (or a file in it) cannot be used; the message starts with the path."""

    def __init__(self, path: str | os.PathLike[str] | None, problem: str) -> None:
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)

    def __reduce__(self) -> tuple:
        # made again from its fields: raised in a worker process, it reaches the parent intact
        return _remake, (type(self), self.path, self.problem)


def _remake(cls: type, path: str | None, problem: str) -> DumpError:
    err: DumpError = DumpError.__new__(cls)
    DumpError.__init__(err, path, problem)
    return err


class NotADumpError(DumpError):
    """The path holds no MindSpore or tdbg dump."""


class CorruptFileError(DumpError):
    """A file in the dump exists but cannot be decoded."""


class QueryError(DumpError):
    """A query (node name, FILE:LINE, range, watchpoint) is malformed or matches nothing."""


class NoEarlierValue(QueryError):
    """A tensor has no earlier value to compare with (its first iteration, an activation): a state, not a miss."""


class InvalidQueryError(QueryError):
    """A malformed argument (range, slice, location, watchpoint): the caller's mistake, not a miss."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, problem)
