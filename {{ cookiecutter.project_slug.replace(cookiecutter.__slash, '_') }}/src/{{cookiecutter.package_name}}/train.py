"""Training: `python train.py [overrides]` (or `python -m`, or the console script).

Only Hydra is imported up front: torch and Lightning load after the configuration has been
composed and checked, so `--help` and a mistyped override answer at once.
"""

import json
import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from {{ cookiecutter.package_name }}.utils.checkpoints import existing_checkpoint
from {{ cookiecutter.package_name }}.utils.ddp_multirun import multirun_job
from {{ cookiecutter.package_name }}.utils.extras import apply_extras
from {{ cookiecutter.package_name }}.utils.instantiate import instantiate_trainer
from {{ cookiecutter.package_name }}.utils.logging_setup import use_hydra_logging
from {{ cookiecutter.package_name }}.utils.metrics_file import as_floats, write_metrics
from {{ cookiecutter.package_name }}.utils.resume import (
    check_fits,
    continue_logger_runs,
    is_finished,
    resume_dir,
    resume_point,
)
from {{ cookiecutter.package_name }}.utils.run_info import save_run_info
from {{ cookiecutter.package_name }}.utils.startup import before_hydra

before_hydra()
log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit the model, test its best checkpoint, write metrics.json; return the final metrics."""
    import lightning as L
    import torch

    from {{ cookiecutter.package_name }}.callbacks.run_state import finish_logger_runs, logger_ids

    use_hydra_logging()
    run_dir = Path(cfg.paths.output_dir)
    if is_finished(run_dir):
        log.info(f"{run_dir} is a finished run (it has metrics.json): nothing to do.")
        return json.loads((run_dir / "metrics.json").read_text())
    checkpoint = resume_point(cfg)
    if checkpoint is not None:
        continue_logger_runs(cfg.get("logger"), checkpoint.get("run_state", {}).get("loggers", {}))
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    save_run_info(cfg)
    if cfg.get("float32_matmul_precision"):
        torch.set_float32_matmul_precision(cfg.float32_matmul_precision)
    datamodule: L.LightningDataModule = hydra.utils.instantiate(cfg.data)
    model: L.LightningModule = hydra.utils.instantiate(cfg.model)
    if checkpoint is not None:
        check_fits(model, checkpoint, cfg.ckpt_path)
    if cfg.get("compile", {}).get("enabled"):
        # In place, forward only: metrics stay eager, checkpoint keys stay the same.
        model.compile(backend=cfg.compile.backend, mode=cfg.compile.mode)
    trainer: L.Trainer = instantiate_trainer(cfg)
    if trainer.loggers:
        logged = hyperparameters(cfg, model)
        for logger in trainer.loggers:
            logger.log_hyperparams(logged)
        if trainer.is_global_zero and (ids := logger_ids(trainer)):
            # Also in every checkpoint (callbacks/run_state.py), from where a resumed run reads them.
            (run_dir / "logger_runs.json").write_text(json.dumps(ids, indent=2) + "\n")

    metrics: dict[str, Any] = {}
    if cfg.get("train"):
        trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
        metrics.update(trainer.callback_metrics)
    if cfg.get("test"):
        best = getattr(trainer.checkpoint_callback, "best_model_path", "")
        trainer.test(model, datamodule=datamodule, ckpt_path=best or None)
        metrics.update(trainer.callback_metrics)

    # Results only: the learning rate (LearningRateMonitor's lr-*) is a setting, kept in the logs.
    metrics = as_floats({key: value for key, value in metrics.items() if not key.startswith("lr-")})
    if trainer.is_global_zero:
        write_metrics(cfg.paths.output_dir, metrics)
    finish_logger_runs(trainer)
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
    if cfg.get("resume"):
        resume_dir(str(Path(cfg.paths.log_dir) / cfg.task_name / "runs"), cfg.resume)  # names a run?
    if cfg.get("ckpt_path"):
        cfg.ckpt_path = str(existing_checkpoint(cfg.ckpt_path))
    apply_extras(cfg)
    with multirun_job():
        # Stopped by a signal: the checkpoint is saved and the process exits with status 75.
        metrics = train(cfg)
    if cfg.get("optimized_metric"):
        return metrics.get(cfg.optimized_metric)
    return None


if __name__ == "__main__":
    main()
