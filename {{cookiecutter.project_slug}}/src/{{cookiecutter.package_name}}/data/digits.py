"""scikit-learn's handwritten digits: 1,797 8x8 images, shipped with the package, no download."""

import lightning as L
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, TensorDataset


class DigitsDataModule(L.LightningDataModule):
    """Stratified train/val/test split of the digits, held in memory as tensors.

    Images are scaled to [0, 1] and shaped (1, 8, 8). The split depends only on
    `val_fraction`, `test_fraction` and `split_seed`, never on the training seed, so
    every run and every evaluation sees the same test set.
    """

    num_classes = 10

    def __init__(
        self,
        batch_size: int = 64,
        val_fraction: float = 0.15,
        test_fraction: float = 0.15,
        split_seed: int = 0,
        num_workers: int = 0,
        pin_memory: bool = False,
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
        if batch_size < 1:
            raise ValueError(f"data.batch_size={batch_size!r}: must be a positive integer.")
        self.save_hyperparameters(logger=False)
        self.splits: dict[str, TensorDataset] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        digits = load_digits()
        images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
        labels = torch.tensor(digits.target, dtype=torch.long)
        hp = self.hparams
        index = torch.arange(len(labels))
        rest, test = train_test_split(
            index, test_size=hp.test_fraction, stratify=labels, random_state=hp.split_seed
        )
        train, val = train_test_split(
            rest,
            test_size=hp.val_fraction / (1.0 - hp.test_fraction),
            stratify=labels[rest],
            random_state=hp.split_seed,
        )
        self.splits = {
            name: TensorDataset(images[i], labels[i])
            for name, i in (("train", train), ("val", val), ("test", test))
        }

    def _loader(self, split: str, shuffle: bool = False) -> DataLoader:
        return DataLoader(
            self.splits[split],
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            num_workers=self.hparams.num_workers,
            pin_memory=self.hparams.pin_memory,
            persistent_workers=self.hparams.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._loader("test")
