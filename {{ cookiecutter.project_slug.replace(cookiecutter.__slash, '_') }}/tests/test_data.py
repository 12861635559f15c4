"""The in-memory data path: whole batches in a restorable order, pinned memory per accelerator."""

from pathlib import Path
from types import SimpleNamespace

import hydra
import lightning as L
import pytest
import torch
from conftest import compose_config

from {{ cookiecutter.package_name }}.data.in_memory import InMemoryDataModule


def datamodule(tmp_path: Path, overrides: list[str], device: str = "cpu") -> InMemoryDataModule:
    """The configured data module, set up for fitting, as a trainer on `device` would see it."""
    module = hydra.utils.instantiate(compose_config("train", tmp_path, overrides).data)
    module.setup("fit")
    strategy = SimpleNamespace(root_device=torch.device(device))
    module.trainer = SimpleNamespace(overfit_batches=0, world_size=1, global_rank=0, strategy=strategy)
    return module


def test_each_epoch_serves_every_sample_once_in_a_new_order(tmp_path: Path) -> None:
    loader = datamodule(tmp_path, []).train_dataloader()
    inputs, labels = loader.loader.dataset.tensors
    orders = []
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        indices = list(loader.sampler)
        for index, (x, y) in zip(indices, loader, strict=True):
            assert torch.equal(x, inputs[index]) and torch.equal(y, labels[index])
        orders.append(torch.cat(indices))
    assert torch.equal(orders[0].sort().values, torch.arange(len(labels)))
    assert not torch.equal(orders[0], orders[1])


def test_loader_restored_mid_epoch_serves_the_batches_it_had_left(tmp_path: Path) -> None:
    loader = datamodule(tmp_path, []).train_dataloader()
    loader.sampler.set_epoch(3)
    served = iter(loader)
    for _ in range(5):
        next(served)
    state = loader.state_dict()
    rest = list(served)

    restored = datamodule(tmp_path, []).train_dataloader()
    restored.load_state_dict(state)
    again = list(restored)
    assert len(again) == len(rest) == len(loader) - 5
    for (x, y), (x2, y2) in zip(rest, again, strict=True):
        assert torch.equal(x, x2) and torch.equal(y, y2)


def test_loader_saved_at_an_epoch_end_restores_to_the_next_epoch(tmp_path: Path) -> None:
    loader = datamodule(tmp_path, []).train_dataloader()
    loader.sampler.set_epoch(0)
    list(loader)
    restored = datamodule(tmp_path, []).train_dataloader()
    restored.load_state_dict(loader.state_dict())
    assert restored.sampler.epoch == 1 and len(list(restored)) == len(loader)


@pytest.mark.parametrize(
    ("setting", "device", "pinned"),
    [("null", "cpu", False), ("null", "cuda", True), ("false", "cuda", False), ("true", "cpu", True)],
)
def test_pinned_memory_follows_the_accelerator_unless_set(
    setting: str, device: str, pinned: bool, tmp_path: Path
) -> None:
    module = datamodule(tmp_path, [f"data.pin_memory={setting}"], device)
    for loader in (module.train_dataloader(), module.val_dataloader()):
        assert loader.loader.pin_memory is pinned


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_batches_for_a_gpu_trainer_come_pinned(tmp_path: Path) -> None:
    module = hydra.utils.instantiate(compose_config("train", tmp_path, ["trainer=gpu"]).data)
    module.setup("fit")
    module.trainer = L.Trainer(accelerator="gpu", devices=1, logger=False)
    inputs, labels = next(iter(module.train_dataloader()))
    assert inputs.is_pinned() and labels.is_pinned()
