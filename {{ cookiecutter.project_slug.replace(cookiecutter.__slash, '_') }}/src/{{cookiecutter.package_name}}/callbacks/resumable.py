"""Stop on SIGTERM/SIGINT/SIGUSR1, resume exactly: Lightning exits 0, hangs DDP, drops RNG (test_resume)."""

import os
import subprocess
from functools import partialmethod
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from lightning.fabric.utilities.seed import _collect_rng_states, _set_rng_states
from lightning.pytorch.callbacks import Checkpoint
from omegaconf import OmegaConf
from torchmetrics import Metric

from {{ cookiecutter.package_name }}.utils import runs


class Resumable(Checkpoint):
    """Stops all ranks at a safe point after a signal or a non-finite loss; saves what Lightning's lack."""

    def __init__(self, dirpath: str, data: Any = None) -> None:
        self.path = Path(dirpath) / "interrupted.ckpt"
        self.data = OmegaConf.to_container(data, resolve=True) if OmegaConf.is_config(data) else data
        self.metrics, self.group, self.rescheduled, self.ended = {}, None, False, False  # on_load_checkpoint

    def stop_here(self, trainer: L.Trainer, *hook_args: Any, save: bool = False, late: bool = False) -> None:
        if not save:  # a stage's start, a test batch: Lightning put its own SIGTERM handler in place
            runs.catch_signals()
        stop = len(runs.received)
        if self.group is not None:  # all stop if one rank was signalled
            dist.all_reduce(stop := torch.tensor(stop), op=dist.ReduceOp.MAX, group=self.group)
        if not stop:
            return
        if save:
            trainer.save_checkpoint(self.path, weights_only=False)
        if trainer.is_global_zero and "SIGUSR1" in runs.received and "SLURM_JOB_ID" in os.environ:
            job = os.environ["SLURM_JOB_ID"]  # its own id: the array's would requeue every job of it
            done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
            runs.log.warning(f"scontrol requeue {job}: {done.stderr.strip() or 'the job will continue'}.")
        if late:  # an epoch's end: Lightning logs the epoch's training metrics after this hook, then stops
            trainer._signal_connector.received_sigterm = True  # on its own flag (SIGTERMException: train.py)
            return
        raise runs.Stopped(self.path.parent.parent, trainer.global_step)

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if trainer.world_size > 1 and self.group is None:
            self.group = dist.new_group(backend="gloo")  # on the CPU: agreeing never waits for a GPU
        for key, read in (("features", "features"), ("image_size", "size")):  # null: recorded as read
            if (self.data or {}).get(key, ()) is None and getattr(trainer.datamodule, read, None) is not None:
                self.data[key] = list(getattr(trainer.datamodule, read))  # csv: in order; predict.py: no data

    on_sanity_check_end = on_test_batch_end = stop_here  # where stopping loses no training
    on_train_epoch_end = partialmethod(stop_here, save=True, late=True)  # after the epoch's checkpoints

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for config in trainer.lr_scheduler_configs if self.rescheduled else []:  # the new schedule's rate now
            rates = getattr(config.scheduler, "_get_closed_form_lr", list)()  # torch's; lacking, goes on
            for group, rate in zip(config.scheduler.optimizer.param_groups, rates, strict=False):
                group["lr"] = rate
        for tuning in [c for c in trainer.callbacks if hasattr(c, "unfreeze_backbone_at_epoch")]:
            if trainer.current_epoch >= tuning.unfreeze_backbone_at_epoch:
                tuning.make_trainable(pl_module.backbone)  # resumed after its thaw: its setup froze it again
        trainer.should_stop = trainer.should_stop or self.ended  # here: after Lightning counts its last epoch
        self.stop_here(trainer)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # ReduceLROnPlateau on a val* metric steps here, before the epoch's checkpoints: Lightning's step,
        # after them, was in none, and skipped in an epoch resumed: a resume lowered the rate an epoch late.
        plateaus = {c.monitor[:3] for c in trainer.lr_scheduler_configs if c.reduce_on_plateau}
        epoch = trainer.fit_loop.epoch_loop  # its last validation (a resume's sanity check may look like it)
        if plateaus == {"val"} and not trainer.sanity_checking and epoch._num_ready_batches_reached():
            epoch.update_lr_schedulers("epoch", update_plateau_schedulers=True)
            trainer.fit_loop._restarting = True  # then Lightning's own step is skipped

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, *args: Any) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor) and not loss.isfinite():
            at = f"at step {trainer.global_step - 1}; no checkpoint holds its weights"
            why = "Common causes: model.optimizer.lr too high, non-finite data, 16-mixed overflow."
            raise runs.TrainingError(f"The training loss is {loss.item()} {at}. {why}")
        n, due = args[-1] + 1, trainer.fit_loop.epoch_loop._should_check_val_fx(None)  # a validation next
        if n < trainer.num_training_batches and not (n % trainer.accumulate_grad_batches or due):
            self.stop_here(trainer, save=True)  # between optimizer steps, not where a resume skips validation

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.path.unlink(missing_ok=True)  # a stop's, older than the end: eval.py given it tested old weights
        for key, value in self.metrics.items():  # a run resumed after its last epoch keeps its metrics
            trainer.callback_metrics.setdefault(key, torch.tensor(value))

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        # Mid-epoch, metrics hold the sums so far (each rank its own); at its end none: Lightning resets them.
        midway = (epoch := trainer.fit_loop.epoch_progress.current).processed == epoch.completed
        sums = {n: m.metric_state for n, m in pl_module.named_modules() if midway and isinstance(m, Metric)}
        by_rank: list[Any] = [sums] * trainer.world_size
        if self.group is not None:  # every rank saves; rank 0 writes the file
            dist.all_gather_object(by_rank, sums, group=self.group)
        self.metrics |= {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
        rng = _collect_rng_states(include_cuda=torch.cuda.is_initialized())  # torch's, numpy's, Python's
        rng["numpy"] = [x.tolist() if hasattr(x, "tolist") else x for x in rng["numpy"]]  # for weights_only
        checkpoint["resumable"] = dict(random=rng, sums=by_rank, metrics=self.metrics, data=self.data)
        checkpoint["resumable"]["stop"] = trainer.should_stop  # ended early: its resume (not ckpt_path=) too

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        if checkpoint["hyper_parameters"].get("scheduler") != pl_module.hparams.get("scheduler"):
            # A longer run: the schedule as set now, from the epoch reached (its rate: on_train_start).
            self.rescheduled, states = True, checkpoint["lr_schedulers"]
            checkpoint["lr_schedulers"] = [{"last_epoch": state["last_epoch"]} for state in states]
        if not (saved := checkpoint.get("resumable")):
            return
        _set_rng_states(saved["random"])
        self.metrics, own = saved["metrics"], Path(trainer.ckpt_path).parent == self.path.parent  # resume=
        self.ended = saved.get("stop", False) and own  # stopped early (ckpt_path= of another run trains on)
        for callback in trainer.checkpoint_callbacks if own else []:  # the run moved since: its files now
            if (state := checkpoint["callbacks"].get(callback.state_key)) and (old := state.get("dirpath")):
                models, new = state["best_k_models"], callback.dirpath
                state |= {k: v.replace(old, new) for k, v in state.items() if isinstance(v, str)}
                state["best_k_models"] = {path.replace(old, new): score for path, score in models.items()}
        if len(sums := saved["sums"]) == trainer.world_size:  # each rank its own sums
            for name, states in sums[trainer.global_rank].items():  # plain attributes: no buffers
                vars(pl_module.get_submodule(name)).update(states)
        elif any(sums):  # mid-epoch on another number of devices: the ranks' places in it do not map
            runs.log.warning(f"Saved mid-epoch on {len(sums)} devices: its rest repeats or skips samples.")
