"""scikit-learn's handwritten digits (1,797 8x8 images shipped with it: no download), as an image folder."""

import shutil
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits

from {{ cookiecutter.package_name }}.data.image_folder import ImageFolderDataModule


class DigitsDataModule(ImageFolderDataModule):
    """The digits written once as PNG files, one folder per class, then read like your images are."""

    def prepare_data(self) -> None:
        if self.root.is_dir() and (names := self.class_names) != list("0123456789"):  # yours: image_folder's
            raise ValueError(f"data.root={self.root} holds {names}, not the digits: add data=image_folder.")
        if self.root.is_dir():
            return
        self.root.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".digits-", dir=self.root.parent))  # renamed when whole
        for number, (pixels, label) in enumerate(zip(*load_digits(return_X_y=True), strict=True)):
            (partial / str(label)).mkdir(exist_ok=True)
            ink = np.round(pixels.reshape(8, 8) * (255 / 16)).astype(np.uint8)  # values 0-16 as 0-255
            Image.fromarray(ink, mode="L").save(partial / str(label) / f"{number:04d}.png")
        try:
            partial.rename(self.root)
        except OSError:  # another process wrote it first
            shutil.rmtree(partial)
