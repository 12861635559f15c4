"""Training: `python train.py [overrides]` (or `python -m {{ cookiecutter.package_name }}.train`, or `{{ cookiecutter.project_slug }}-train`).

Only Hydra loads before the command is checked: a typo, a value of the wrong type or a run in
use answers at once. torch and Lightning load after.
"""

import json
import logging
import math
import shutil
import warnings
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from {{ cookiecutter.package_name }}.utils import config, runs
from {{ cookiecutter.package_name }}.utils.multirun import multirun_job
from {{ cookiecutter.package_name }}.utils.run_info import save_run_info

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, float]:
    """Fit the model, test its best checkpoint, write metrics.json; return the final metrics."""
    import lightning as L
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from {{ cookiecutter.package_name }}.utils.checkpoints import checkpoint_to_continue, load_matching_weights

    config.quiet_console()
    run = Path(cfg.paths.output_dir)
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule: L.LightningDataModule = hydra.utils.instantiate(cfg.data)
    datamodule.prepare_data()  # the data decides the model's input shape and classes
    model: L.LightningModule = hydra.utils.instantiate(
        cfg.model,
        num_classes=datamodule.num_classes,
        input_shape=list(datamodule.input_shape),
        class_names=datamodule.class_names,
    )
    if cfg.get("pretrained"):
        load_matching_weights(model.net, cfg.pretrained)
    log.info(f"{type(model.net).__name__}: {sum(p.numel() for p in model.parameters()):,} parameters.")
    if cfg.compile.enabled:  # in place, forward only: checkpoint keys stay the same
        model.compile(backend=cfg.compile.backend, mode=cfg.compile.mode)
    loggers = [hydra.utils.instantiate(c) for c in (cfg.get("logger") or {}).values() if c]
    callbacks = [hydra.utils.instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c]
    if not loggers and (lr_monitors := [c for c in callbacks if type(c).__name__ == "LearningRateMonitor"]):
        log.info("No logger: the learning rate monitor is left out.")
        callbacks = [c for c in callbacks if c not in lr_monitors]
    if not any(hasattr(c, "stop_here") for c in callbacks):  # nothing would stop the run on a signal
        runs.catch_signals(note=False)
    trainer: L.Trainer = hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    for logger in trainer.loggers:
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    metrics: dict[str, Any] = {}
    try:
        if cfg.train:
            trainer.fit(model, datamodule=datamodule, ckpt_path=checkpoint_to_continue(run, cfg.get("ckpt_path")))
            metrics.update(trainer.callback_metrics)
        if cfg.test:
            best = getattr(trainer.checkpoint_callback, "best_model_path", "")
            trainer.test(model, datamodule=datamodule, ckpt_path=best or None, verbose=False)
            metrics.update(trainer.callback_metrics)
    except SIGTERMException:  # Lightning's own stop (exit status 0), before callbacks/resumable.py took over
        raise runs.Stopped(run) from None
    # Results only: the learning rate (lr-*) is a setting, and stays in the logs.
    metrics = {key: float(value) for key, value in sorted(metrics.items()) if not key.startswith("lr-")}
    if trainer.is_global_zero:
        runs.write_json(run / "metrics.json", {k: v if math.isfinite(v) else None for k, v in metrics.items()})
        shown = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items() if k.startswith("test/"))
        log.info(f"{shown or 'Done'}. Results: {run / 'metrics.json'}")
    return metrics


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def run_train(cfg: DictConfig) -> float | None:
    """Check the command, choose or continue the run directory, train; return `optimized_metric`."""
    run, given = Path(cfg.paths.output_dir), list(HydraConfig.get().overrides.task)
    config.check_types(cfg, given)
    if cfg.get("resume"):  # the run's own config, with what a resume may change
        runs.find_run(str(Path(cfg.paths.log_dir) / cfg.task_name / "runs"), cfg.resume)
        overrides = runs.resume_overrides(run, given)
        cfg = hydra.compose("train", [o for o in overrides if not o.startswith("hydra")])
        with open_dict(cfg):
            cfg.resume = str(run)
    if cfg.get("resume") and cfg.get("ckpt_path"):
        raise runs.ConfigError("resume= continues a run; ckpt_path= starts a new one from a checkpoint: pass one.")
    if runs.finished(run):
        runs.say(f"{run} is finished (it has metrics.json): nothing to do.")
        return json.loads((run / "metrics.json").read_text()).get(cfg.get("optimized_metric"))
    fresh = HydraConfig.get().output_subdir is not None
    runs.hold(run)
    try:
        if runs.launched_as_rank_zero():
            config.save_config(cfg, run)
            if fresh:
                save_run_info(cfg, run / ".hydra")
        if cfg.extras.get("ignore_warnings"):
            warnings.filterwarnings("ignore")
        with multirun_job():
            metrics = train(cfg)
    except Exception as error:
        # A start that failed before its first checkpoint leaves nothing behind.
        if fresh and not any(run.glob("checkpoints/*.ckpt")) and not isinstance(error, runs.TrainingError):
            shutil.rmtree(run, ignore_errors=True)
        raise
    finally:
        runs.release(run)
    return metrics.get(cfg.get("optimized_metric")) if cfg.get("optimized_metric") else None


def main() -> None:
    """Note stop signals from the very start; then Hydra parses the command line."""
    runs.catch_signals()
    runs.register_resolvers()
    run_train()


if __name__ == "__main__":
    main()
