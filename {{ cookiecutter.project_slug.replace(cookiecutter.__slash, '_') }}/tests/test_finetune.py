"""Fine-tuning: matching layers load from a checkpoint, the backbone thaws on schedule."""

from pathlib import Path

import hydra
import lightning as L
import pytest
from conftest import compose_config
from test_eval import best_checkpoint

from {{ cookiecutter.package_name }}.train import train
from {{ cookiecutter.package_name }}.utils.pretrained import load_matching_weights


class BackboneWatch(L.Callback):
    """Records, at the start of each training epoch, whether the backbone is trainable."""

    trainable: list[bool] = []

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        BackboneWatch.trainable.append(all(p.requires_grad for p in pl_module.backbone.parameters()))


@pytest.mark.slow
def test_backbone_is_frozen_then_thawed_and_beats_training_from_scratch(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    run_dir, scratch = trained_run  # 4 epochs from scratch
    BackboneWatch.trainable = []
    overrides = [
        "experiment=finetune",
        f"model.pretrained={best_checkpoint(run_dir)}",
        "trainer.max_epochs=3",
        "callbacks.backbone_finetuning.unfreeze_backbone_at_epoch=2",
        "+callbacks.watch._target_=test_finetune.BackboneWatch",
        "callbacks.progress_bar=null",
    ]
    metrics = train(compose_config("train", tmp_path, overrides))
    assert BackboneWatch.trainable == [False, False, True]
    # Three epochs from the checkpoint reach what four from scratch reached.
    assert metrics["test/acc"] >= scratch["test/acc"] - 0.01


def test_report_names_loaded_skipped_and_new_layers(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    cfg = compose_config("train", tmp_path, ["model.num_classes=3"])  # another head
    net = hydra.utils.instantiate(cfg.model.net)
    report = load_matching_weights(net, str(best_checkpoint(trained_run[0])))
    assert report["loaded"] and all(key.startswith("backbone.") for key in report["loaded"])
    # The old head (10 classes) does not fit the new one (3): skipped, and the new one starts fresh.
    assert report["skipped"] and sorted(report["skipped"]) == sorted(report["new"])
    assert all(key.startswith("head.") for key in report["new"])


def test_missing_pretrained_checkpoint_is_named(tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path, ["model.pretrained=/no/such.ckpt"])
    with pytest.raises(
        hydra.errors.InstantiationException, match=r"model.pretrained='/no/such.ckpt': no such"
    ):
        hydra.utils.instantiate(cfg.model)
