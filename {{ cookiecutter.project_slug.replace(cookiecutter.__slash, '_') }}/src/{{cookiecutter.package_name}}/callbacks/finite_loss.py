"""Stop at the first non-finite loss, before any checkpoint could store the broken weights."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import torch

from {{ cookiecutter.package_name }}.utils.errors import TrainingError


class StopOnNonFiniteLoss(L.Callback):
    """Raise a TrainingError naming the step when the training loss is NaN or infinite.

    Lightning runs checkpoint callbacks after all others, so the weights of that step are
    never saved: the last checkpoint stays the last good one. The check reads one value per
    step back from the device, which costs little next to a step.
    """

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if not isinstance(loss, torch.Tensor) or torch.isfinite(loss).all():
            return
        saved = [
            Path(path)
            for callback in trainer.checkpoint_callbacks
            for path in (getattr(callback, "last_model_path", ""), getattr(callback, "best_model_path", ""))
            if path and Path(path).is_file()
        ]
        last = max(saved, key=lambda path: path.stat().st_mtime_ns, default=None)
        # global_step already counts this step; name it as training_step saw it.
        raise TrainingError(
            f"The training loss is {loss.item()} at step {trainer.global_step - 1} (epoch "
            f"{trainer.current_epoch}, batch {batch_idx}): training stopped, and nothing was saved "
            f"from this step. Last good checkpoint: {last or 'none yet'}. Common causes: a learning "
            "rate too high (model.optimizer.lr), non-finite values in the data, or 16-mixed "
            "precision on a model that overflows (try bf16-mixed)."
        )
