"""Test helpers the runs under test load as callbacks (`+callbacks.<name>._target_=signal_helpers...`)."""

import os
import signal
from typing import Any

import lightning as L


class SendSignalAt(L.Callback):
    """Send `signal` to this process after training step `step`, as `kill` from outside would;
    with `rank`, only in that rank's process."""

    def __init__(self, step: int, signal: str = "SIGTERM", rank: int | None = None) -> None:
        self.step = step
        self.signal = signal
        self.rank = rank

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step and self.rank in (None, trainer.global_rank):
            os.kill(os.getpid(), getattr(signal, self.signal))


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
        import time
        from pathlib import Path

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


def kill_during_save(name: str, nth: int) -> None:
    """SIGKILL this process halfway through writing the `nth` checkpoint whose file name contains `name`."""
    import io

    import torch

    real_save = torch.save
    seen = 0

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal seen
        if name in str(getattr(f, "name", f)):
            seen += 1
            if seen == nth:
                buffer = io.BytesIO()
                real_save(obj, buffer, *args, **kwargs)
                data = buffer.getvalue()
                f.write(data[: len(data) // 2])
                f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        real_save(obj, f, *args, **kwargs)

    torch.save = save


if __name__ == "__main__":
    # python -m signal_helpers <script> [overrides]: run the script, and kill it as
    # KILL_DURING_SAVE=<name>:<n> says.
    import runpy
    import sys

    name, nth = os.environ["KILL_DURING_SAVE"].rsplit(":", 1)
    kill_during_save(name, int(nth))
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
