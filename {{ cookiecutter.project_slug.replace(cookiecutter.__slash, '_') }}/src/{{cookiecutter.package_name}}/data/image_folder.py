"""Images in one sub-folder per class (`root/<class>/<image>`): PNG, JPEG, anything Pillow reads."""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import Dataset

from {{ cookiecutter.package_name }}.data.labelled import LabelledDataModule

SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


@dataclass
class ToTensor:
    """An image as a float tensor (channels, height, width) in [0, 1], resized to `size` (H, W)."""

    size: tuple[int, int]
    channels: int

    def __call__(self, image: Image.Image) -> Tensor:
        image = image.convert("L" if self.channels == 1 else "RGB")
        pixels = np.asarray(image.resize(self.size[::-1], Image.Resampling.BILINEAR), dtype=np.float32)
        tensor = torch.from_numpy(pixels / 255.0)
        return tensor.unsqueeze(0) if self.channels == 1 else tensor.permute(2, 0, 1)


class ImageFiles(Dataset):
    """(image, label) pairs, each file read and transformed when it is asked for."""

    def __init__(self, files: Sequence[Path], labels: Sequence[int], transform: ToTensor) -> None:
        self.files, self.labels, self.transform = files, labels, transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        with Image.open(self.files[index]) as image:
            return self.transform(image), self.labels[index]


class ImageFolderDataModule(LabelledDataModule):
    """The classes are the sub-folders of `root`, in alphabetical order.

    Every image is converted to `channels` (1: grayscale, 3: RGB) and resized to `image_size`
    ([height, width]; null: the size of the first image).
    """

    def __init__(
        self, root: str, image_size: Sequence[int] | None = None, channels: int = 3, **options: int | float
    ) -> None:
        super().__init__(**options)
        if channels not in (1, 3):
            raise ValueError(f"data.channels={channels}: accepted are 1 (grayscale) and 3 (RGB).")
        self.root = Path(root).expanduser()
        self.image_size, self.channels = image_size, channels

    @cached_property
    def class_names(self) -> list[str]:
        if not self.root.is_dir():
            raise ValueError(f"data.root={str(self.root)!r}: no such folder. Pass a folder of class sub-folders.")
        names = sorted(d.name for d in self.root.iterdir() if d.is_dir() and not d.name.startswith("."))
        if len(names) < 2:
            raise ValueError(f"data.root={str(self.root)!r} has {len(names)} class sub-folders: it needs 2 or more.")
        return names

    def images(self) -> list[tuple[Path, int]]:
        """Every image file and its class number, in a stable order."""
        found = [
            (path, label)
            for label, name in enumerate(self.class_names)
            for path in sorted((self.root / name).iterdir())
            if path.suffix.lower() in SUFFIXES
        ]
        if not found:
            raise ValueError(f"data.root={str(self.root)!r}: no images ({', '.join(sorted(SUFFIXES))}) in its sub-folders.")
        return found

    @cached_property
    def transform(self) -> ToTensor:
        """What turns one image into one model input: training and predict.py alike."""
        if self.image_size is None:
            with Image.open(self.images()[0][0]) as first:
                return ToTensor((first.height, first.width), self.channels)
        return ToTensor(tuple(self.image_size), self.channels)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.channels, *self.transform.size)

    def load(self) -> tuple[Dataset, Sequence[int]]:
        files, labels = zip(*self.images(), strict=True)
        return ImageFiles(files, labels, self.transform), labels
