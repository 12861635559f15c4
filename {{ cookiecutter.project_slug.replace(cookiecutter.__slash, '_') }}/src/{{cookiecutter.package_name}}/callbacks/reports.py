"""Pictures instead of logs to read: the test confusion matrix and the learning curves, as PNG in
the run directory whatever the logger (and to the loggers that take images)."""

import csv
from pathlib import Path
from typing import Any

import lightning as L
import torch
from matplotlib.figure import Figure  # no pyplot: no display, no global state
from torchmetrics.classification import MulticlassConfusionMatrix


class TestReport(L.Callback):
    """After testing: confusion_matrix.png and test_per_class.csv (precision, recall, F1, support)."""

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)
        self.matrix: MulticlassConfusionMatrix | None = None

    def on_test_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.matrix = MulticlassConfusionMatrix(pl_module.hparams.num_classes).to(pl_module.device)

    def on_test_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, logits: Any, batch: Any, *_: Any) -> None:
        self.matrix.update(logits, batch[1])  # test_step returns the logits

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        counts = self.matrix.compute().cpu()  # summed over all devices
        if not trainer.is_global_zero:
            return
        names = pl_module.class_names
        hits, predicted, actual = counts.diag(), counts.sum(0), counts.sum(1)
        precision, recall = hits / predicted.clamp(min=1), hits / actual.clamp(min=1)
        f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)
        with (self.dirpath / "test_per_class.csv").open("w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(["class", "precision", "recall", "f1", "support"])
            writer.writerows(zip(names, precision.tolist(), recall.tolist(), f1.tolist(), actual.tolist(), strict=True))
        fig, ax = self.matrix.plot(counts, labels=names)
        ax.set_title("test confusion matrix")
        fig.set_size_inches(1.5 + 0.5 * len(names), 1.2 + 0.5 * len(names))
        fig.savefig(png := self.dirpath / "confusion_matrix.png", dpi=100, bbox_inches="tight")
        for logger in trainer.loggers:
            if hasattr(logger, "log_image"):  # W&B
                logger.log_image(key="test/confusion_matrix", images=[str(png)])
            elif hasattr(logger.experiment, "add_figure"):  # TensorBoard
                logger.experiment.add_figure("test/confusion_matrix", fig)
            elif hasattr(logger.experiment, "log_artifact"):  # MLflow
                logger.experiment.log_artifact(logger.run_id, str(png))


class LearningCurves(L.Callback):
    """After fitting: learning_curves.png, every train/ and val/ metric by epoch. The history is in
    the checkpoints: a resumed run draws all of it."""

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)
        self.history: list[dict[str, float]] = []

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        row = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith(("train/", "val/"))}
        self.history.append({"epoch": trainer.current_epoch, **row})

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = state_dict["history"]

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not (trainer.is_global_zero and self.history):
            return
        fig = Figure(figsize=(10, 4), layout="constrained")
        names = sorted({k for row in self.history for k in row} - {"epoch"})
        for ax, title, keys in zip(
            fig.subplots(1, 2), ("loss", "metrics"), ([n for n in names if n.endswith("loss")],
                                                      [n for n in names if not n.endswith("loss")]), strict=True
        ):
            for name in keys:
                ax.plot(*zip(*[(r["epoch"], r[name]) for r in self.history if name in r], strict=True), ".-", label=name)
            ax.set(xlabel="epoch", title=title)
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small")
        fig.savefig(self.dirpath / "learning_curves.png", dpi=100)


__all__ = ["LearningCurves", "TestReport", "torch"]
