"""Progress: Lightning's rich bar in a terminal; elsewhere (CI, SLURM output files) one line per epoch."""

import logging
import sys
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ProgressBar, RichProgressBar

log = logging.getLogger(__name__)


class EpochLines(ProgressBar):
    """One log line per epoch with its metrics, and nothing redrawn (a ProgressBar, so Lightning
    adds no bar of its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.enabled = True

    def disable(self) -> None:
        self.enabled = False

    def enable(self) -> None:
        self.enabled = True

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.enabled and trainer.is_global_zero:
            shown = "  ".join(f"{k} {v:.4g}" for k, v in self.get_metrics(trainer, pl_module).items() if "/" in k)
            log.info(f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}  {shown}")


def progress_bar(**rich_options: Any) -> ProgressBar:
    """RichProgressBar when stdout is a terminal, else EpochLines."""
    return RichProgressBar(**rich_options) if sys.stdout.isatty() else EpochLines()
