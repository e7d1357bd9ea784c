"""``TdbgLightningCallback``: records a Lightning run (imports ``lightning``, else ``pytorch_lightning``)."""
from __future__ import annotations

import os
from typing import Any

try:
    from lightning.pytorch import Callback
except ImportError:         # the standalone package
    from pytorch_lightning import Callback

from .callbacks import RecordingSession, torch_optimizers


class TdbgLightningCallback(Callback):
    """``lightning.Trainer(callbacks=[TdbgLightningCallback("runs/x")])``: a tdbg-h5 dump, one iteration
    per optimizer step (``accumulate_grad_batches`` respected); options as ``debugger.torch.Recorder``'s."""

    def __init__(self, path: str | os.PathLike[str], **options: Any) -> None:
        self.session = RecordingSession(path, **options)
        self._steps = 0

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """After the sanity check, with the optimizers set up: start recording iteration 0."""
        self._steps = int(trainer.global_step)
        self.session.begin(pl_module, torch_optimizers(trainer.optimizers), rank=int(trainer.global_rank))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """End the iteration when this batch ran an optimizer step (not while accumulating)."""
        steps = int(trainer.global_step)
        if steps != self._steps:
            self._steps = steps
            self.session.step()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        """Close the dump."""
        self.session.end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """Training died: keep what was recorded."""
        self.session.end()
