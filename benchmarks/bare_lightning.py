"""The bare-Lightning yardstick: `python bare_lightning.py PROJECT TIMES.json [overrides]`.

Trains a baked project's own Classifier on its own DataModule, both built from its default
config (with `overrides`), by a bare `lightning.Trainer`: no logger, checkpoints, progress bar,
model summary or callbacks, only the EpochTimer below, which the benchmark also adds to the
project's `python train.py` so that both are timed alike.
"""

import json
import sys
import time
from pathlib import Path

import hydra
import lightning as L


class EpochTimer(L.Callback):
    """Writes to `path` the wall and CPU seconds of each training epoch (from its start to the next
    one's, so validation, checkpoints and logging at its end count) and its training samples."""

    def __init__(self, path: str) -> None:
        self.path, self.starts = Path(path), []

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.starts.append((time.perf_counter(), time.process_time()))

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        ends = [*self.starts[1:], (time.perf_counter(), time.process_time())]
        wall, cpu = (
            [end[i] - start[i] for start, end in zip(self.starts, ends, strict=True)] for i in (0, 1)
        )
        samples = len(trainer.train_dataloader.dataset)
        self.path.write_text(json.dumps({"seconds": wall, "cpu_seconds": cpu, "samples": samples}))


def main(project: Path, times: str, overrides: list[str]) -> None:
    sys.path.insert(0, str(project / "src"))
    package = next((project / "src").glob("*/configs/train.yaml")).parents[1].name
    with hydra.initialize_config_module(f"{package}.configs", version_base="1.3"):
        cfg = hydra.compose("train", [f"paths.data_dir={project / 'data'}", *overrides])
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.prepare_data()
    model = hydra.utils.instantiate(
        cfg.model,
        num_classes=datamodule.num_classes,
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
        callbacks=[EpochTimer(times)],
    )
    trainer.fit(model, datamodule=datamodule)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), sys.argv[2], sys.argv[3:])
