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

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl+C: stop now
        self.received = signal.Signals(signum).name
        log.warning(f"Received {self.received}: stopping after this step, with a checkpoint.")

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
        stop = self.received is not None
        if trainer.world_size > 1:  # every rank stops at the same step, even if one was signalled
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if not stop:
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


def requeue(job_id: str) -> None:
    """Put the SLURM job back in the queue; it restarts with the same id, so in the same run directory."""
    result = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True)
    if result.returncode == 0:
        log.warning(f"Requeued SLURM job {job_id}; it will continue from the checkpoint.")
    else:
        log.error(f"`scontrol requeue {job_id}` failed ({result.stderr.strip()}): resubmit the job by hand.")
