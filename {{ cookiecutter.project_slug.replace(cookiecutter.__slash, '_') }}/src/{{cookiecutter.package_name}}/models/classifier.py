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

    def model_step(self, batch: tuple[Tensor, Tensor], mean: MeanMetric, metrics: MetricCollection) -> Any:
        """A batch's loss and logits; its stage's loss and metrics (prefix train/, val/, test/) updated."""
        x, y = batch
        logits = self(x)
        loss = self.criterion(logits, y)
        mean.update(loss, len(y))  # weighted by the batch size: a mean over samples
        metrics.update(logits, y)  # logged per epoch: no value of each batch is computed
        bar = not self.trainer.testing  # the test's metrics: in metrics.json and the loggers
        self.log(f"{metrics.prefix}loss", mean, on_step=False, on_epoch=True, prog_bar=bar)
        self.log_dict(metrics, on_step=False, on_epoch=True, prog_bar=bar)
        return loss, logits

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self.model_step(batch, self.train_loss, self.train_metrics)[0]

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self.model_step(batch, self.val_loss, self.val_metrics)

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:  # an untrained net's accuracy is no best
            self.val_acc_best(self.val_metrics["acc"].compute())
            self.log("val/acc_best", self.val_acc_best.compute(), prog_bar=True, sync_dist=True)

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self.model_step(batch, self.test_loss, self.test_metrics)[1]  # for callbacks/reports.py

    def predict_step(self, batch: Tensor, batch_idx: int) -> Tensor:
        return torch.softmax(self(batch), dim=-1)

    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad]  # frozen ones join when thawed
        optimizer = instantiate(self.hparams.optimizer, params=params)
        if not self.hparams.scheduler:
            return optimizer
        scheduler = instantiate(self.hparams.scheduler, optimizer=optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "monitor": "val/loss"}}
