"""Triggered deep capture: while the per-step series runs, cheap checks at each ``rec.step()`` ask the
Recorder to record the next steps at a finer level (docs/pytorch.md, "Triggered capture").

- :class:`Trigger`: a non-finite loss or gradient norm, or a loss above ``loss_factor`` x its moving
  median over the last ``window`` steps, captures the next ``steps`` steps at ``level``;
- :class:`TouchFile`: a file the user creates or touches while the job runs does the same (its status
  is read at most once a second).
Every deep capture's reason goes into the dump (:class:`CaptureLog`).
"""
from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..formats.records import LEVEL_OPS, LEVELS


@dataclass
class Trigger:
    """Cheap checks of the loss and gradient norm at every step; when one fires at step s, steps
    s+1 .. s+``steps`` are recorded at ``level`` (no new firing until they are done)."""

    loss_factor: float | None = 3.0     # loss > loss_factor x moving median (None: no such check)
    window: int = 50                    # steps of the moving median
    nonfinite: bool = True              # a NaN/Inf loss or gradient norm
    steps: int = 5
    level: str = LEVEL_OPS
    min_history: int = 10               # the median is trusted after this many finite losses
    _losses: deque = field(default_factory=deque, init=False, repr=False)
    _quiet_until: int = field(default=-1, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"Trigger level must be one of {', '.join(LEVELS)}, got {self.level!r}")
        if self.steps < 1 or self.window < 1:
            raise ValueError("Trigger steps and window must be at least 1")
        self._losses = deque(maxlen=int(self.window))

    def check(self, step: int, loss: float | None, grad_norm: float | None) -> dict[str, Any] | None:
        """The reason to capture after ``step`` (a JSON-ready mapping), or None."""
        if loss is None:        # no backward() in the step: nothing to check
            return None
        fired = self._fired(loss, grad_norm)
        if math.isfinite(loss):
            self._losses.append(loss)
        if fired is None or step < self._quiet_until:
            return None
        self._quiet_until = step + self.steps + 1
        return fired

    def _fired(self, loss: float, grad_norm: float | None) -> dict[str, Any] | None:
        if self.nonfinite and not math.isfinite(loss):
            return {"check": "nonfinite_loss", "value": _json_float(loss)}
        if self.nonfinite and grad_norm is not None and not math.isfinite(grad_norm):
            return {"check": "nonfinite_grad_norm", "value": _json_float(grad_norm)}
        if self.loss_factor is not None and len(self._losses) >= min(self.min_history, self.window):
            median = float(np.median(self._losses))
            if median > 0 and loss > self.loss_factor * median:
                return {"check": "loss_spike", "value": loss, "median": median, "factor": self.loss_factor}
        return None


@dataclass
class TouchFile:
    """Capture the next ``steps`` steps at ``level`` when ``path`` appears or its modification time
    changes (checked at most every ``interval`` seconds)."""

    path: str
    steps: int = 5
    level: str = LEVEL_OPS
    interval: float = 1.0
    _seen: int | None = field(default=None, init=False, repr=False)
    _next_check: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = os.fspath(self.path)
        if self.level not in LEVELS:
            raise ValueError(f"TouchFile level must be one of {', '.join(LEVELS)}, got {self.level!r}")
        self._seen = self._mtime()      # a file there before the run is no request

    def _mtime(self) -> int | None:
        try:
            return os.stat(self.path).st_mtime_ns
        except OSError:
            return None

    def check(self, step: int) -> dict[str, Any] | None:
        """The reason to capture after ``step``, or None."""
        now = time.monotonic()
        if now < self._next_check:
            return None
        self._next_check = now + self.interval
        m = self._mtime()
        if m is None or m == self._seen:
            return None
        self._seen = m
        return {"check": "touch_file", "path": self.path}


class CaptureLog:
    """Why each deep step was taken: the schedule, or a trigger's reason for a run of steps."""

    def __init__(self, schedule: dict[str, Any]) -> None:
        self.schedule = schedule
        self.triggered: list[dict[str, Any]] = []      # {"first", "last", "level", "step", "check", ...}
        self.deep: list[list[Any]] = []                # [first, last, level, reason]: runs of deep steps
        self.changed = False

    def asked(self, step: int, steps: int, level: str, reason: dict[str, Any]) -> None:
        """A trigger fired at ``step``: steps step+1 .. step+steps are asked for at ``level``."""
        self.triggered.append({"step": step, "first": step + 1, "last": step + steps, "level": level, **reason})
        self.changed = True

    def reason_of(self, step: int) -> str:
        for t in reversed(self.triggered):
            if t["first"] <= step <= t["last"]:
                return str(t["check"])
        return "schedule"

    def took(self, step: int, level: str | None) -> None:
        """Step ``step`` is recorded at ``level`` (None: series only)."""
        if level is None:
            return
        reason = self.reason_of(step)
        last = self.deep[-1] if self.deep else None
        if last is not None and last[1] == step - 1 and last[2] == level and last[3] == reason:
            last[1] = step
        else:
            self.deep.append([step, step, level, reason])
        self.changed = True

    def untake(self, step: int) -> None:
        """Step ``step`` was not recorded after all (the open iteration a close drops)."""
        last = self.deep[-1] if self.deep else None
        if last is not None and last[1] == step:
            if last[0] == step:
                self.deep.pop()
            else:
                last[1] = step - 1
            self.changed = True

    def carry(self, earlier: dict[str, Any] | None) -> None:
        """Keep an earlier run's deep steps and triggers (``Recorder(resume=True)``): the file lists every run's."""
        if not earlier:
            return
        self.deep[:0] = [list(d) for d in earlier.get("deep", []) if isinstance(d, list)]
        self.triggered[:0] = [dict(t) for t in earlier.get("triggered", []) if isinstance(t, dict)]
        self.changed = True

    def as_dict(self) -> dict[str, Any]:
        """The JSON the dump keeps (debugger/formats/tdbg_h5/series.py: captures.json)."""
        return {"schedule": self.schedule, "deep": [list(d) for d in self.deep],
                "triggered": [dict(t) for t in self.triggered]}


def _json_float(v: float) -> Any:
    """NaN and infinities as strings (JSON has none)."""
    return v if math.isfinite(v) else str(v)
