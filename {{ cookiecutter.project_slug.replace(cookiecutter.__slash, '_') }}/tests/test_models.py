"""Each net fits the data's shapes, and each model and experiment runs one batch end to end."""

from pathlib import Path

import hydra
import pytest
from conftest import compose_config
from test_configs import options

from {{ cookiecutter.package_name }}.train import train


@pytest.mark.parametrize("net", options("model/net"))
def test_net_maps_a_batch_to_logits(net: str, tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path, [f"model/net={net}"])
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup()
    inputs, _ = next(iter(datamodule.train_dataloader()))
    model = hydra.utils.instantiate(cfg.model)
    assert model(inputs).shape == (len(inputs), cfg.model.num_classes)


@pytest.mark.parametrize("net", options("model/net"))
def test_fast_dev_run_of_each_net(net: str, tmp_path: Path) -> None:
    metrics = train(compose_config("train", tmp_path, [f"model/net={net}", "debug=fdr"]))
    assert {"train/loss", "test/acc"} <= metrics.keys()


@pytest.mark.parametrize("experiment", options("experiment"))
def test_fast_dev_run_of_each_experiment(experiment: str, tmp_path: Path) -> None:
    metrics = train(compose_config("train", tmp_path, [f"experiment={experiment}", "debug=fdr"]))
    assert {"train/loss", "test/acc"} <= metrics.keys()


def test_overfitting_one_batch_drives_the_loss_to_zero(tmp_path: Path) -> None:
    metrics = train(compose_config("train", tmp_path, ["debug=overfit", "test=false"]))
    assert metrics["train/loss"] < 0.1
