"""One line an epoch off a terminal; the test's confusion matrix and per-class table in the run directory."""

import csv
import logging
import sys
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ProgressBar, RichProgressBar
from torchmetrics.classification import MulticlassConfusionMatrix

log = logging.getLogger(__name__)


def progress_bar() -> ProgressBar:  # Lightning's rich bar in a terminal; else (CI, SLURM files) EpochLines
    return RichProgressBar() if sys.stdout.isatty() else EpochLines()


class EpochLines(ProgressBar):  # one log line per epoch, nothing redrawn (a ProgressBar: Lightning adds none)
    enable = disable = lambda self: None  # Lightning's calls, on ranks other than 0: they log nothing  # noqa: E731

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            shown = "  ".join(f"{k} {v:.4g}" for k, v in trainer.progress_bar_metrics.items() if "/" in k)
            log.info(f"epoch {trainer.current_epoch}/{trainer.max_epochs - 1}  {shown}")  # as Lightning's bar


class TestReport(L.Callback):  # after testing: confusion_matrix.png (to the loggers too), test_per_class.csv
    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)  # the matrix: at the test's start (the class count is the model's)

    def on_test_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.matrix = MulticlassConfusionMatrix(pl_module.hparams.num_classes).to(pl_module.device)

    def on_test_batch_end(self, trainer: L.Trainer, pl_module: Any, logits: Any, batch: Any, *_: Any) -> None:
        self.matrix.update(logits, batch[1])  # test_step returns the logits

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        counts = self.matrix.compute().cpu()  # summed over all devices
        if not trainer.is_global_zero:
            return
        names, hits, support = pl_module.class_names, counts.diag().double(), counts.sum(1)
        precision, recall = hits / counts.sum(0).clamp(min=1), hits / support.clamp(min=1)
        f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)
        with (self.dirpath / "test_per_class.csv").open("w", newline="") as file:
            rows = zip(names, precision.tolist(), recall.tolist(), f1.tolist(), support.tolist(), strict=True)
            csv.writer(file).writerows([("class", "precision", "recall", "f1", "support"), *rows])
        from matplotlib.figure import Figure  # not pyplot's: pyplot keeps every figure (a multirun's: 20+)

        fig, ax = self.matrix.plot(counts, labels=names, ax=Figure(layout="constrained").subplots())
        fig.set_size_inches(1.5 + 0.5 * len(names), 1.2 + 0.5 * len(names))
        fig.savefig(png := self.dirpath / "confusion_matrix.png", dpi=100, bbox_inches="tight")
        for logger in trainer.loggers:
            if hasattr(logger, "log_image"):  # W&B
                logger.log_image(key="test/confusion_matrix", images=[str(png)])
{%- if cookiecutter.logger == 'tensorboard' %}
            elif hasattr(logger.experiment, "add_figure"):  # TensorBoard
                logger.experiment.add_figure("test/confusion_matrix", fig)
{%- elif cookiecutter.logger == 'mlflow' %}
            elif hasattr(logger.experiment, "log_artifact"):  # MLflow
                logger.experiment.log_artifact(logger.run_id, str(png))
{%- endif %}
