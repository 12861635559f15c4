"""Stop at the first NaN or infinite training loss, before any checkpoint could store the broken weights."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import torch

from {{ cookiecutter.package_name }}.utils.errors import TrainingError


class StopOnNonFiniteLoss(L.Callback):
    """Raise a TrainingError naming the first step whose training loss is NaN or infinite.

    The losses stay on the device and are checked together, with one read: every
    `every_n_steps` steps, at each epoch's last batch (before its validation), before any
    validation, before any checkpoint is written, and when training ends. So no step waits for
    a GPU to hand its loss back, and no checkpoint holds weights a non-finite loss has broken:
    the last checkpoint stays the last good one.
    """

    def __init__(self, every_n_steps: int = 32) -> None:
        if not isinstance(every_n_steps, int) or every_n_steps < 1:
            name = "callbacks.stop_on_non_finite_loss.every_n_steps"
            raise ValueError(f"{name}={every_n_steps!r}: must be a positive integer.")
        self.every_n_steps = every_n_steps
        self._losses: list[torch.Tensor] = []
        self._where: list[tuple[int, int, int]] = []  # the step, epoch and batch of each loss

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if not isinstance(loss, torch.Tensor):
            return
        # One value per step (a non-finite element makes the sum non-finite).
        self._losses.append(loss.detach().sum() if loss.ndim else loss.detach())
        # global_step already counts this step; name it as training_step saw it.
        self._where.append((trainer.global_step - 1, trainer.current_epoch, batch_idx))
        if len(self._losses) >= self.every_n_steps or batch_idx + 1 == trainer.num_training_batches:
            self._check(trainer)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._check(trainer)

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        self._check(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._check(trainer)

    def _check(self, trainer: L.Trainer) -> None:
        if not self._losses:
            return
        losses = torch.stack(self._losses)
        finite = torch.isfinite(losses)
        where, self._losses, self._where = self._where, [], []
        if finite.all():
            return
        first = int((~finite).nonzero()[0])
        step, epoch, batch = where[first]
        saved = [
            Path(path)
            for callback in trainer.checkpoint_callbacks
            for path in (getattr(callback, "last_model_path", ""), getattr(callback, "best_model_path", ""))
            if path and Path(path).is_file()
        ]
        last = max(saved, key=lambda path: path.stat().st_mtime_ns, default=None)
        raise TrainingError(
            f"The training loss is {losses[first].item()} at step {step} (epoch {epoch}, batch {batch}): "
            "training stopped, and nothing was saved from this step or the ones after it. Last good "
            f"checkpoint: {last or 'none yet'}. Common causes: a learning rate too high "
            "(model.optimizer.lr), non-finite values in the data, or 16-mixed precision on a model "
            "that overflows (try bf16-mixed)."
        )
