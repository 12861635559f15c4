"""Progress: Lightning's rich bar in a terminal, one plain line per epoch elsewhere (CI logs, files)."""

import logging
import sys
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ProgressBar, RichProgressBar

log = logging.getLogger(__name__)


class EpochLines(ProgressBar):
    """One log line per epoch with its metrics: no control characters, nothing redrawn.

    A ProgressBar, so Lightning adds no bar of its own.
    """

    def __init__(self) -> None:
        super().__init__()
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not (self._enabled and trainer.is_global_zero):
            return
        metrics = self.get_metrics(trainer, pl_module)
        shown = "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
        log.info(f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}  {shown}")


def progress_bar(**rich_options: Any) -> ProgressBar:
    """RichProgressBar when stdout is a terminal, else EpochLines."""
    if sys.stdout.isatty():
        return RichProgressBar(**rich_options)
    return EpochLines()
