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
        metrics = MetricCollection(
            {
                "acc": MulticlassAccuracy(num_classes=num_classes),
                "f1": MulticlassF1Score(num_classes=num_classes, average="macro"),
            }
        )
        self.train_metrics = metrics.clone(prefix="train/")
        self.val_metrics = metrics.clone(prefix="val/")
        self.test_metrics = metrics.clone(prefix="test/")
        self.train_loss, self.val_loss, self.test_loss = MeanMetric(), MeanMetric(), MeanMetric()
        self.val_acc_best = MaxMetric()
        # Metric states go into checkpoints: a run resumed mid-epoch still averages the whole
        # epoch, and keeps its best validation accuracy.
        for metric in (self.train_metrics, self.train_loss, self.val_acc_best):
            metric.persistent(True)

    @property
    def backbone(self) -> nn.Module:
        """The net's feature extractor, which Lightning's BackboneFinetuning freezes and thaws."""
        return self.net.backbone

    @property
    def class_names(self) -> list[str]:
        return list(self.hparams.class_names or map(str, range(self.hparams.num_classes)))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def _step(self, batch: tuple[Tensor, Tensor], stage: str) -> Tensor:
        x, y = batch
        logits = self(x)
        loss = self.criterion(logits, y)
        metrics, mean_loss = getattr(self, f"{stage}_metrics"), getattr(self, f"{stage}_loss")
        metrics.update(logits, y)
        mean_loss.update(loss.detach(), weight=len(y))  # a mean over samples, however batched
        # Logging the Metric objects lets Lightning compute them (synced across devices) once per
        # epoch: no host-device synchronisation in the steps.
        self.log(f"{stage}/loss", mean_loss, on_step=False, on_epoch=True, prog_bar=stage != "test")
        self.log_dict(metrics, on_step=False, on_epoch=True, prog_bar=stage == "val")
        return loss

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._step(batch, "test")

    def predict_step(self, batch: Tensor | tuple[Tensor, ...], batch_idx: int) -> Tensor:
        x = batch[0] if isinstance(batch, list | tuple) else batch
        return torch.softmax(self(x), dim=-1)

    def on_train_epoch_start(self) -> None:
        # Lightning calls this only when an epoch starts, not when a run resumes in the middle of
        # one: the restored sums of a half-done epoch count, those of an ended epoch do not.
        self.train_metrics.reset()
        self.train_loss.reset()

    def on_train_start(self) -> None:
        # The sanity check ran validation on an untrained net; that is not a best score.
        self.val_acc_best.reset()

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        self.val_acc_best.update(self.val_metrics["acc"].compute())
        self.log("val/acc_best", self.val_acc_best.compute(), sync_dist=True)

    def configure_optimizers(self) -> Any:
        # Frozen parameters (a fine-tuned backbone) join the optimizer when they are thawed.
        trainable = [p for p in self.parameters() if p.requires_grad]
        optimizer = hydra.utils.instantiate(self.hparams.optimizer, params=trainable)
        if not self.hparams.scheduler:
            return optimizer
        scheduler = hydra.utils.instantiate(self.hparams.scheduler, optimizer=optimizer)
        schedule = {"scheduler": scheduler, "interval": "epoch"}
        return {"optimizer": optimizer, "lr_scheduler": schedule}
