"""Pictures to look at instead of logs to read: the test confusion matrix, the learning curves.

Both are saved into the run directory as PNG whatever the logger; the confusion matrix and the
per-class table also go to the loggers that take images (W&B, TensorBoard, MLflow).
"""

import csv
import logging
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torchmetrics.classification import MulticlassConfusionMatrix

log = logging.getLogger(__name__)


def figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure  # no pyplot: no display, no global state

    return Figure(figsize=(width, height), layout="constrained")


def per_class(matrix: torch.Tensor, names: list[str]) -> list[dict[str, Any]]:
    """Precision, recall, F1 and support of each class, from a confusion matrix (rows: true class)."""
    rows = []
    for i, name in enumerate(names):
        tp, predicted, actual = matrix[i, i].item(), matrix[:, i].sum().item(), matrix[i].sum().item()
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        rows.append(
            {"class": name, "precision": precision, "recall": recall, "f1": f1, "support": int(actual)}
        )
    return rows


class TestReport(L.Callback):
    """After testing: confusion_matrix.png and test_per_class.csv in `dirpath`, and to the loggers.

    Reads the logits that `test_step` returns.
    """

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)
        self.confusion: MulticlassConfusionMatrix | None = None

    def on_test_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.confusion = MulticlassConfusionMatrix(pl_module.hparams.num_classes).to(pl_module.device)

    def on_test_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, *args: Any
    ) -> None:
        if isinstance(outputs, torch.Tensor) and self.confusion is not None:
            self.confusion.update(outputs, batch[1])

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.confusion is None or not self.confusion.update_called:
            return
        matrix = self.confusion.compute().cpu()  # summed over all devices
        if not trainer.is_global_zero:
            return
        names = list(getattr(pl_module, "class_names", map(str, range(len(matrix)))))
        rows = per_class(matrix, names)
        self.dirpath.mkdir(parents=True, exist_ok=True)
        with (self.dirpath / "test_per_class.csv").open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        fig = figure(1.2 + 0.45 * len(names), 1.0 + 0.45 * len(names))
        ax = fig.add_subplot()
        ax.imshow(matrix, cmap="Blues")
        dark = matrix.max().item() / 2
        for i in range(len(names)):
            for j in range(len(names)):
                if count := int(matrix[i, j]):
                    ax.text(j, i, count, ha="center", va="center", color="white" if count > dark else "black")
        ax.set(xlabel="predicted", ylabel="true", title="test confusion matrix")
        ax.set_xticks(range(len(names)), names)
        ax.set_yticks(range(len(names)), names)
        png = self.dirpath / "confusion_matrix.png"
        fig.savefig(png, dpi=100)
        self._to_loggers(trainer, png, rows, fig)

    @staticmethod
    def _to_loggers(trainer: L.Trainer, png: Path, rows: list[dict[str, Any]], fig: Any) -> None:
        for logger in trainer.loggers:
            kind = type(logger).__name__
            if kind == "WandbLogger":
                logger.log_image(key="test/confusion_matrix", images=[str(png)])
                logger.log_table(
                    key="test/per_class", columns=list(rows[0]), data=[list(r.values()) for r in rows]
                )
            elif kind == "TensorBoardLogger":
                logger.experiment.add_figure("test/confusion_matrix", fig)
            elif kind == "MLFlowLogger":
                logger.experiment.log_artifact(logger.run_id, str(png))


class LearningCurves(L.Callback):
    """After fitting: learning_curves.png in `dirpath`, the epoch values of every train/ and val/ metric.

    The history is kept in checkpoints, so a resumed run draws its whole history.
    """

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)
        self.history: list[dict[str, float]] = []

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        values = {
            key: float(value)
            for key, value in trainer.callback_metrics.items()
            if key.startswith(("train/", "val/")) and value.numel() == 1
        }
        self.history.append({"epoch": trainer.current_epoch, **values})

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = list(state_dict.get("history", []))

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not (trainer.is_global_zero and self.history):
            return
        keys = sorted({k for row in self.history for k in row} - {"epoch"})
        panels = {
            "loss": [k for k in keys if k.endswith("loss")],
            "metrics": [k for k in keys if not k.endswith("loss")],
        }
        fig = figure(10, 4)
        for ax, (title, names) in zip(fig.subplots(1, 2), panels.items(), strict=True):
            for name in names:
                points = [(row["epoch"], row[name]) for row in self.history if name in row]
                ax.plot(*zip(*points, strict=True), marker=".", label=name)
            ax.set(xlabel="epoch", title=title)
            ax.grid(alpha=0.3)
            if names:
                ax.legend(fontsize="small")
        self.dirpath.mkdir(parents=True, exist_ok=True)
        fig.savefig(self.dirpath / "learning_curves.png", dpi=100)
