"""A LightningModule for classification: any net, cross-entropy, accuracy and F1 per stage."""

from collections.abc import Mapping, Sequence
from typing import Any

import lightning as L
import torch
from hydra.utils import instantiate
from torch import Tensor, nn
from torchmetrics import MaxMetric, MeanMetric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score


class Classifier(L.LightningModule):
    """Trains `net` to map inputs of `input_shape` to `num_classes` logits. `net`, `optimizer`, `scheduler`:
    Hydra configs, built here; a checkpoint describes itself (`load_from_checkpoint(path)` needs no more)."""

    def __init__(
        self,
        net: Mapping[str, Any],
        optimizer: Mapping[str, Any],
        scheduler: Mapping[str, Any] | None = None,
        num_classes: int = 2,
        input_shape: Sequence[int] = (1,),
        class_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)  # train.py logs the whole config
        self.class_names = list(class_names or map(str, range(num_classes)))
        self.net = instantiate(net, input_shape=input_shape, num_classes=num_classes, _convert_="all")
        self.criterion = nn.CrossEntropyLoss()
        acc, f1 = MulticlassAccuracy(num_classes, average="micro"), MulticlassF1Score(num_classes)
        metrics = MetricCollection({"acc": acc, "f1": f1}, compute_groups=False)  # each its own counts
        self.train_metrics = metrics.clone(prefix="train/")
        self.val_metrics = metrics.clone(prefix="val/")
        self.test_metrics = metrics.clone(prefix="test/")
        self.train_loss, self.val_loss, self.test_loss = MeanMetric(), MeanMetric(), MeanMetric()
        self.val_acc_best = MaxMetric()
        self.val_acc_best.persistent(True)  # in checkpoints: a resumed run remembers its best

    @property
    def backbone(self) -> nn.Module:  # what Lightning's BackboneFinetuning freezes and thaws
        return self.net.backbone

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        logits = self(x)
        loss = self.criterion(logits, y)
        self.train_loss.update(loss, len(y))  # weighted by the batch size: a mean over samples
        self.train_metrics.update(logits, y)  # logged per epoch: no value of each batch is computed
        self.log("train/loss", self.train_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log_dict(self.train_metrics, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.val_loss.update(self.criterion(logits, y), len(y))
        self.val_metrics.update(logits, y)
        self.log("val/loss", self.val_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log_dict(self.val_metrics, on_step=False, on_epoch=True, prog_bar=True)

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:  # an untrained net's accuracy is no best
            self.val_acc_best(self.val_metrics["acc"].compute())
            self.log("val/acc_best", self.val_acc_best.compute(), prog_bar=True, sync_dist=True)

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        logits = self(x)
        self.test_loss.update(self.criterion(logits, y), len(y))
        self.test_metrics.update(logits, y)
        self.log("test/loss", self.test_loss, on_step=False, on_epoch=True)
        self.log_dict(self.test_metrics, on_step=False, on_epoch=True)
        return logits  # for the confusion matrix (callbacks/reports.py)

    def predict_step(self, batch: Tensor, batch_idx: int) -> Tensor:
        return torch.softmax(self(batch), dim=-1)

    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad]  # frozen ones join when thawed
        optimizer = instantiate(self.hparams.optimizer, params=params)
        if not self.hparams.scheduler:
            return optimizer
        scheduler = instantiate(self.hparams.scheduler, optimizer=optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "monitor": "val/loss"}}
