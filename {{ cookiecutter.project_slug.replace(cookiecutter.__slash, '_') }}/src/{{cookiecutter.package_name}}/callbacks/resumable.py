"""Stop on a signal and resume exactly: Lightning stops on SIGTERM alone and exits 0, hangs under DDP
when one rank alone is signalled, and keeps no random state (tests/test_resume.py shows each).

SIGTERM, SIGINT (Ctrl+C) and SIGUSR1 (SLURM's warning) are noted when they arrive (utils/runs.py);
the run stops at the next safe point, every rank agreeing: after a training step (saving
`checkpoints/interrupted.ckpt`), after an epoch's checkpoints, or at once where no training is
lost (setup, sanity check, test). `python train.py resume=<run dir>` then finishes the run as if
it had never stopped.
"""

import logging
import os
import random
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Checkpoint
from omegaconf import OmegaConf
from torchmetrics import Metric

from {{ cookiecutter.package_name }}.utils.runs import Stopped, TrainingError, catch_signals, received

log = logging.getLogger(__name__)


class Resumable(Checkpoint):
    """Stops on signals and on a non-finite loss, and adds to each checkpoint what an exact resume
    needs beyond Lightning's state: the random generators, each rank's metric sums, the last
    epoch's metrics (for metrics.json) and the data config (eval.py needs only the checkpoint).

    A Checkpoint, so Lightning runs it after ModelCheckpoint: an epoch's checkpoints are written
    before it stops the run.
    """

    def __init__(self, dirpath: str, data: Any = None) -> None:
        self.path = Path(dirpath) / "interrupted.ckpt"
        self.data = OmegaConf.to_container(data, resolve=True) if OmegaConf.is_config(data) else data
        self.metrics: dict[str, float] = {}
        self._group: Any = None  # the ranks on the CPU (gloo): agreeing never waits for a GPU

    def _distributed(self, trainer: L.Trainer) -> bool:
        return trainer.world_size > 1 and dist.is_available() and dist.is_initialized()

    def stop_here(self, trainer: L.Trainer, save: bool = False) -> None:
        catch_signals()  # again: Lightning put its own SIGTERM handler in place when it started
        stop = torch.tensor(int(bool(received)))
        if self._distributed(trainer):
            dist.all_reduce(stop, op=dist.ReduceOp.MAX, group=self._group)
        if not stop:
            return
        if save:
            trainer.save_checkpoint(self.path)
        if trainer.is_global_zero and "SIGUSR1" in received and os.environ.get("SLURM_JOB_ID"):
            job = os.environ.get("SLURM_ARRAY_JOB_ID", os.environ["SLURM_JOB_ID"])  # SLURM's time-limit warning
            job += f"_{os.environ['SLURM_ARRAY_TASK_ID']}" if "SLURM_ARRAY_TASK_ID" in os.environ else ""
            done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
            log.warning(f"scontrol requeue {job}: {done.stderr.strip() or 'the job will continue'}.")
        raise Stopped(self.path.parent.parent, f" at step {trainer.global_step}")

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._distributed(trainer) and self._group is None:
            self._group = dist.new_group(backend="gloo")
        self.stop_here(trainer)

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._group is not None:
            dist.destroy_process_group(self._group)
            self._group = None

    def on_sanity_check_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.stop_here(trainer)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.stop_here(trainer)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, torch.Tensor) and not torch.isfinite(loss).all():
            raise TrainingError(
                f"The training loss is {loss.item()} at step {trainer.global_step - 1}: training stopped; "
                "no checkpoint holds weights from this step. Common causes: a learning rate too high "
                "(model.optimizer.lr), non-finite values in the data, 16-mixed precision overflowing."
            )
        # After an epoch's last batch come its validation and checkpoints: stop after those.
        if batch_idx + 1 < trainer.num_training_batches:
            self.stop_here(trainer, save=True)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.stop_here(trainer, save=True)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A run resumed after its last validation does not repeat it: its metrics are the checkpoint's.
        for key, value in self.metrics.items():
            trainer.callback_metrics.setdefault(key, torch.tensor(value))

    def on_test_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self.stop_here(trainer)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        # In the middle of an epoch the metrics hold its sums so far, on each rank its own. Once the
        # epoch has ended (its end hooks are running) Lightning is about to reset them: none saved.
        epoch = trainer.fit_loop.epoch_progress.current
        metrics = {} if epoch.processed > epoch.completed else {
            name: m.metric_state for name, m in pl_module.named_modules() if isinstance(m, Metric)
        }
        by_rank: list[Any] = [metrics]
        if self._distributed(trainer):  # every rank saves; rank 0 writes the file
            by_rank = [None] * trainer.world_size
            dist.all_gather_object(by_rank, metrics, group=self._group)
        checkpoint["resumable"] = {
            "random": random_states(),
            "metric_states": by_rank,
            "metrics": {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1},
            "data": self.data,
        }

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        if not (saved := checkpoint.get("resumable")):
            return
        set_random_states(saved["random"])
        self.metrics = saved["metrics"]
        if len(saved["metric_states"]) == trainer.world_size:  # each rank its own partial sums
            for name, states in saved["metric_states"][trainer.global_rank].items():
                for state, value in states.items():
                    setattr(pl_module.get_submodule(name), state, value)


def random_states() -> dict[str, Any]:
    """Every random number generator's state, as plain data (it loads with weights_only)."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    states = {
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), position, has_gauss, gauss],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_random_states(states: dict[str, Any]) -> None:
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, *rest = states["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), *rest))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
