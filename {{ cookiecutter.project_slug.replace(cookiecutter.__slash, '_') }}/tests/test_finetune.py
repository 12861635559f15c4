"""Fine-tuning: matching layers load from a checkpoint, the backbone thaws on schedule."""

import re
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from conftest import best_checkpoint, compose_config
from test_train import learned

from {{ cookiecutter.package_name }}.train import train


class BackboneWatch(L.Callback):
    """Records, at the start of each training epoch, whether the backbone is trainable."""

    trainable: list[bool] = []

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        BackboneWatch.trainable.append(all(p.requires_grad for p in pl_module.backbone.parameters()))


class Flat(torch.nn.Module):
    """A net of a user's that names no `backbone`: fine-tuning has nothing to freeze."""

    def __init__(self, input_shape: list[int], num_classes: int, **options: object) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


@pytest.mark.slow
def test_backbone_is_frozen_then_thawed_and_keeps_what_training_from_scratch_reached(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    run_dir, scratch = trained_run  # 4 epochs from scratch
    BackboneWatch.trainable = []
    overrides = [
        "experiment=finetune",
        f"pretrained={best_checkpoint(run_dir)}",
        "trainer.max_epochs=3",
        "callbacks.backbone_finetuning.unfreeze_backbone_at_epoch=2",
        "+callbacks.watch._target_=test_finetune.BackboneWatch",
        "callbacks.progress_bar=null",
    ]
    metrics = train(compose_config("train", tmp_path, overrides))
    assert BackboneWatch.trainable == [False, False, True]
    assert not [w for w in recwarn if "to be frozen" in str(w.message)]  # train_bn: no noise
    # Three epochs from the checkpoint reach what four from scratch reached, where those learned (near
    # chance on data of yours that needs more epochs, both are noise: test_short_training_learns says so).
    if scratch["test/f1"] > learned(run_dir):
        assert metrics["test/acc"] >= scratch["test/acc"] - 0.01


def test_a_checkpoint_of_another_head_loads_its_backbone_and_says_so(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from conftest import write_image_folder, write_table

    trained = torch.load(best := best_checkpoint(trained_run[0]), weights_only=True)["hyper_parameters"]
    shape, classes = trained["input_shape"], len(trained["class_names"]) + 1  # one more: another head
    if len(shape) == 3:  # images (C, H, W), as the default data's: a folder of as many channels and pixels
        images = write_image_folder(tmp_path / "images", classes=classes)
        data = ["data=image_folder", f"data.root={images}", f"data.channels={shape[0]}"]
        data.append(f"data.image_size=[{shape[1]},{shape[2]}]")
    elif len(shape) == 1:  # rows of as many numbers
        table = write_table(tmp_path / "table.csv", features=shape[0], classes=classes)
        data = ["data=csv", f"data.path={table}", "data.target=species"]
    else:
        pytest.skip(f"inputs of shape {shape}: write data of that kind here, with {classes} classes")
    caplog.set_level("INFO")
    overrides = [*data, "debug=fdr", f"pretrained={best}"]
    train(compose_config("train", tmp_path / "run", overrides))
    loaded = re.search(r"(\d+) tensors loaded; new: (.*)\.$", caplog.text, re.MULTILINE)
    assert loaded and int(loaded[1]) > 0, caplog.text
    assert [name for name in loaded[2].split(", ") if not name.startswith("head.")] == [], caplog.text


@pytest.mark.parametrize("classes", ["one more", "as many, named otherwise", "the same"])
def test_a_new_output_layer_starts_at_zero_on_the_checkpoint_s_backbone(
    trained_run: tuple[Path, dict[str, float]], classes: str
) -> None:
    # Other classes: a random new output layer was confidently wrong on a trained backbone's features, and
    # the few steps before the backbone thaws did not turn it (a probe: test/acc 0.0 on three easy classes,
    # 0.57 with another seed; from zero, 1.0 with each of four seeds). As many classes named otherwise:
    # the checkpoint's output layer fits their shape, and named them wrong (a walk's: test/acc 0.07, exit 0).
    from hydra.utils import instantiate

    from {{ cookiecutter.package_name }}.train import load_matching_weights

    saved = torch.load(checkpoint := best_checkpoint(trained_run[0]), map_location="cpu", weights_only=True)
    hparams, names = saved["hyper_parameters"], list(saved["hyper_parameters"]["class_names"])
    names = {"one more": [*names, "new"], "the same": names}.get(classes, [f"kind {n}" for n in names])
    shape = {"input_shape": hparams["input_shape"], "num_classes": len(names)}
    net = instantiate(hparams["net"], **shape, _convert_="all")
    load_matching_weights(SimpleNamespace(net=net, class_names=names), str(checkpoint))
    backbone = net.backbone.state_dict().items()
    assert all(torch.equal(v, saved["state_dict"][f"net.backbone.{k}"]) for k, v in backbone)
    *_, output = [module for module in net.modules() if isinstance(module, torch.nn.Linear)]
    assert output.out_features == len(names)
    assert [bool(p.any()) for p in output.parameters()] == [classes == "the same"] * 2  # weight, bias: zero


def test_a_missing_or_foreign_pretrained_checkpoint_is_named(tmp_path: Path) -> None:
    from {{ cookiecutter.package_name }}.utils.runs import ConfigError

    with pytest.raises(ConfigError, match="pretrained='/no/such.ckpt': no such checkpoint file"):
        train(compose_config("train", tmp_path, ["pretrained=/no/such.ckpt", "debug=fdr"]))
    torch.save({"net.head.weight": torch.zeros(10, 64)}, weights := tmp_path / "weights.pt")  # no Lightning's
    with pytest.raises(ConfigError, match="weights.pt': not a checkpoint of this project"):
        train(compose_config("train", tmp_path, [f"pretrained={weights}", "debug=fdr"]))


def test_a_pretrained_checkpoint_of_which_no_layer_fits_is_refused(trained_run: tuple) -> None:
    from {{ cookiecutter.package_name }}.train import load_matching_weights
    from {{ cookiecutter.package_name }}.utils.runs import ConfigError

    net, checkpoint = torch.nn.Sequential(torch.nn.Linear(7, 2)), best_checkpoint(trained_run[0])
    with pytest.raises(ConfigError, match=f"pretrained='{checkpoint}': no layer of that checkpoint fits"):
        load_matching_weights(SimpleNamespace(net=net, class_names=["a", "b"]), str(checkpoint))


def test_a_net_without_a_backbone_is_named_before_fine_tuning(trained_run: tuple, tmp_path: Path) -> None:
    from {{ cookiecutter.package_name }}.utils.runs import ConfigError

    overrides = ["experiment=finetune", f"pretrained={best_checkpoint(trained_run[0])}", "debug=fdr"]
    with pytest.raises(ConfigError, match="Flat has no `backbone` for fine-tuning to freeze"):  # at start-up
        train(compose_config("train", tmp_path, [*overrides, "model.net._target_=test_finetune.Flat"]))
