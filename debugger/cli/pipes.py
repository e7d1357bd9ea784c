"""An output that a closed pipe cannot turn into a different exit status.

``tdbg scan DUMP | head`` closes the pipe after ten lines; the next write raises BrokenPipeError. Caught
where it was raised, it used to end the command with exit 0 whatever the scan had found, so a CI script
with ``set -o pipefail`` passed a failing run. Behind :class:`PipeSafeOutput` the command finishes and
exits with its own status; what it still writes goes nowhere.
"""
from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class PipeSafeOutput:
    """``inner`` (a text stream), whose writes after its reader went away are dropped (``broken`` says so)."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.broken = False

    def write(self, text: str) -> int:
        """Write ``text``, or drop it once the pipe is closed."""
        if not self.broken:
            try:
                return self.inner.write(text)
            except BrokenPipeError:
                self._closed()
        return len(text)

    def flush(self) -> None:
        """Flush, unless the pipe is closed."""
        if not self.broken:
            try:
                self.inner.flush()
            except BrokenPipeError:
                self._closed()

    def _closed(self) -> None:
        self.broken = True
        if self.inner is sys.stdout:
            # Python flushes stdout again at exit: pointed at /dev/null, that flush cannot fail either
            # (else "Exception ignored ... BrokenPipeError" and exit status 120)
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def pipe_closed(out: object) -> bool:
    """Whether ``out``'s reader went away (a command that follows a job stops then)."""
    return bool(getattr(out, "broken", False))
