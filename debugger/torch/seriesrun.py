"""The Recorder's per-step series job: the series itself (debugger.torch.series), the triggers that watch
it, and the log of the deep captures they asked for (debugger.torch.triggers).

Nothing here may change or stop the training: every call into the series goes through :meth:`SeriesRun.call`,
whose first failure warns once and turns the series and its log off.
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, ContextManager, Sequence

import torch

from ..formats.tdbg_h5.series import write_captures
from .compiled import compiling
from .levels import LevelPlan
from .series import SeriesCapture, warn_off
from .stepargs import closure_of, with_closure
from .triggers import CaptureLog, TouchFile, Trigger


class SeriesRun:
    """One rank's series, triggers and capture log while a Recorder runs (all off until :meth:`start`)."""

    def __init__(self, wanted: bool, flush_seconds: float, scaler: Any, trigger: Trigger | None,
                 touch_file: "str | os.PathLike[str] | TouchFile | None") -> None:
        if (trigger is not None or touch_file is not None) and not wanted:
            raise ValueError("trigger= and touch_file= watch the per-step series: give series=True too")
        self.wanted = wanted
        self.flush_seconds = flush_seconds
        self.scaler = scaler
        self.trigger = trigger
        self.touch = touch_file if isinstance(touch_file, TouchFile) or touch_file is None else TouchFile(os.fspath(touch_file))
        self.series: SeriesCapture | None = None
        self.captures: CaptureLog | None = None
        self.earlier_captures: dict[str, Any] | None = None    # a resumed run's deep steps and triggers
        self._rank_dir = ""
        self._plan: LevelPlan | None = None
        self._own_work: Callable[[], ContextManager[None]] = contextlib.nullcontext
        self._captures_written = 0.0
        self._warned = False

    def start(self, rank_dir: str, root: torch.nn.Module, optimizers: Sequence[torch.optim.Optimizer],
              param_name: dict[int, str], plan: LevelPlan, own_work: Callable[[], ContextManager[None]]) -> list[Any]:
        """Open the series in ``rank_dir``; the optimizer hook handles it installed (none when it failed)."""
        self._rank_dir, self._plan, self._own_work = rank_dir, plan, own_work
        try:
            self.series = SeriesCapture(rank_dir, root, optimizers, param_name, flush_seconds=self.flush_seconds,
                                        scaler=self.scaler)
        except Exception as exc:     # never break the training
            self.off(exc)
            return []
        self.captures = CaptureLog(plan.describe())
        self.captures.carry(self.earlier_captures)
        self.series.host_scalars = self.trigger is not None
        return [opt.register_step_pre_hook(self._step_pre) for opt in optimizers]

    def end_step(self, iteration: int) -> None:
        """The step ``iteration`` ended: into the series, then the cheap checks that may ask for deep steps."""
        if self.series is not None:
            self.call(self.series.end_step, iteration)
        if self.series is not None:
            self.call(self._check_triggers, iteration)

    def took(self, iteration: int, level: str | None, write: bool = True) -> None:
        """``iteration`` is recorded at ``level`` (None: not deep): into the capture log."""
        if self.captures is not None:
            self.captures.took(iteration, level)
            if write:
                self._write_captures(force=False)

    def asked(self, iteration: int, n: int, level: str) -> None:
        """``rec.capture_next(n, level)`` at ``iteration``: into the capture log."""
        if self.captures is not None:
            self.captures.asked(iteration, n, level, {"check": "capture_next"})

    def on_backward(self, tensors: Any) -> None:
        """``backward()`` started from ``tensors``: the step's loss."""
        if self.series is not None:
            roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
            self.call(self.series.on_backward, [t for t in roots if isinstance(t, torch.Tensor)])

    def flush(self, guarded: bool = True) -> None:
        """Every ended step readable on disk (``guarded=False`` from a signal handler: no warning machinery)."""
        series = self.series
        if series is not None and guarded:
            self.call(series.flush)
        elif series is not None:
            series.flush()

    def close(self, open_iteration: int) -> None:
        """Close the series; the open iteration leaves the capture log, which is written."""
        if self.series is not None:
            self.call(self.series.close)
            self.series = None
        if self.captures is not None:
            self.captures.untake(open_iteration)
            self._write_captures(force=True)

    def stop(self) -> bool:
        """Writing the dump failed: everything off without a warning of its own; whether the series was on."""
        series, self.series, self.captures = self.series, None, None
        self._warned = True      # the recorder's warning says it all
        if series is not None:
            with contextlib.suppress(Exception):
                series.close()
        return series is not None

    def call(self, fn: Any, *args: Any) -> None:
        """A call into the series; its first failure warns once and turns the series off. The recorder's own
        work: at level "ops" its reads (``Tensor.numpy()`` dispatches a ``detach``) were recorded as the
        training's operators."""
        try:
            with torch.no_grad(), self._own_work():
                fn(*args)
        except Exception as exc:
            self.off(exc, fn)

    def off(self, exc: BaseException, fn: Any = None) -> None:
        """The series' (and its captures file's) first failure: one warning, both off, training goes on."""
        series, self.series, self.captures = self.series, None, None
        if not self._warned:
            self._warned = True
            warn_off(exc)
        if series is not None and fn != series.close:
            with contextlib.suppress(Exception):
                series.close()

    def _step_pre(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
        if compiling() or self.series is None:     # traced by Dynamo: step aside (debugger.torch.compiled)
            return None
        closure = closure_of(args, kwargs)
        if closure is None:
            self.call(self.series.on_optimizer_step, opt)
            return None

        # step(closure) (Lightning) runs the forward and backward inside step(): the gradients the
        # update reads are there once the closure returns, not before
        def series_closure() -> Any:
            result = closure()
            if self.series is not None:
                self.call(self.series.on_optimizer_step, opt)
            return result
        return with_closure(args, kwargs, series_closure)

    def _check_triggers(self, iteration: int) -> None:
        """The cheap checks of the step just ended; one that fires asks for the next steps deep."""
        assert self.series is not None and self.captures is not None and self._plan is not None
        fired: list[tuple[dict[str, Any], int, str]] = []
        if self.trigger is not None:
            why = self.trigger.check(iteration, self.series.last_loss, self.series.last_grad_norm)
            if why is not None:
                fired.append((why, self.trigger.steps, self.trigger.level))
        if self.touch is not None:
            why = self.touch.check(iteration)
            if why is not None:
                fired.append((why, self.touch.steps, self.touch.level))
        for why, steps, level in fired:
            self._plan.capture_next(iteration + 1, steps, level)
            self.captures.asked(iteration, steps, level, why)
        if fired:
            self._write_captures(force=True)

    def _write_captures(self, force: bool) -> None:
        """The captures file, when it changed (at most every flush period unless ``force``)."""
        log = self.captures
        now = time.monotonic()
        if log is None or not log.changed or not force and now - self._captures_written < self.flush_seconds:
            return
        try:
            write_captures(self._rank_dir, log.as_dict())
            log.changed = False
            self._captures_written = now
        except Exception as exc:     # never break the training
            self.off(exc)
