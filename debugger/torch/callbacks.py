"""Trainer callbacks: record a Hugging Face or Lightning training run with the Recorder's options.

    from debugger.torch.callbacks import TdbgTrainerCallback            # transformers.Trainer
    Trainer(model, args, train_dataset=ds, callbacks=[TdbgTrainerCallback("runs/x", save="statistics")])

    from debugger.torch.callbacks import TdbgLightningCallback          # lightning.Trainer
    lightning.Trainer(callbacks=[TdbgLightningCallback("runs/x", iterations="0-9")])

One iteration is one optimizer step (with gradient accumulation, every micro-batch before it). The
options are every one of the Recorder's (``save``, ``iterations``, ``level``, ``modules``, ``ops``,
``compression``, ``durable``, ``replay``, ``pipeline``, ``series``, ``series_flush_seconds``, ``scaler``,
``trigger``, ``touch_file``), checked when the callback is made; the rank is the trainer's global rank
unless ``rank=`` says otherwise. Neither library
is imported until its class is asked for; a failure of the recorder is a ``RuntimeWarning`` and the
training goes on unrecorded.
"""
from __future__ import annotations

import importlib
import os
import warnings
from typing import Any, Iterable, Sequence

from .levels import COMPILED_OPS, LevelPlan
from .triggers import TouchFile, Trigger

_CLASSES = {"TdbgTrainerCallback": "._hf", "TdbgLightningCallback": "._lightning"}
_SAVE = ("tensors", "values", "statistics", "both")
_COMPRESSION = (None, "gzip", "lzf")

__all__ = ["RecordingSession", *_CLASSES]


def __getattr__(name: str) -> Any:
    """The callback classes, each made when first asked for (it imports its library)."""
    module = _CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __package__), name)


class RecordingSession:
    """What both callbacks share: a Recorder made when training starts, stepped at every optimizer
    step, closed when training ends; its failures warn and stop the recording, never the training."""

    def __init__(self, path: str | os.PathLike[str], *, save: str = "tensors",
                 iterations: str | Iterable[int] | None = None, level: Any = "ops",
                 modules: Sequence[str] | None = None, ops: Sequence[str] | None = None, rank: int | None = None,
                 compression: str | None = None, durable: bool = False, replay: bool = True,
                 pipeline: Any = None, series: bool = False, series_flush_seconds: float | None = None,
                 scaler: Any = None, trigger: Trigger | None = None,
                 touch_file: "str | os.PathLike[str] | TouchFile | None" = None,
                 compiled_ops: str = "boundary", resume: bool = False) -> None:
        # the options are checked here, where the user wrote them, not when the trainer starts
        _check_options(save, level, iterations, compression, series, series_flush_seconds, trigger, touch_file)
        if compiled_ops not in COMPILED_OPS:
            raise ValueError(f"compiled_ops must be one of {', '.join(COMPILED_OPS)}, got {compiled_ops!r}")
        self.path = os.fspath(path)
        self.rank = rank
        self.options: dict[str, Any] = dict(
            save=save, iterations=iterations, modules=modules, ops=ops, compression=compression, durable=durable,
            level=level, replay=replay, pipeline=pipeline, series=series, scaler=scaler, trigger=trigger,
            touch_file=touch_file, compiled_ops=compiled_ops, resume=resume)
        if series_flush_seconds is not None:      # None: the Recorder's default (its module imports torch)
            self.options["series_flush_seconds"] = series_flush_seconds
        self.recorder: Any = None
        self.started = False

    def begin(self, model: Any, optimizers: Sequence[Any], rank: int, compiled: bool = False) -> None:
        """Start recording ``model`` trained by ``optimizers`` (torch optimizers) as ``rank`` (``compiled``:
        the trainer runs it through torch.compile, out of the recorder's sight)."""
        if self.started:
            warnings.warn(f"tdbg: {self.path} already holds this callback's recording; "
                          "this training is not recorded", RuntimeWarning, stacklevel=3)
            return
        self.started = True
        try:
            from .recorder import Recorder   # torch with it: importing the callbacks stays light until training starts

            rec = Recorder(self.path, model, list(optimizers), rank=self.rank if self.rank is not None else rank,
                           **self.options)
            if compiled:
                rec.note_compiled()
            rec.start()
        except Exception as exc:
            self._fail("could not start recording", exc)
            return
        self.recorder = rec

    def step(self) -> None:
        """One optimizer step is done: end its iteration."""
        if self.recorder is None:
            return
        try:
            self.recorder.step()
        except Exception as exc:
            self._fail(f"iteration {self.recorder.iteration} could not be recorded", exc)

    def end(self) -> None:
        """Training ended: write what is left and release the dump (the open iteration is dropped)."""
        rec, self.recorder = self.recorder, None
        if rec is None:
            return
        try:
            rec.close()
        except Exception as exc:
            warnings.warn(f"tdbg: closing the recording in {self.path} failed: {type(exc).__name__}: {exc}",
                          RuntimeWarning, stacklevel=3)

    def _fail(self, what: str, exc: Exception) -> None:
        warnings.warn(f"tdbg: {what} in {self.path}: {type(exc).__name__}: {exc}; "
                      "training goes on unrecorded", RuntimeWarning, stacklevel=4)
        rec, self.recorder = self.recorder, None
        if rec is not None:
            try:
                rec.close()
            except Exception:       # already warned; a second message would say nothing new
                pass


def _check_options(save: str, level: Any, iterations: Any, compression: str | None, series: bool,
                   flush_seconds: float | None, trigger: Any, touch_file: Any) -> None:
    """The Recorder's own checks of its options, made without torch (ValueError / TypeError)."""
    if save not in _SAVE:
        raise ValueError(f"save must be one of {', '.join(_SAVE)}, got {save!r}")
    LevelPlan(level, iterations)
    if compression not in _COMPRESSION:
        raise ValueError(f"compression must be None, 'gzip' or 'lzf', got {compression!r}")
    if flush_seconds is not None and not flush_seconds > 0:
        raise ValueError(f"series_flush_seconds must be a positive number of seconds, got {flush_seconds!r}")
    if trigger is not None and not isinstance(trigger, Trigger):
        raise TypeError(f"trigger must be a debugger.torch.Trigger, got {type(trigger).__name__}")
    if (trigger is not None or touch_file is not None) and not series:
        raise ValueError("trigger= and touch_file= watch the per-step series: give series=True too")


def torch_optimizers(optimizers: Iterable[Any]) -> list[Any]:
    """The torch optimizers under trainers' wrappers (accelerate's ``AcceleratedOptimizer``,
    Lightning's ``LightningOptimizer``): the ones whose step hooks fire when the update runs."""
    import torch   # as the recorder: loaded when the trainer hands its optimizers over, not on import

    found = []
    for opt in optimizers:
        inner = getattr(opt, "optimizer", None)
        while isinstance(inner, torch.optim.Optimizer):
            opt, inner = inner, getattr(inner, "optimizer", None)
        if isinstance(opt, torch.optim.Optimizer):
            found.append(opt)
    return found
