"""Training: `python train.py [overrides]`; the command is checked before torch and Lightning load."""

import json
import logging
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from {{ cookiecutter.package_name }}.utils import config, runs
from {{ cookiecutter.package_name }}.utils.multirun import multirun_job

log = logging.getLogger(__name__)


def train(cfg: DictConfig, overrides: list[str] | None = None) -> dict[str, float]:
    """Fit the model, test its best checkpoint, write metrics.json; return the final metrics."""
    if (run := Path(cfg.paths.output_dir)).joinpath("metrics.json").exists():  # train.py says so first
        raise runs.ConfigError(f"{run} is finished (it has metrics.json): pass another paths.output_dir.")
    config.quiet_console(cfg)  # it loads torch and Lightning
    import lightning as L
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True, verbose=False)
    with runs.named_errors():  # what the data or the net cannot use: one message, as for bad config
        datamodule: L.LightningDataModule = hydra.utils.instantiate(cfg.data)
        datamodule.prepare_data()  # the data decides the model's input shape and classes, and is read
        datamodule.setup("fit")  # and split here: what it cannot use is named before training starts
        shape = {"input_shape": list(datamodule.input_shape), "num_classes": len(datamodule.class_names)}
        model = hydra.utils.instantiate(cfg.model, **shape, class_names=list(datamodule.class_names))
        if OmegaConf.select(cfg, "callbacks.backbone_finetuning") and not hasattr(model.net, "backbone"):
            raise ValueError(f"{type(model.net).__name__} has no `backbone` for fine-tuning to freeze.")
    checkpoint = runs.checkpoint_to_continue(run, cfg.get("ckpt_path"), datamodule, model)  # no logger yet
    saved = runs.read_checkpoint(checkpoint, fits=datamodule) if cfg.train and checkpoint else {}
    fit = saved.get("loops", {}).get("fit_loop")
    began, done = [fit["epoch_progress"]["current"][k] for k in ("ready", "processed")] if fit else [0, 0]
    if began > (n := cfg.trainer.max_epochs) or (done >= n and checkpoint == cfg.get("ckpt_path")):
        at = f"{checkpoint} has begun {began} epochs, ended {done}"  # a run adds epochs, takes none back
        raise runs.ConfigError(f"trainer.max_epochs={n}: {at}: pass more.")  # ckpt_path=: some left to train
    if -1 < (n := cfg.trainer.get("max_steps", -1)) < (step := saved.get("global_step", 0)):  # nor steps
        raise runs.ConfigError(f"trainer.max_steps={n}: {checkpoint} has trained {step} steps: pass more.")
    if cfg.get("pretrained"):
        load_matching_weights(model, cfg.pretrained)
    data = f"inputs {shape['input_shape']}, {len(names := model.class_names)} classes {names[:20]}"  # as read
    log.info(f"{type(model.net).__name__}: {sum(p.numel() for p in model.parameters()):,} parameters; {data}")
    if cfg.compile.enabled:  # in place, forward only: checkpoint keys stay the same
        model.compile(backend=cfg.compile.backend, mode=cfg.compile.mode)
    loggers = [hydra.utils.instantiate(c) for c in (cfg.get("logger") or {}).values() if c]
    configs = [*(cfg.get("callbacks") or {}).values(), *(cfg.trainer.get("callbacks") or [])]
    callbacks = [hydra.utils.instantiate(c) for c in configs if c]  # the trainer's own too (Lightning's way)
    if not loggers and any(type(c).__name__ == "LearningRateMonitor" for c in callbacks):
        log.info("No logger: the learning rate monitor is left out.")
        callbacks = [c for c in callbacks if type(c).__name__ != "LearningRateMonitor"]
    if not any(hasattr(c, "stop_here") for c in callbacks):  # nothing would stop the run on a signal
        runs.catch_signals(note=False)
    bar = {} if OmegaConf.select(cfg, "callbacks.progress_bar") else {"enable_progress_bar": False}
    trainer = hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, **bar)
    if runs.launched_as_rank_zero():  # once the start is accepted; `overrides` (searchpath too) for the next
        config.save_config(cfg, run, first_start=not cfg.get("resume") and (run / ".hydra").is_dir())
        if overrides is not None and (run / ".hydra").is_dir():  # (JSON is YAML)
            runs.write_json(run / ".hydra" / "overrides.yaml", overrides)
    metrics: dict[str, Any] = {}
    try:
        for logger in trainer.loggers:
{%- if cookiecutter.logger == 'mlflow' %}
            mlflow_run = getattr(logger, "run_id", None)  # MLflow's: a str (fast_dev_run's dummy: any)
            if isinstance(mlflow_run, str):  # this start's: a resume's changes (its params stay the first's)
                logger.experiment.set_tag(mlflow_run, "overrides", " ".join(overrides or []))
                if OmegaConf.select(cfg, "logger.mlflow.run_id"):
                    continue  # a resume logs to its first start's MLflow run, whose params cannot change
{%- endif %}
            logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
{%- if cookiecutter.logger == 'mlflow' %}
            if isinstance(mlflow_run, str) and runs.launched_as_rank_zero():  # where a resume finds it
                (run / ".mlflow_run_id").write_text(mlflow_run)
{%- endif %}
        if cfg.train:
            if cfg.get("resume") and not checkpoint:  # it stopped or failed before its first checkpoint
                log.warning(f"{run} has no checkpoint to continue from: its training starts over.")
            trainer.fit(model, datamodule=datamodule, ckpt_path=checkpoint)
            metrics.update(trainer.callback_metrics)
        if cfg.test:  # the best checkpoint of this training; with train=false, the one at ckpt_path
            best = getattr(trainer.checkpoint_callback, "best_model_path", "") if cfg.train else checkpoint
            trainer.test(model, datamodule=datamodule, ckpt_path=best or None, verbose=False)
            metrics.update(trainer.callback_metrics)
    except (SIGTERMException, runs.Stopped) as stop:  # Lightning's (exit 0: an epoch's end), or Resumable's
        if "WANDB_SWEEP_ID" not in os.environ:  # else a W&B agent stopped its trial (Hyperband): its end
            raise stop if isinstance(stop, runs.Stopped) else runs.Stopped(run, trainer.global_step) from None
        metrics.update(trainer.callback_metrics)
    finally:  # end the loggers' runs (W&B; a failed one with exit code 1): a next job or call starts its own
        for logger in trainer.loggers:
            getattr(logger.experiment, "finish", lambda **_: 0)(exit_code=int(sys.exc_info()[0] is not None))
{%- if cookiecutter.logger == 'mlflow' %}
            if isinstance(sys.exc_info()[1], runs.Stopped) and isinstance(getattr(logger, "run_id", 0), str):
                logger.experiment.set_terminated(logger.run_id, "KILLED")  # to resume (Lightning's: FAILED)
{%- endif %}
    # Results only: the learning rate (lr-*) is a setting, and stays in the logs. JSON has no NaN: null.
    metrics = {key: float(value) for key, value in sorted(metrics.items()) if not key.startswith("lr-")}
{%- if cookiecutter.logger == 'tensorboard' %}
    for logger in [lg for lg in trainer.loggers if type(lg).__name__ == "TensorBoardLogger"]:  # HParams view
        logger.log_hyperparams(OmegaConf.to_container(cfg, resolve=True), metrics, trainer.global_step)
        logger.finalize("success")  # Lightning's writes none without metrics; this: a new event file, closed
{%- endif %}
    if trainer.is_global_zero:
        finite = {key: value if abs(value) < float("inf") else None for key, value in metrics.items()}
        runs.write_json(run / "metrics.json", finite)
        log.info(f"{', '.join(f'{k} {v:.4f}' for k, v in metrics.items() if 'test/' in k) or 'Done'}: {run}")
    return metrics


