"""Prediction with a checkpoint: `python predict.py ckpt_path=PATH input=FILE_OR_FOLDER`.

Reads an image, a folder of images or a CSV file of the data's feature columns, makes each a
model input with the DataModule's own transform, and writes <run>/predictions.csv.
"""

import csv
import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.utils import config, runs

log = logging.getLogger(__name__)
IMAGES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


def read_inputs(path: Path, datamodule: Any) -> tuple[list[str], Any]:
    """One name and one model input per image or CSV row at `path`."""
    import torch
    from PIL import Image

    images = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGES) if path.is_dir() else []
    if path.suffix.lower() in IMAGES or images:
        if len(datamodule.input_shape) != 3:
            raise runs.ConfigError(f"input={path}: images, but the model takes rows of {datamodule.input_shape[0]} numbers.")
        names, inputs = [], []
        for file in images or [path]:
            with Image.open(file) as image:
                names, inputs = [*names, file.name], [*inputs, datamodule.transform(image)]
    elif path.suffix.lower() == ".csv" and len(datamodule.input_shape) == 1:
        with path.open(newline="") as file:
            rows = list(csv.DictReader(file))
        names = [f"{path.name}:{row}" for row in range(2, len(rows) + 2)]  # the line in the file
        try:
            inputs = [datamodule.transform(row) for row in rows]
        except ValueError as error:
            raise runs.ConfigError(f"input={path}: {error}") from None
    else:
        accepted = "an image or a folder of images" if len(datamodule.input_shape) == 3 else "a .csv file"
        raise runs.ConfigError(f"input={str(path)!r}: no inputs for this model there; it accepts {accepted}.")
    if not inputs:
        raise runs.ConfigError(f"input={path}: holds no rows to predict.")
    batch = torch.stack(inputs)
    if not torch.isfinite(batch).all():
        bad = [name for name, x in zip(names, batch, strict=True) if not torch.isfinite(x).all()]
        raise runs.ConfigError(f"input={path}: {', '.join(bad[:5])} hold NaN or infinite values; only finite numbers predict.")
    return names, batch


def predict(cfg: DictConfig) -> Path:
    """Predict every input at `cfg.input`; write and return the path of predictions.csv."""
    import torch
    from torch.utils.data import DataLoader

    from {{ cookiecutter.package_name }}.utils.checkpoints import model_and_data

    if not cfg.get("input") or not Path(cfg.input).exists():
        raise runs.ConfigError(f"input={cfg.get('input')!r}: no such file or folder. Pass what to predict.")
    config.quiet_console()
    model, datamodule = model_and_data(cfg)
    names, inputs = read_inputs(Path(cfg.input), datamodule)
    trainer = hydra.utils.instantiate(cfg.trainer, logger=False)
    loader = DataLoader(inputs, batch_size=datamodule.batch_size)
    probabilities = torch.cat(trainer.predict(model, dataloaders=loader)).tolist()
    path = Path(cfg.paths.output_dir) / "predictions.csv"
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["input", "class", "probability", *(f"p_{name}" for name in model.class_names)])
        for name, row in zip(names, probabilities, strict=True):
            best = max(range(len(row)), key=row.__getitem__)
            writer.writerow([name, model.class_names[best], f"{row[best]:.6f}", *(f"{p:.6f}" for p in row)])
    log.info(f"{len(names)} predictions: {path}")
    return path


@hydra.main(version_base="1.3", config_path="configs", config_name="predict")
def run_predict(cfg: DictConfig) -> None:
    predict(cfg)


def main() -> None:
    runs.register_resolvers()
    run_predict()


if __name__ == "__main__":
    main()
