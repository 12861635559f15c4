"""Predict: `python predict.py ckpt_path=PATH input=<an image, a folder of images, a CSV>`: predictions.csv"""

import csv
import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.eval import model_and_data
from {{ cookiecutter.package_name }}.utils import config, runs

log = logging.getLogger(__name__)


def read_inputs(path: Path, datamodule: Any) -> dict[str, Any]:
    """A model input for each image or CSV row at `path`, by name (file in the folder, or file:line)."""
    from {{ cookiecutter.package_name }}.data.image_folder import SUFFIXES as IMAGES

    if len(datamodule.input_shape) == 1 and path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8-sig") as file:
            reader = csv.DictReader(file)  # its line_num: the file's line a row ends on (blank ones count)
            return {f"{path.name}:{reader.line_num}": datamodule.transform(row) for row in reader}
    folder = path if path.is_dir() else path.parent
    images = sorted(p for p in path.rglob("*") if p.suffix.lower() in IMAGES) if path.is_dir() else [path]
    images = [p for p in images if not any(s[0] == "." for s in p.relative_to(path).parts)]  # as in training
    if len(datamodule.input_shape) != 3 or not all(p.suffix.lower() in IMAGES for p in images):
        takes = {3: "an image or a folder of images", 1: "a .csv file"}.get(len(datamodule.input_shape))
        accepts = f"it accepts {takes}" if takes else "add a reader of its inputs to predict.py"
        raise ValueError(f"input={str(path)!r} holds nothing this model takes; {accepts}.")
    return {str(file.relative_to(folder)): datamodule.transform(file) for file in images}


@hydra.main(version_base="1.3", config_path="configs", config_name="predict")
def predict(cfg: DictConfig) -> Path:
    """Predict every input at `cfg.input`; write and return the path of predictions.csv."""
    config.quiet_console(cfg)  # first: it loads torch and Lightning
    import torch

    if not cfg.get("input") or not Path(cfg.input).exists():
        raise runs.ConfigError(f"input={cfg.get('input')!r}: no such file or folder. Pass what to predict.")
    model, datamodule = model_and_data(cfg, "predict")  # the training data is not read: it may be gone
    trainer = hydra.utils.instantiate(cfg.trainer, logger=False)
    if trainer.world_size > 1:  # each rank would predict a share of the inputs, and write one file
        raise runs.ConfigError(f"trainer.devices x num_nodes = {trainer.world_size}: predict.py uses 1.")
    with runs.named_errors():  # OSError: not an image Pillow reads (it names the file)
        inputs = read_inputs(Path(cfg.input), datamodule)
    if not inputs:
        raise runs.ConfigError(f"input={cfg.input}: no images or rows to predict there.")
    if bad := [name for name, x in inputs.items() if not torch.isfinite(x).all()]:
        raise runs.ConfigError(f"input={cfg.input}: {', '.join(bad[:5])} hold NaN or infinite values.")
    loader = torch.utils.data.DataLoader(torch.stack(list(inputs.values())), batch_size=datamodule.batch_size)
    probabilities = torch.cat(trainer.predict(model, dataloaders=loader)).tolist()
    with (path := Path(cfg.paths.output_dir) / "predictions.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["input", "class", "probability", *(f"p_{name}" for name in model.class_names)])
        for name, row in zip(inputs, probabilities, strict=False):  # fewer: trainer.limit_predict_batches
            best = max(range(len(row)), key=row.__getitem__)
            writer.writerow([name, model.class_names[best], f"{row[best]:.6f}", *(f"{p:.6f}" for p in row)])
    log.info(f"{len(probabilities)} predictions: {path}")
    return path
