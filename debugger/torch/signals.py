"""SIGTERM and SIGINT (what a scheduler and a user send to stop a job) first make what the recorder holds
readable on disk, then end the process as it would have ended without the recorder.

The handler runs in the main thread between two bytecodes, possibly inside the recorder's own code, so
it does no recording work there (a lock the interrupted code holds would never be released): a thread of
its own flushes, and the handler waits for it at most :data:`WAIT_SECONDS`. Then the handler that was
installed before is called (a launcher's, the user's, Python's KeyboardInterrupt), or, where that was the
default action, the default action is taken again: the process dies of the same signal.
"""
from __future__ import annotations

import os
import signal
import threading
import warnings
from typing import Any, Callable

SIGNALS = (signal.SIGTERM, signal.SIGINT)
WAIT_SECONDS = 5.0          # a scheduler's grace period before SIGKILL is 10-30 s


class FlushOnSignal:
    """Installed in the main thread by :meth:`install`; :meth:`remove` puts the earlier handlers back."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        self._before: dict[int, Any] = {}

    def install(self) -> "FlushOnSignal":
        """Take SIGTERM and SIGINT (not from another thread: Python refuses it, and then nothing is done)."""
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in SIGNALS:
            try:
                self._before[sig] = signal.signal(sig, self._handle)
            except (ValueError, OSError):      # not settable here (an embedded interpreter)
                continue
        return self

    def remove(self) -> None:
        """The earlier handlers back, where ours is still the one installed (a later one is left alone)."""
        for sig, before in self._before.items():
            try:
                if signal.getsignal(sig) == self._handle:
                    signal.signal(sig, before if before is not None else signal.SIG_DFL)
            except (ValueError, OSError, TypeError):
                pass
        self._before.clear()

    def _handle(self, sig: int, frame: Any) -> None:
        before = self._before.get(sig, signal.SIG_DFL)
        self._flush_aside()
        if callable(before):
            before(sig, frame)
        elif before == signal.SIG_DFL or before is None:      # None: set outside Python, taken as the default
            self.remove()
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)       # the default action: the process ends of this signal
        # SIG_IGN: it was ignored before; it still is

    def _flush_aside(self) -> None:
        """The flush on a thread of its own, waited for at most WAIT_SECONDS (never a failure here)."""
        def run() -> None:
            try:
                self._flush()
            except Exception as exc:     # the recording may be gone already: the signal still goes on
                warnings.warn(f"tdbg recorder: flushing on a signal failed: {type(exc).__name__}: {exc}",
                              RuntimeWarning, stacklevel=2)
        t = threading.Thread(target=run, name="tdbg-flush-on-signal", daemon=True)
        t.start()
        t.join(WAIT_SECONDS)
