"""Images in one sub-folder per class (`root/<class>/<image>`): PNG, JPEG, ... (SUFFIXES), read by Pillow."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps
from torch import Tensor
from torch.utils.data import Dataset

from {{ cookiecutter.package_name }}.data.labelled import LabelledDataModule

SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def to_tensor(file: Path, size: tuple[int, int], channels: int) -> Tensor:
    """The image in `file`: a float tensor (channels, height, width) in [0, 1] of `size` (H, W)."""
    try:
        with Image.open(file) as image:
            if image.mode in ("I", "F"):  # no range known to scale from: convert would clip, silently
                raise ValueError(f"{file}: 32-bit pixels (mode {image.mode}); accepted: 8 or 16 bits.")
            if image.mode.startswith("I;16"):  # 16-bit gray: scaled to 8 bits (convert would clip)
                image = image.convert("I").point(lambda value: value / 256)
            image = ImageOps.exif_transpose(image).convert("L" if channels == 1 else "RGB")  # as shown
    except OSError as error:  # a file cut short, or no image: Pillow's message may not name it
        raise OSError(f"{file}: {error}") from None
    pixels = np.atleast_3d(np.asarray(image.resize(size[::-1], Image.Resampling.BILINEAR), dtype=np.float32))
    return torch.from_numpy(pixels / 255).permute(2, 0, 1)  # (height, width, channels) to (channels, ...)


@dataclass
class ImageFiles(Dataset):  # (image, label) pairs, each file read when asked for, made a tensor by transform
    files: Sequence[Path]
    labels: Sequence[int]
    transform: Callable[[Path], Tensor]

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        return self.transform(self.files[index]), self.labels[index]


class ImageFolderDataModule(LabelledDataModule):
    """The classes: the sub-folders of `root`. Images become `channels` of `image_size` (see its config)."""

    def __init__(self, root: str, image_size: list | int | None = None, channels: int = 3, **options) -> None:
        super().__init__(**options)
        if channels not in (1, 3):
            raise ValueError(f"data.channels={channels}: accepted are 1 (grayscale) and 3 (RGB).")
        self.root, self.image_size, self.channels = Path(root).expanduser().absolute(), image_size, channels

    @cached_property
    def class_names(self) -> list[str]:
        if not self.root.is_dir():
            raise ValueError(f"data.root={str(self.root)!r}: no such folder. Pass a folder of class folders.")
        names = sorted(d.name for d in self.root.iterdir() if d.is_dir() and not d.name.startswith("."))
        if len(names) < 2:
            raise ValueError(f"data.root={self.root} has {len(names)} class folders: it needs 2 or more.")
        return names

    @cached_property
    def images(self) -> list[tuple[Path, int]]:  # each image file, sub-folders too, hidden ones not; in order
        files = [(sorted((self.root / name).rglob("*")), i) for i, name in enumerate(self.class_names)]
        found = [(path, label) for paths, label in files for path in paths if path.suffix.lower() in SUFFIXES]
        found = [(p, i) for p, i in found if not any(s[0] == "." for s in p.relative_to(self.root).parts)]
        if empty := sorted(set(self.class_names) - {self.class_names[label] for _, label in found}):
            raise ValueError(f"data.root={str(self.root)!r}: no {'/'.join(SUFFIXES)} files in {empty}.")
        return found

    @cached_property
    def size(self) -> tuple[int, int]:
        if self.image_size is None:
            with Image.open(self.images[0][0]) as first:
                return ImageOps.exif_transpose(first).size[::-1]  # (height, width) as shown
        size = tuple(self.image_size) if isinstance(self.image_size, list | tuple) else (self.image_size,) * 2
        if len(size) != 2 or not all(type(n) is int and n > 0 for n in size):
            raise ValueError(f"data.image_size={self.image_size}: accepted: [height, width], a size or null.")
        return size

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.channels, *self.size)

    def transform(self, file: Path) -> Tensor:  # one image file to one input, in training and predict.py
        return to_tensor(file, self.size, self.channels)

    def load(self) -> tuple[Dataset, Sequence[int]]:
        files, labels = zip(*self.images, strict=True)
        return ImageFiles(files, labels, partial(to_tensor, size=self.size, channels=self.channels)), labels
