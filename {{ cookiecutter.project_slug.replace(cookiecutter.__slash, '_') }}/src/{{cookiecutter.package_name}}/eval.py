"""Evaluation of a checkpoint on the test split: `python eval.py ckpt_path=PATH [overrides]`.

The architecture comes from the checkpoint itself (its saved hyperparameters), so a model
trained with any net or experiment evaluates without repeating its overrides.
"""

from typing import Any

import hydra
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.utils.checkpoints import existing_checkpoint, load_model
from {{ cookiecutter.package_name }}.utils.extras import apply_extras
from {{ cookiecutter.package_name }}.utils.instantiate import instantiate_trainer
from {{ cookiecutter.package_name }}.utils.logging_setup import use_hydra_logging
from {{ cookiecutter.package_name }}.utils.metrics_file import as_floats, write_metrics
from {{ cookiecutter.package_name }}.utils.startup import before_hydra

before_hydra()


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Test the checkpoint at `cfg.ckpt_path`, write metrics.json, return the metrics."""
    import lightning as L

    use_hydra_logging()
    model: L.LightningModule = load_model(cfg.model_class, cfg.ckpt_path)
    datamodule: L.LightningDataModule = hydra.utils.instantiate(cfg.data)
    trainer: L.Trainer = instantiate_trainer(cfg)
    results: dict[str, Any] = trainer.test(model, datamodule=datamodule)[0]
    metrics = as_floats(results)
    if trainer.is_global_zero:
        write_metrics(cfg.paths.output_dir, metrics)
    return metrics


@hydra.main(version_base="1.3", config_path="configs", config_name="eval")
def main(cfg: DictConfig) -> None:
    cfg.ckpt_path = str(existing_checkpoint(cfg.ckpt_path))
    apply_extras(cfg)
    evaluate(cfg)


if __name__ == "__main__":
    main()
