"""A stand-in to replace with your data: Gaussian blobs, one per class, written once as a CSV file."""

import csv
import os

import torch

from {{ cookiecutter.package_name }}.data.csv_table import CSVDataModule


class BlobsDataModule(CSVDataModule):
    """`num_samples` points in `num_features` dimensions around `num_classes` random centres,
    written to `path` once and then read like any table: the path yours takes (`data=csv`)."""

    def __init__(
        self,
        path: str,
        num_samples: int = 2000,
        num_features: int = 16,
        num_classes: int = 4,
        noise: float = 3.0,
        data_seed: int = 0,
        **options,
    ) -> None:
        super().__init__(path, target="label", **options)
        self.shape = (num_samples, num_features, num_classes)
        self.noise, self.data_seed = noise, data_seed

    def prepare_data(self) -> None:
        if self.path.is_file():
            return
        samples, features, classes = self.shape
        generator = torch.Generator().manual_seed(self.data_seed)
        centres = 3.0 * torch.randn(classes, features, generator=generator)
        labels = torch.arange(samples) % classes
        points = centres[labels] + self.noise * torch.randn(samples, features, generator=generator)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with partial.open("w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow([*(f"x{i}" for i in range(features)), "label"])
            writer.writerows(
                [*map(float, row), int(label)] for row, label in zip(points, labels, strict=True)
            )
        os.replace(partial, self.path)  # whole or not at all
