"""A stand-in dataset to replace with yours: Gaussian blobs, one per class, made from a seed."""

import numpy as np
import torch
from torch import Tensor

from {{ cookiecutter.package_name }}.data.in_memory import InMemoryDataModule


class SyntheticDataModule(InMemoryDataModule):
    """`num_samples` points in `num_features` dimensions around `num_classes` random centres.

    Replace `load` with the reading of your data and `prepare` with its transform; splitting,
    batching and reading inputs for prediction (.npy, .csv) stay as they are.
    """

    def __init__(
        self,
        num_samples: int = 2000,
        num_features: int = 16,
        num_classes: int = 4,
        noise: float = 1.0,
        data_seed: int = 0,
        **split_and_loader_args: int | float | bool,
    ) -> None:
        super().__init__(**split_and_loader_args)
        self.num_samples = num_samples
        self.num_features = num_features
        self.num_classes = num_classes
        self.noise = noise
        self.data_seed = data_seed

    def load(self) -> tuple[Tensor, Tensor]:
        generator = torch.Generator().manual_seed(self.data_seed)
        centres = 3.0 * torch.randn(self.num_classes, self.num_features, generator=generator)
        labels = torch.arange(self.num_samples) % self.num_classes
        noise = self.noise * torch.randn(self.num_samples, self.num_features, generator=generator)
        return centres[labels] + noise, labels

    def prepare(self, raw: np.ndarray) -> Tensor:
        if raw.ndim != 2 or raw.shape[1] != self.num_features:
            raise ValueError(
                f"inputs of shape {tuple(raw.shape)} do not fit: expected (N, {self.num_features}) features."
            )
        return torch.tensor(raw, dtype=torch.float32)
