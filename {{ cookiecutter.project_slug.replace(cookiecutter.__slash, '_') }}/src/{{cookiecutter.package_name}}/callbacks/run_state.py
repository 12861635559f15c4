"""What a checkpoint needs, beyond weights and optimizer, for a resumed run to continue exactly.

Lightning saves the weights, optimizer, scheduler, loop progress, callback and data-loader
states; this adds the random number generators (dropout masks, augmentations) and the ids of
the logger runs, so a resumed run appends to the same W&B or MLflow run, and ends those runs.
"""

import random
from typing import Any

import lightning as L
import numpy as np
import torch


def logger_ids(trainer: L.Trainer) -> dict[str, str]:
    """The run id of each logger that has one: {"wandb": ..., "mlflow": ...}."""
    ids = {}
    for logger in trainer.loggers:
        name = type(logger).__name__.lower()
        for kind in ("wandb", "mlflow"):
            if kind in name:
                ids[kind] = str(logger.run_id if kind == "mlflow" else logger.version)
    return ids


def finish_logger_runs(trainer: L.Trainer, exit_code: int = 0) -> None:
    """End the runs of loggers that have one to end (W&B): flushed, and free for a later resume.

    In a multirun, the next job then starts its own run. W&B prints its `wandb sync` hint here.
    """
    if not trainer.is_global_zero:
        return
    for logger in trainer.loggers:
        finish = getattr(logger.experiment, "finish", None)
        if callable(finish):
            finish(exit_code=exit_code)


def random_states() -> dict[str, Any]:
    """The state of every random number generator, as plain data (loads with weights_only)."""
    numpy_state = np.random.get_state()
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [numpy_state[0], numpy_state[1].tolist(), *numpy_state[2:]],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_random_states(states: dict[str, Any]) -> None:
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy_state = states["numpy"]
    np.random.set_state((numpy_state[0], np.array(numpy_state[1], dtype=np.uint32), *numpy_state[2:]))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


class RunState(L.Callback):
    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        checkpoint["run_state"] = {"random": random_states(), "loggers": logger_ids(trainer)}

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        if "run_state" in checkpoint:
            set_random_states(checkpoint["run_state"]["random"])
