"""A DataModule written from scratch, as the README's "write any LightningDataModule" allows: plain
torch and Lightning, nothing of the project's, and its classes and input shape known only once
`setup()` has read the data, a common Lightning pattern (tests/test_own_data.py runs it)."""

import csv
from collections.abc import Mapping
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset, random_split


class TableReadInSetup(L.LightningDataModule):
    def __init__(self, path: str, target: str, batch_size: int = 16) -> None:
        super().__init__()
        self.path, self.target, self.batch_size = Path(path), target, batch_size
        self.class_names: list[str] | None = None  # known after setup(), as the input shape
        self.input_shape: tuple[int, ...] | None = None

    def transform(self, row: Mapping[str, str]) -> torch.Tensor:  # one row to one input (predict.py too)
        return torch.tensor([float(value) for name, value in row.items() if name != self.target])

    def setup(self, stage: str | None = None) -> None:
        if self.class_names is not None:
            return
        with self.path.open(newline="") as file:
            rows = list(csv.DictReader(file))
        self.class_names = sorted({row[self.target] for row in rows})
        inputs = torch.stack([self.transform(row) for row in rows])
        self.input_shape = tuple(inputs.shape[1:])
        labels = torch.tensor([self.class_names.index(row[self.target]) for row in rows])
        split = torch.Generator().manual_seed(0)
        splits = random_split(TensorDataset(inputs, labels), [0.7, 0.15, 0.15], split)
        self.train, self.val, self.test = splits

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val, batch_size=self.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test, batch_size=self.batch_size)
