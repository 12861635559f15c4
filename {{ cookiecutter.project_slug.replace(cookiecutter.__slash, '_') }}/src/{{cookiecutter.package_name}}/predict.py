"""Prediction with a checkpoint: `python predict.py ckpt_path=PATH input=FILE_OR_FOLDER`.

Inputs go through the DataModule's own transform and Lightning's predict loop; the classes
and probabilities land in <run>/predictions.csv.
"""

import csv
from pathlib import Path

import hydra
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.utils.checkpoints import existing_checkpoint, load_model
from {{ cookiecutter.package_name }}.utils.errors import ConfigError
from {{ cookiecutter.package_name }}.utils.extras import apply_extras
from {{ cookiecutter.package_name }}.utils.instantiate import instantiate_trainer
from {{ cookiecutter.package_name }}.utils.logging_setup import use_hydra_logging
from {{ cookiecutter.package_name }}.utils.startup import before_hydra

before_hydra()


def predict(cfg: DictConfig) -> Path:
    """Predict every input at `cfg.input`; write and return the path of predictions.csv."""
    import torch

    use_hydra_logging()
    model = load_model(cfg.model_class, cfg.ckpt_path)
    datamodule = hydra.utils.instantiate(cfg.data)
    try:
        names = datamodule.read_inputs(cfg.input)
    except ValueError as error:
        raise ConfigError(f"input={cfg.input!r}: {error}") from error
    trainer = instantiate_trainer(cfg)
    probabilities = torch.cat(trainer.predict(model, datamodule=datamodule))
    path = Path(cfg.paths.output_dir) / "predictions.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["input", "class", "probability", *(f"p_{name}" for name in model.class_names)])
        for name, row in zip(names, probabilities.tolist(), strict=True):
            best = max(range(len(row)), key=row.__getitem__)
            writer.writerow([name, model.class_names[best], f"{row[best]:.6f}", *(f"{p:.6f}" for p in row)])
    return path


@hydra.main(version_base="1.3", config_path="configs", config_name="predict")
def main(cfg: DictConfig) -> None:
    cfg.ckpt_path = str(existing_checkpoint(cfg.ckpt_path))
    if not cfg.get("input") or not Path(cfg.input).exists():
        raise ConfigError(f"input={cfg.get('input')!r}: no such file or folder. Pass the inputs to predict.")
    apply_extras(cfg)
    predict(cfg)


if __name__ == "__main__":
    main()
