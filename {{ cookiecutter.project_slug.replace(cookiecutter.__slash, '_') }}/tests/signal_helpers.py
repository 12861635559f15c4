"""What the runs under test load to be stopped at a chosen moment, as a signal from outside would.

Lightning callbacks: `+callbacks.signal._target_=signal_helpers.SendSignal +callbacks.signal.hook=<hook>`;
a Hydra callback for the start-up, before any of the training code runs. A signal is sent once per
run directory (a marker file there), so the resumed run is not stopped again; `Fail` and `Stall` act
every time.
"""

import multiprocessing
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import lightning as L
from hydra.experimental.callback import Callback


def send_once(dirpath: str, name: str = "SIGTERM", children: bool = False) -> None:
    marker = Path(dirpath) / ".signal-sent"
    if not marker.exists():
        marker.write_text(name)
        if children and (pids := [str(child.pid) for child in multiprocessing.active_children()]):
            subprocess.run(["kill", f"-{name}", *pids], check=True)  # from outside: torch's workers tell
        os.kill(os.getpid(), getattr(signal, name))


class SendSignal(L.Callback):
    """Send `signal` when Lightning calls `hook` (at training step `step`, on rank `rank`, if given), to the
    process's children too with `children` (as `timeout`, a terminal's Ctrl+C or SLURM signal all)."""

    def __init__(
        self,
        dirpath: str,
        hook: str,
        step: int | None = None,
        rank: int | None = None,
        signal: str = "SIGTERM",
        children: bool = False,
    ) -> None:
        self.dirpath, self.hook, self.step, self.rank, self.signal = dirpath, hook, step, rank, signal
        self.children = children
        setattr(self, hook, self._fire)

    def _fire(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        if trainer.sanity_checking and self.hook != "on_sanity_check_start":
            return
        if self.step in (None, trainer.global_step) and self.rank in (None, trainer.global_rank):
            send_once(self.dirpath, self.signal, self.children)


class Stall(L.Callback):
    """Hang in the first training step (writing `.stalled` first), as a step stuck in I/O would."""

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)

    def on_train_batch_start(self, *args: Any) -> None:
        (self.dirpath / ".stalled").write_text("")
        time.sleep(600)


class Fail(L.Callback):
    """Raise a RuntimeError when Lightning calls `hook`: a run that fails there."""

    def __init__(self, hook: str) -> None:
        setattr(self, hook, self._fail)

    def _fail(self, *args: Any) -> None:
        raise RuntimeError("failed on purpose")
{%- if cookiecutter.slurm %}


class PauseForSignal(L.Callback):
    """After training step `step`, create `<marker>.<rank>` and wait until a signal of `signals`
    arrives from outside (a scheduler's), at most `timeout` seconds; then go on, so the run
    answers it at this step. Once only: a run that finds its marker (resumed) does not pause."""

    def __init__(
        self, step: int, marker: str, signals: tuple[str, ...] = ("SIGUSR1", "SIGTERM"), timeout: float = 120
    ) -> None:
        self.step = step
        self.marker = marker
        self.signals = [getattr(signal, name) for name in signals]
        self.timeout = timeout

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        import threading

        marker = Path(f"{self.marker}.{trainer.global_rank}")
        if trainer.global_step != self.step or marker.exists():
            return
        arrived = threading.Event()
        previous = {signum: signal.getsignal(signum) for signum in self.signals}

        def note(signum: int, frame: Any) -> None:
            arrived.set()
            if callable(previous[signum]):
                previous[signum](signum, frame)

        for signum in self.signals:
            signal.signal(signum, note)
        marker.touch()
        try:
            deadline = time.monotonic() + self.timeout
            while not arrived.is_set() and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
{%- endif %}


class SignalOnJobStart(Callback):
    """A Hydra callback: SIGTERM as the job starts, before the training code has run."""

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        send_once(config.hydra.runtime.output_dir)
