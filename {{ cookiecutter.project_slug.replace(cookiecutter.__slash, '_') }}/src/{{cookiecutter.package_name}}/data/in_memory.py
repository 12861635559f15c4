"""The shared part of datasets that fit in memory: a stratified train/val/test split and loaders."""

from pathlib import Path

import lightning as L
import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold, train_test_split
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from {{ cookiecutter.package_name }}.data.batches import BatchIndexSampler, BatchLoader, TensorBatches


class InMemoryDataModule(L.LightningDataModule):
    """Holds (inputs, labels) tensors and splits them; subclasses implement `load` and `prepare`.

    The split depends only on `val_fraction`, `test_fraction` and `split_seed`, never on the
    training seed, so every run and every evaluation sees the same test set. With `fold` set,
    the data outside the test set is split into `num_folds` stratified folds instead
    (`val_fraction` is then unused): fold `fold` validates, the others train.
    `batch_size` is per device; `pin_memory` None pins batches in page-locked memory when they
    go to a CUDA device, and not otherwise. Batches come whole from the tensors
    (data/batches.py), in an order made from `shuffle_seed` and the epoch, which a checkpoint
    restores mid-epoch.
    """

    def __init__(
        self,
        batch_size: int = 64,
        val_fraction: float = 0.15,
        test_fraction: float = 0.15,
        split_seed: int = 0,
        shuffle_seed: int | None = None,
        num_folds: int = 5,
        fold: int | None = None,
        num_workers: int = 0,
        pin_memory: bool | None = None,
    ) -> None:
        super().__init__()
        for name, fraction in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
            if not 0.0 < fraction < 1.0:
                raise ValueError(f"data.{name}={fraction!r}: must be between 0 and 1 (exclusive).")
        if val_fraction + test_fraction >= 1.0:
            raise ValueError(
                f"data.val_fraction + data.test_fraction = {val_fraction + test_fraction!r}: "
                "must be below 1 to leave training data."
            )
        if num_folds < 2:
            raise ValueError(f"data.num_folds={num_folds!r}: must be at least 2.")
        if fold is not None and not 0 <= fold < num_folds:
            raise ValueError(
                f"data.fold={fold!r}: must be null or 0 to {num_folds - 1} (data.num_folds={num_folds})."
            )
        if batch_size < 1:
            raise ValueError(f"data.batch_size={batch_size!r}: must be a positive integer.")
        self.batch_size = batch_size
        self.val_fraction = val_fraction
        self.test_fraction = test_fraction
        self.split_seed = split_seed
        self.num_folds = num_folds
        self.fold = fold
        # No seed: a random one, which checkpoints keep, so a resumed run still continues its order.
        self.shuffle_seed = int(torch.randint(2**31, ())) if shuffle_seed is None else shuffle_seed
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.splits: dict[str, TensorBatches] = {}
        self.predict_set: TensorDataset | None = None

    # What `read_inputs` accepts, for error messages.
    input_kinds: tuple[str, ...] = (".npy", ".csv")

    def load(self) -> tuple[Tensor, Tensor]:
        """Return all inputs and their integer class labels."""
        raise NotImplementedError

    def prepare(self, raw: np.ndarray) -> Tensor:
        """Turn raw values, as stored on disk, into model inputs: one transform for train and predict.

        Raises ValueError naming the expected shape when `raw` does not fit.
        """
        raise NotImplementedError

    def read_inputs(self, path: str | Path) -> list[str]:
        """Load the inputs at `path` for `predict_dataloader`; return one name per input."""
        path = Path(path)
        if path.suffix == ".npy":
            raw = np.load(path)
        elif path.suffix == ".csv":
            raw = np.loadtxt(path, delimiter=",", ndmin=2)
        else:
            raise ValueError(f"{path.name} is not an accepted input: expected {', '.join(self.input_kinds)}.")
        self.predict_set = TensorDataset(self.prepare(raw))
        return [f"{path.name}:{i}" for i in range(len(self.predict_set))]

    def setup(self, stage: str | None = None) -> None:
        if self.splits or stage == "predict":
            return
        inputs, labels = self.load()
        index = torch.arange(len(labels))
        rest, test = train_test_split(
            index, test_size=self.test_fraction, stratify=labels, random_state=self.split_seed
        )
        if self.fold is None:
            train, val = train_test_split(
                rest,
                test_size=self.val_fraction / (1.0 - self.test_fraction),
                stratify=labels[rest],
                random_state=self.split_seed,
            )
        else:  # k-fold cross-validation: fold k of the non-test data validates, the others train
            folds = StratifiedKFold(n_splits=self.num_folds, shuffle=True, random_state=self.split_seed)
            train_part, val_part = list(folds.split(rest, labels[rest]))[self.fold]
            train, val = rest[train_part], rest[val_part]
        self.splits = {
            name: TensorBatches(inputs[i], labels[i])
            for name, i in (("train", train), ("val", val), ("test", test))
        }

    def _loader(self, split: str, shuffle: bool = False) -> BatchLoader:
        # Under DDP each rank takes its share; Lightning's trainer knows the rank.
        trainer = self.trainer
        sampler = BatchIndexSampler(
            len(self.splits[split]),
            self.batch_size,
            # Overfitting a few batches wants the same ones every epoch.
            shuffle=shuffle and not (trainer and trainer.overfit_batches),
            seed=self.shuffle_seed,
            num_replicas=trainer.world_size if trainer else 1,
            rank=trainer.global_rank if trainer else 0,
        )
        return BatchLoader(
            self.splits[split],
            sampler,
            num_workers=self.num_workers,
            pin_memory=self.pins_memory(trainer.strategy.root_device if trainer else None),
            persistent_workers=self.num_workers > 0,
        )

    def pins_memory(self, device: torch.device | None) -> bool:
        """Whether batches for `device` are pinned: `pin_memory`, or if None, for a CUDA device."""
        if self.pin_memory is not None:
            return self.pin_memory
        return device is not None and device.type == "cuda"

    def train_dataloader(self) -> BatchLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> BatchLoader:
        return self._loader("val")

    def test_dataloader(self) -> BatchLoader:
        return self._loader("test")

    def predict_dataloader(self) -> DataLoader:
        if self.predict_set is None:
            raise RuntimeError("call read_inputs(path) before predicting")
        return DataLoader(self.predict_set, batch_size=self.batch_size)
