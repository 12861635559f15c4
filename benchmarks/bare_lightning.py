"""The bare-Lightning yardstick: `python bare_lightning.py PROJECT TIMES.json TURNS TURN [overrides]`.

Trains a baked project's own Classifier on its own DataModule, both built from its default
config (with `overrides`), by a bare `lightning.Trainer`: no logger, checkpoints, progress bar,
model summary or callbacks, only the EpochTimer below. The benchmark adds the same timer to the
project's `python train.py` and runs both at once, training in turn a step each (TURNS a folder
the two share, TURN 0 or 1), so that both are timed alike and under the same load.
"""

import json
import sys
import time
from pathlib import Path
from typing import Any

import hydra
import lightning as L


class EpochTimer(L.Callback):
    """Writes to `path` the wall and CPU seconds of each training epoch (its steps, and the
    validation, checkpoints and logging at its end), the wall seconds of its steps alone (up to
    the end of its last step), and its training samples.

    Two processes sharing the folder `turns` (`turn` 0 and 1) train in turn, one step
    (or an epoch's last step and all that follows it) at a time, each timing its own turns: both
    meet the same load, where on a shared VM runs of one command, one after the other, differ by
    more than the few per cent compared (benchmarks/README.md)."""

    def __init__(self, path: str, turns: str, turn: int) -> None:
        self.path, self.seconds, self.cpu_seconds, self.since = Path(path), [], [], None
        self.step_seconds: list[float] = []
        self.turns, self.turn = Path(turns), turn

    def count(self) -> int:
        count = self.turns / "count"
        return int(count.read_text()) if count.exists() else 0

    def end_turn(self, done: bool = False) -> None:
        wall, cpu, epoch = self.since  # the epoch of the turn's step: its end costs count in it
        self.seconds[epoch] += time.perf_counter() - wall
        self.cpu_seconds[epoch] += time.process_time() - cpu
        if done:  # the other one no longer waits for its turns
            (self.turns / f"done-{self.turn}").touch()
        (self.turns / "count.new").write_text(str(self.count() + 1))
        (self.turns / "count.new").replace(self.turns / "count")

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.seconds.append(0.0)
        self.cpu_seconds.append(0.0)

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any) -> None:
        if self.since:
            self.end_turn()
        other_done = self.turns / f"done-{1 - self.turn}"
        while self.count() % 2 != self.turn and not other_done.exists():
            time.sleep(0.001)
        self.since = time.perf_counter(), time.process_time(), len(self.seconds) - 1

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if args[-1] == trainer.num_training_batches - 1:  # batch_idx: the epoch's last step
            wall, _, epoch = self.since
            self.step_seconds.append(self.seconds[epoch] + time.perf_counter() - wall)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.end_turn(done=True)
        samples = len(trainer.train_dataloader.dataset)
        times = {"seconds": self.seconds, "cpu_seconds": self.cpu_seconds, "samples": samples}
        times["step_seconds"] = self.step_seconds
        self.path.write_text(json.dumps(times))


def main(project: Path, times: str, turns: str, turn: int, overrides: list[str]) -> None:
    sys.path.insert(0, str(project / "src"))
    package = next((project / "src").glob("*/configs/train.yaml")).parents[1].name
    with hydra.initialize_config_module(f"{package}.configs", version_base="1.3"):
        cfg = hydra.compose("train", [f"paths.data_dir={project / 'data'}", *overrides])
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.prepare_data()
    model = hydra.utils.instantiate(
        cfg.model,
        num_classes=len(datamodule.class_names),
        input_shape=list(datamodule.input_shape),
        class_names=datamodule.class_names,
    )
    trainer = L.Trainer(
        max_epochs=cfg.trainer.max_epochs,
        accelerator=cfg.trainer.accelerator,
        devices=cfg.trainer.devices,
        precision=cfg.trainer.precision,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[EpochTimer(times, turns, turn)],
    )
    trainer.fit(model, datamodule=datamodule)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
