"""``TdbgTrainerCallback``: records a ``transformers.Trainer`` run (imports transformers)."""
from __future__ import annotations

import os
from typing import Any

from transformers import TrainerCallback

from .callbacks import RecordingSession, torch_optimizers


class TdbgTrainerCallback(TrainerCallback):
    """``Trainer(..., callbacks=[TdbgTrainerCallback("runs/x", save="statistics")])``: a tdbg-h5 dump,
    one iteration per optimizer step; options as ``debugger.torch.Recorder``'s."""

    def __init__(self, path: str | os.PathLike[str], **options: Any) -> None:
        self.session = RecordingSession(path, **options)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       **kwargs: Any) -> None:
        """The Trainer made its optimizer and wrapped it (accelerate): record the torch one under it."""
        self.session.begin(model, torch_optimizers([optimizer] if optimizer is not None else []),
                           rank=int(getattr(args, "process_index", 0)),
                           compiled=bool(getattr(args, "torch_compile", False)))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Called once per optimizer step, after the micro-batches it accumulated."""
        self.session.step()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Close the dump."""
        self.session.end()
