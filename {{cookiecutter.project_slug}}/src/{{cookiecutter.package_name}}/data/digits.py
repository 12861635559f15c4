"""scikit-learn's handwritten digits: 1,797 8x8 images, shipped with the package, no download."""

import torch
from sklearn.datasets import load_digits
from torch import Tensor

from {{ cookiecutter.package_name }}.data.in_memory import InMemoryDataModule


class DigitsDataModule(InMemoryDataModule):
    """The digits as (1, 8, 8) images scaled to [0, 1], labels 0-9."""

    num_classes = 10

    def load(self) -> tuple[Tensor, Tensor]:
        digits = load_digits()
        images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
        return images, torch.tensor(digits.target, dtype=torch.long)
