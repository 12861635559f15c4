"""Each net fits the data's shapes, each model and experiment runs one batch end to end, and the
metrics count every batch."""

import itertools
from pathlib import Path

import hydra
import pytest
import torch
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


def test_metrics_gathered_over_batches_equal_metrics_updated_every_batch(tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path)
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    batches = itertools.cycle(datamodule.train_dataloader())
    model = hydra.utils.instantiate(cfg.model).eval()  # no dropout: the same logits twice
    reference = model.train_metrics.clone()
    for index in range(2 * model.metric_batches + 5):
        x, y = next(batches)
        model.training_step((x, y), index)
        reference.update(model(x), y)
    # A checkpoint taken now (mid-epoch) holds all of them, though 5 were not counted yet.
    states, expected_states = model.state_dict(), reference.state_dict(prefix="train_metrics.")
    assert expected_states  # the counts are saved with the model
    for name, value in expected_states.items():
        assert torch.equal(states[name], value), name
    computed, expected = model.train_metrics.compute(), reference.compute()
    assert computed.keys() == expected.keys() == {"train/acc", "train/f1"}
    for name in expected:
        assert torch.equal(computed[name], expected[name]), name
