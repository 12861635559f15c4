"""Stop on a signal and resume exactly: Lightning stops on SIGTERM alone and exits 0, hangs under DDP
when one rank alone is signalled, and saves no random state (tests/test_resume.py shows each).
Signals are noted as they arrive (utils/runs.py); all ranks agree to stop at the next safe point."""

import os
import random
import subprocess
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Checkpoint
from omegaconf import OmegaConf
from torchmetrics import Metric

from {{ cookiecutter.package_name }}.utils.runs import Stopped, TrainingError, catch_signals, log, received


class Resumable(Checkpoint):
    """Stops on signals and on a non-finite loss; adds to each checkpoint what an exact resume needs
    beyond Lightning's state: the random generators, each rank's metric sums, the metrics so far (for
    metrics.json), the data config (for eval.py, predict.py). A Checkpoint, so Lightning runs it
    after ModelCheckpoint: an epoch's checkpoints are written before it stops the run."""

    def __init__(self, dirpath: str, data: Any = None) -> None:
        self.path = Path(dirpath) / "interrupted.ckpt"
        self.data = OmegaConf.to_container(data, resolve=True) if OmegaConf.is_config(data) else data
        self.metrics: dict[str, float] = {}
        self.group: Any = None  # all ranks on the CPU (gloo): agreeing never waits for a GPU

    def stop_here(self, trainer: L.Trainer, *hook_args: Any, save: bool = False) -> None:
        catch_signals()  # again: Lightning put its own SIGTERM handler in place when it started
        stop = torch.tensor(int(bool(received)))
        if self.group is not None:
            dist.all_reduce(stop, op=dist.ReduceOp.MAX, group=self.group)
        if not stop:
            return
        if save:
            trainer.save_checkpoint(self.path, weights_only=False)
        if trainer.is_global_zero and "SIGUSR1" in received and "SLURM_JOB_ID" in os.environ:
            job = os.environ["SLURM_JOB_ID"]  # its own id: the array's would requeue every job of it
            done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
            log.warning(f"scontrol requeue {job}: {done.stderr.strip() or 'the job will continue'}.")
        raise Stopped(self.path.parent.parent, f" at step {trainer.global_step}")

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if trainer.world_size > 1 and self.group is None:
            self.group = dist.new_group(backend="gloo")
        self.stop_here(trainer)

    on_sanity_check_end = on_train_start = on_test_batch_end = stop_here  # where stopping loses no training

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, *args: Any) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor) and not torch.isfinite(loss).all():
            raise TrainingError(
                f"The training loss is {loss.item()} at step {trainer.global_step - 1}: stopped; no "
                "checkpoint holds weights of this step. Common causes: a learning rate too high "
                "(model.optimizer.lr), non-finite values in the data, 16-mixed precision overflowing."
            )
        if args[-1] + 1 < trainer.num_training_batches:  # after an epoch's last: its validation, checkpoints
            self.stop_here(trainer, save=True)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.stop_here(trainer, save=True)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for key, value in self.metrics.items():  # a run resumed after its last epoch keeps its metrics
            trainer.callback_metrics.setdefault(key, torch.tensor(value))

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        # In the middle of an epoch the metrics hold its sums so far, each rank its own. Once the
        # epoch has ended (its end hooks are running) Lightning is about to reset them: none saved.
        midway = (epoch := trainer.fit_loop.epoch_progress.current).processed == epoch.completed
        sums = {n: m.metric_state for n, m in pl_module.named_modules() if midway and isinstance(m, Metric)}
        by_rank: list[Any] = [sums] * trainer.world_size
        if self.group is not None:  # every rank saves; rank 0 writes the file
            dist.all_gather_object(by_rank, sums, group=self.group)
        self.metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
        kind, keys, *rest = np.random.get_state()  # as plain data: it loads with torch's weights_only
        rng = dict(python=random.getstate(), numpy=[kind, keys.tolist(), *rest], torch=torch.get_rng_state())
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        checkpoint["resumable"] = dict(random=rng, sums=by_rank, metrics=self.metrics, data=self.data)

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        for state in checkpoint.get("lr_schedulers", []):  # a longer run: the schedule's settings as set now
            state.update({k: v for k, v in (pl_module.hparams.get("scheduler") or {}).items() if k in state})
        if not (saved := checkpoint.get("resumable")):
            return
        version, state, gauss = saved["random"]["python"]
        random.setstate((version, tuple(state), gauss))
        kind, keys, *rest = saved["random"]["numpy"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), *rest))
        torch.set_rng_state(saved["random"]["torch"])
        if "cuda" in saved["random"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["random"]["cuda"])
        self.metrics = saved["metrics"]
        if len(sums := saved["sums"]) == trainer.world_size:  # each rank its own sums
            for name, states in sums[trainer.global_rank].items():
                for state, value in states.items():
                    setattr(pl_module.get_submodule(name), state, value)
        elif any(sums):  # mid-epoch on another number of devices: the ranks' places in it do not map
            log.warning(f"Saved mid-epoch on {len(sums)} devices: the epoch's rest repeats or skips samples.")
