"""Training: `python train.py [overrides]` (or `python -m`, or the console script).

Only Hydra is imported up front: torch and Lightning load after the configuration has been
composed and checked, so `--help` and a mistyped override answer at once.
"""

from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from {{ cookiecutter.package_name }}.utils.checkpoints import existing_checkpoint
from {{ cookiecutter.package_name }}.utils.ddp_multirun import multirun_job
from {{ cookiecutter.package_name }}.utils.extras import apply_extras
from {{ cookiecutter.package_name }}.utils.instantiate import instantiate_trainer
from {{ cookiecutter.package_name }}.utils.logging_setup import use_hydra_logging
from {{ cookiecutter.package_name }}.utils.metrics_file import as_floats, write_metrics
from {{ cookiecutter.package_name }}.utils.startup import before_hydra

before_hydra()


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit the model, test its best checkpoint, write metrics.json; return the final metrics."""
    import lightning as L
    import torch

    use_hydra_logging()
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    if cfg.get("float32_matmul_precision"):
        torch.set_float32_matmul_precision(cfg.float32_matmul_precision)
    datamodule: L.LightningDataModule = hydra.utils.instantiate(cfg.data)
    model: L.LightningModule = hydra.utils.instantiate(cfg.model)
    if cfg.get("compile", {}).get("enabled"):
        # In place, forward only: metrics stay eager, checkpoint keys stay the same.
        model.compile(backend=cfg.compile.backend, mode=cfg.compile.mode)
    trainer: L.Trainer = instantiate_trainer(cfg)
    if trainer.loggers:
        logged = hyperparameters(cfg, model)
        for logger in trainer.loggers:
            logger.log_hyperparams(logged)

    metrics: dict[str, Any] = {}
    if cfg.get("train"):
        trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
        metrics.update(trainer.callback_metrics)
    if cfg.get("test"):
        best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
        trainer.test(model, datamodule=datamodule, ckpt_path=best or None)
        metrics.update(trainer.callback_metrics)

    metrics = as_floats(metrics)
    if trainer.is_global_zero:
        write_metrics(cfg.paths.output_dir, metrics)
    return metrics


def hyperparameters(cfg: DictConfig, model: Any) -> dict[str, Any]:
    """What every logger records once: the resolved config and the parameter counts."""
    params = list(model.parameters())
    return {
        **OmegaConf.to_container(cfg, resolve=True),
        "model/params/total": sum(p.numel() for p in params),
        "model/params/trainable": sum(p.numel() for p in params if p.requires_grad),
    }


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> float | None:
    """Entry point. Returns the metric named by `optimized_metric`, for hyperparameter sweepers."""
    if cfg.get("ckpt_path"):
        cfg.ckpt_path = str(existing_checkpoint(cfg.ckpt_path))
    apply_extras(cfg)
    with multirun_job():
        metrics = train(cfg)
    if cfg.get("optimized_metric"):
        return metrics.get(cfg.optimized_metric)
    return None


if __name__ == "__main__":
    main()
