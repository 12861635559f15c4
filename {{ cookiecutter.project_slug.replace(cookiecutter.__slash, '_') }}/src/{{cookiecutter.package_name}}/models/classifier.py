"""A LightningModule for classification: any net, cross-entropy, torchmetrics per stage."""

from collections.abc import Mapping, Sequence
from typing import Any

import hydra
import lightning as L
import torch
from torch import Tensor, nn
from torchmetrics import MaxMetric, MeanMetric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from {{ cookiecutter.package_name }}.utils.pretrained import load_matching_weights


class Classifier(L.LightningModule):
    """Trains `net` to map inputs to `num_classes` logits.

    `net`, `optimizer` and `scheduler` are configs (dicts with a `_target_`), built here with
    Hydra. Keeping them as plain data makes every checkpoint self-describing: it loads with
    `Classifier.load_from_checkpoint(path)` under torch's safe `weights_only` loading, with no
    pickled modules or partials inside.
    """

    # The predicted labels of this many batches are gathered on the device, then counted into the
    # metrics at once (and at each epoch's end, and before every checkpoint): torchmetrics' update
    # costs ~0.2 ms per call on a CPU and, on a GPU, reads the class counts back to the host.
    metric_batches = 32

    def __init__(
        self,
        net: Mapping[str, Any],
        optimizer: Mapping[str, Any],
        scheduler: Mapping[str, Any] | None = None,
        num_classes: int = 10,
        class_names: Sequence[str] | None = None,
        pretrained: str | None = None,
    ) -> None:
        super().__init__()
        # `pretrained` only seeds a new model; a checkpoint of this one must not reload it.
        self.save_hyperparameters(logger=False, ignore=["pretrained"])
        self.net: nn.Module = hydra.utils.instantiate(net)
        if pretrained:
            load_matching_weights(self.net, pretrained)
        self.criterion = nn.CrossEntropyLoss()
        # No input checks in the steps (they synchronise with the device): the inputs are the
        # model's own logits and the data's labels, and StopOnNonFiniteLoss watches for NaN.
        metrics = MetricCollection(
            {
                "acc": MulticlassAccuracy(num_classes=num_classes, validate_args=False),
                "f1": MulticlassF1Score(num_classes=num_classes, average="macro", validate_args=False),
            }
        )
        self.train_metrics = metrics.clone(prefix="train/")
        self.val_metrics = metrics.clone(prefix="val/")
        self.test_metrics = metrics.clone(prefix="test/")
        self.train_loss, self.val_loss, self.test_loss = (
            MeanMetric(nan_strategy="disable") for _ in range(3)
        )
        self.val_acc_best = MaxMetric()
        # Metric states go into checkpoints: a run resumed mid-epoch still averages the whole
        # epoch, and keeps its best validation accuracy.
        for metric in (self.train_metrics, self.train_loss, self.val_acc_best):
            metric.persistent(True)
        self._predicted: dict[str, list[tuple[Tensor, Tensor]]] = {"train": [], "val": [], "test": []}

    @property
    def backbone(self) -> nn.Module:
        """The net's feature extractor, which Lightning's BackboneFinetuning freezes and thaws."""
        return self.net.backbone

    @property
    def class_names(self) -> list[str]:
        return list(self.hparams.class_names or map(str, range(self.hparams.num_classes)))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def _step(self, batch: tuple[Tensor, Tensor], stage: str) -> tuple[Tensor, Tensor]:
        x, y = batch
        logits = self(x)
        loss = self.criterion(logits, y)
        # Only tensor updates in the steps: no logging, no host-device synchronisation. The
        # metrics are computed (and synced across devices) and logged once per epoch.
        predicted = self._predicted[stage]
        predicted.append((logits.detach().argmax(-1), y))
        if len(predicted) == self.metric_batches:
            self._update_metrics(stage)
        # A mean over samples, however batched. (No `weight=`: torchmetrics 1.9 ignores it when
        # nan_strategy is "disable".) Counted every step, not gathered like the predictions: a
        # float sum depends on its grouping, and a checkpoint would split a group where it falls,
        # so a resumed run would no longer end exactly like an uninterrupted one.
        getattr(self, f"{stage}_loss").update(loss.detach().expand(len(y)))
        return loss, logits

    def _update_metrics(self, stage: str) -> None:
        """Count the gathered predictions into the stage's metrics (integer counts: exact)."""
        if predicted := self._predicted[stage]:
            labels, targets = (torch.cat(parts) for parts in zip(*predicted, strict=True))
            getattr(self, f"{stage}_metrics").update(labels, targets)
            predicted.clear()

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # A checkpoint written in the middle of an epoch holds every batch of it so far.
        self._update_metrics("train")
        return super().state_dict(*args, **kwargs)

    def _log_epoch(self, stage: str) -> dict[str, Tensor]:
        self._update_metrics(stage)
        metrics, mean_loss = getattr(self, f"{stage}_metrics"), getattr(self, f"{stage}_loss")
        values = {**metrics.compute(), f"{stage}/loss": mean_loss.compute()}
        metrics.reset()
        mean_loss.reset()
        self.log_dict(values, prog_bar=stage != "test", sync_dist=True)
        return values

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "train")[0]

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "test")[1]  # the logits, for the confusion matrix (callbacks/reports.py)

    def predict_step(self, batch: Tensor | tuple[Tensor, ...], batch_idx: int) -> Tensor:
        x = batch[0] if isinstance(batch, list | tuple) else batch
        return torch.softmax(self(x), dim=-1)

    def on_train_start(self) -> None:
        # The sanity check ran validation on an untrained net; that is not a best score.
        self.val_acc_best.reset()

    def on_train_epoch_end(self) -> None:
        # Before the checkpoints of the epoch end are written: they hold no stale sums. A
        # checkpoint written in the middle of an epoch holds that epoch's sums so far.
        self._log_epoch("train")

    def on_validation_epoch_end(self) -> None:
        values = self._log_epoch("val")
        if self.trainer.sanity_checking:
            return
        self.val_acc_best.update(values["val/acc"])
        self.log("val/acc_best", self.val_acc_best.compute(), sync_dist=True)

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test")

    def configure_optimizers(self) -> Any:
        # Frozen parameters (a fine-tuned backbone) join the optimizer when they are thawed.
        trainable = [p for p in self.parameters() if p.requires_grad]
        optimizer = hydra.utils.instantiate(self.hparams.optimizer, params=trainable)
        if not self.hparams.scheduler:
            return optimizer
        scheduler = hydra.utils.instantiate(self.hparams.scheduler, optimizer=optimizer)
        schedule = {"scheduler": scheduler, "interval": "epoch"}
        return {"optimizer": optimizer, "lr_scheduler": schedule}
