"""Stop on SIGTERM, SIGINT or SIGUSR1 with a checkpoint of the current step, then exit 75.

Preemptible machines, `scancel`, `kill` and Ctrl+C all end a run this way: the step being
computed finishes, `checkpoints/interrupted.ckpt` is written (atomically), and the process exits
with EXIT_CODE so scripts can tell "stopped, continue later" from success (0) and errors (1).
`python train.py resume=<run dir>` (or `resume=latest`) continues exactly where it stopped.

Under SLURM, SIGUSR1 is the warning `#SBATCH --signal=SIGUSR1@120` sends before the time
limit: rank 0 also requeues the job, which returns to the same run directory (named after
the job id) and continues by itself. A second Ctrl+C stops at once, without a checkpoint.
"""

import logging
import os
import signal
import subprocess
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Checkpoint

from {{ cookiecutter.package_name }}.callbacks.run_state import finish_logger_runs

log = logging.getLogger(__name__)

# EX_TEMPFAIL of sysexits.h: a temporary failure; running again continues the work.
EXIT_CODE = 75
SIGNALS = ("SIGTERM", "SIGINT", "SIGUSR1")


class Preempted(SystemExit):
    """Training stopped on a signal after saving a checkpoint; the exit status is EXIT_CODE."""


class StopOnSignal(Checkpoint):
    """A Checkpoint callback, so Lightning runs it after ModelCheckpoint: at the end of an epoch
    that one has saved its checkpoint (and recorded the best) before this one stops the run."""

    def __init__(
        self, dirpath: str, filename: str = "interrupted", signals: tuple[str, ...] = SIGNALS
    ) -> None:
        self.path = Path(dirpath) / f"{filename}.ckpt"
        self.signals = [getattr(signal, name) for name in signals if hasattr(signal, name)]
        self.received: str | None = None
        self._previous: dict[int, Any] = {}
        # The ranks' own CPU (gloo) process group, to agree on stopping (see `_agree`).
        self._group: Any = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl+C: stop now
        self.received = signal.Signals(signum).name
        log.warning(f"Received {self.received}: stopping after this step, with a checkpoint.")

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        # Every rank runs this (a collective) once the strategy has connected them.
        if stage == "fit" and trainer.world_size > 1 and dist.is_available() and dist.is_initialized():
            self._group = dist.new_group(backend="gloo")

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._release()

    def _release(self) -> None:
        if self._group is not None:
            dist.destroy_process_group(self._group)
            self._group = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # After Lightning has set its own handlers (it would stop only at the end of the epoch).
        if threading.current_thread() is not threading.main_thread():
            return
        self.received = None
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._handle)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restore()

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self._restore()
        self._release()

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        batch_idx = args[-1]
        # After an epoch's last batch come its validation and its checkpoint: stop after those.
        if batch_idx + 1 < trainer.num_training_batches:
            self._stop_if_signalled(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._stop_if_signalled(trainer)

    def _stop_if_signalled(self, trainer: L.Trainer) -> None:
        if not self._agree(trainer, self.received is not None):
            return
        trainer.save_checkpoint(self.path)
        if trainer.is_global_zero:
            log.warning(
                f"Saved {self.path} at step {trainer.global_step} (epoch {trainer.current_epoch}); "
                f"exiting with status {EXIT_CODE}. Continue with: python train.py "
                f"resume={self.path.parent.parent}"
            )
            if self.received == "SIGUSR1" and os.environ.get("SLURM_JOB_ID"):
                requeue(os.environ["SLURM_JOB_ID"])
        # Flushed and closed now: the process that resumes reopens the same W&B run.
        finish_logger_runs(trainer, exit_code=EXIT_CODE)
        raise Preempted(EXIT_CODE)

    def _agree(self, trainer: L.Trainer, stop: bool) -> bool:
        """Whether any rank was signalled: every rank stops after the same step, even if a signal
        reached one only (alone, the others would wait for it in the next gradient all-reduce).

        The ranks exchange the flag on the host, over their gloo group: through the strategy's
        own group (NCCL on GPUs) the flag would be a GPU tensor, and reading it after every step
        would make the host wait for the GPU's queued work each time.
        """
        if trainer.world_size == 1:
            return stop
        if self._group is None:  # a launcher without torch.distributed (TPUs)
            return trainer.strategy.reduce_boolean_decision(stop, all=False)
        flag = torch.tensor(int(stop))
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._group)
        return bool(flag)


def requeue(job_id: str) -> None:
    """Put the SLURM job back in the queue; it restarts with the same id, so in the same run directory."""
    result = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True)
    if result.returncode == 0:
        log.warning(f"Requeued SLURM job {job_id}; it will continue from the checkpoint.")
    else:
        log.error(f"`scontrol requeue {job_id}` failed ({result.stderr.strip()}): resubmit the job by hand.")