def load_matching_weights(model: Any, path: str) -> None:
    """Start `model.net` from a checkpoint's weights where names and shapes match (the head: same classes)."""
    from torch import nn

    checkpoint, net = runs.read_checkpoint(path, "pretrained"), model.net
    saved, own = {k.removeprefix("net."): v for k, v in checkpoint["state_dict"].items()}, net.state_dict()
    fits = {k: v for k, v in saved.items() if k in own and v.shape == own[k].shape}
    for name, layer in [(n, m) for n, m in net.named_modules() if isinstance(m, nn.Linear)][-1:]:
        if f"{name}.weight" not in fits or checkpoint["hyper_parameters"]["class_names"] != model.class_names:
            fits = {k: v for k, v in fits.items() if not k.startswith(f"{name}.")}  # as many classes named
            layer.load_state_dict({k: 0 * v for k, v in layer.state_dict().items()})  # or new: zero, as ViT's
    if not fits:
        raise runs.ConfigError(f"pretrained={path!r}: no layer of that checkpoint fits this net.")
    net.load_state_dict(fits, strict=False)
    new = ", ".join(k for k in own if k not in fits)
    log.info(f"Pretrained weights from {path}: {len(fits)} tensors loaded; new: {new or 'none'}.")


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def run_train(cfg: DictConfig) -> float | None:
    """Start the run, or continue it with its own config (resume=); train; return `optimized_metric`."""
    run, overrides = Path(cfg.paths.output_dir), OmegaConf.to_container(HydraConfig.get().overrides)  # raw
    given = [*overrides["task"], *(o for o in overrides["hydra"] if o.startswith("hydra.searchpath"))]
    fresh = HydraConfig.get().output_subdir is not None  # this start made the directory
    try:
        config.check_types(cfg, given)
        if cfg.get("resume") or (not fresh and runs.launched_as_rank_zero()):  # a RUN_NAME's run, a requeue
            if fresh:  # resume= named no run: a new directory was made for this error (utils/runs.py)
                shutil.rmtree(run)
                runs.find_run(str(Path(cfg.paths.log_dir) / cfg.task_name / "runs"), cfg.resume)
            cfg = hydra.compose("train", given := runs.resume_overrides(run, given))
            OmegaConf.update(cfg, "resume", str(run), force_add=True)
        if (run / "metrics.json").exists():  # said on the console, not in the run's log: it stays as it was
            again = shlex.join([sys.argv[0], *given, f'pretrained="{run}/checkpoints/last.ckpt"'])
            print(f"{run} is finished (it has metrics.json). Train on: python {again}", file=sys.stderr)
            return json.loads((run / "metrics.json").read_text()).get(cfg.get("optimized_metric"))
        with runs.held(run), multirun_job(given):
            metrics = train(cfg, given)
    except Exception as error:  # a new run that failed before its first checkpoint leaves nothing behind
        if fresh and not any(run.glob("checkpoints/*.ckpt")) and not isinstance(error, runs.TrainingError):
            shutil.rmtree(run, ignore_errors=True)
        raise
    return metrics.get(cfg.optimized_metric) if cfg.get("optimized_metric") else None


def main() -> None:  # note stop signals at once; logger=null (the reference template's, Hydra refuses it): []
    runs.catch_signals()
    sys.argv = [{"logger=null": "logger=[]"}.get(argument, argument) for argument in sys.argv]
    run_train()


if __name__ == "__main__":
    main()
