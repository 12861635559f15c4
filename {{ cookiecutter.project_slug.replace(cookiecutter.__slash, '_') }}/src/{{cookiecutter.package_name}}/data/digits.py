"""scikit-learn's handwritten digits: 1,797 8x8 images, shipped with the package, no download."""

from pathlib import Path

import numpy as np
import torch
from PIL import Image
from sklearn.datasets import load_digits
from torch import Tensor
from torch.utils.data import TensorDataset

from {{ cookiecutter.package_name }}.data.in_memory import InMemoryDataModule

# Pixel values in the digits data run from 0 (background) to 16 (ink).
MAX_VALUE = 16.0


class DigitsDataModule(InMemoryDataModule):
    """The digits as (1, 8, 8) images scaled to [0, 1], labels 0-9.

    For prediction it also reads PNG images (a file, or a folder of them): light digits on a
    dark background like the training data, any size (resized to 8x8).
    """

    num_classes = 10
    input_kinds = (".npy or .csv of 8x8 images (N x 64 values 0-16)", ".png", "a folder of .png images")

    def load(self) -> tuple[Tensor, Tensor]:
        digits = load_digits()
        return self.prepare(digits.images), torch.tensor(digits.target, dtype=torch.long)

    def prepare(self, raw: np.ndarray) -> Tensor:
        if raw.ndim == 2 and raw.shape[1] == 64:
            raw = raw.reshape(-1, 8, 8)
        if raw.ndim != 3 or raw.shape[1:] != (8, 8):
            raise ValueError(
                f"inputs of shape {tuple(raw.shape)} do not fit: expected 8x8 digit images, "
                f"shaped (N, 8, 8) or (N, 64), pixel values 0-{MAX_VALUE:g}."
            )
        return torch.tensor(raw, dtype=torch.float32).unsqueeze(1) / MAX_VALUE

    def read_inputs(self, path: str | Path) -> list[str]:
        path = Path(path)
        if not (path.is_dir() or path.suffix.lower() == ".png"):
            return super().read_inputs(path)
        files = sorted(path.glob("*.png")) if path.is_dir() else [path]
        if not files:
            raise ValueError(f"{path} holds no .png images.")
        self.predict_set = TensorDataset(self.prepare(np.stack([read_png(file) for file in files])))
        return [file.name for file in files]


def read_png(path: Path) -> np.ndarray:
    """A PNG as an 8x8 grayscale array in the digits' value range."""
    with Image.open(path) as image:
        gray = image.convert("L").resize((8, 8), Image.Resampling.BILINEAR)
    return np.asarray(gray, dtype=np.float32) * (MAX_VALUE / 255.0)
