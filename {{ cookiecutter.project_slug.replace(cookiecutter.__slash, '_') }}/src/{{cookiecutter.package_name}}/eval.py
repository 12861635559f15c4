"""Test a checkpoint: `python eval.py ckpt_path=PATH` on its own data, `+data.<key>=` changed, or `data=`."""

import logging
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.utils import config, runs

log = logging.getLogger(__name__)


def model_and_data(cfg: Any, stage: str = "test") -> tuple[Any, Any]:
    """The checkpoint's model (on the CPU) and DataModule: its data config with `+data.<key>=`, or `data=`."""
    from {{ cookiecutter.package_name }}.models.classifier import Classifier

    config.check_types(cfg, HydraConfig.get().overrides.task)  # a value left out (???) or of the wrong type
    checkpoint = runs.read_checkpoint(cfg.get("ckpt_path"))
    model = Classifier.load_from_checkpoint(cfg.ckpt_path, map_location="cpu", weights_only=True).eval()
    data, saved = cfg.get("data") or {}, checkpoint.get("resumable", {}).get("data") or {}
    moved = "" if "_target_" in data else " (the checkpoint's data config; moved? ++data.root=, ++data.path=)"
    fill = {k: v for k, v in saved.items() if data.get(k, 0 if "_target_" in data else None) is None}
    if "_target_" not in (data := {**data, **fill}):  # its nulls as recorded: columns, image size
        raise runs.ConfigError(f"ckpt_path={cfg.ckpt_path} records no data config: pass data=<option>.")
    with runs.named_errors(moved):  # data that cannot be read or split
        datamodule = hydra.utils.instantiate(data)
        if stage == "test":  # predict.py reads no data: none is written (the digits, where they were)
            datamodule.prepare_data()
        datamodule.setup(stage)  # as in training: the data's shape and classes may be known only then
    runs.read_checkpoint(cfg.ckpt_path, fits=datamodule if stage == "test" else None)  # other data: refused
    return model, datamodule


@hydra.main(version_base="1.3", config_path="configs", config_name="eval")
def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Test the checkpoint at `cfg.ckpt_path`, write metrics.json, return the metrics."""
    config.quiet_console(cfg)
    config.save_config(cfg, Path(cfg.paths.output_dir))
    model, datamodule = model_and_data(cfg)
    loggers = [hydra.utils.instantiate(c) for c in (cfg.get("logger") or {}).values() if c]
    trainer = hydra.utils.instantiate(cfg.trainer, logger=loggers or False)
    try:  # Lightning's stop exits with status 0 on SIGTERM, 1 on Ctrl+C: this test did not end, run it again
        results = trainer.test(model, datamodule=datamodule, verbose=False)[0]
    except SystemExit as stop:
        raise SystemExit(runs.EXIT_CODE if stop.code in (None, 0, 1) else stop.code) from None
    finally:  # end the loggers' runs (W&B; a failed one with exit code 1): a next job or call starts its own
        for logger in loggers:
            getattr(logger.experiment, "finish", lambda **_: 0)(exit_code=int(sys.exc_info()[0] is not None))
    metrics = {key: float(value) for key, value in sorted(results.items())}
    if trainer.is_global_zero:
        runs.write_json(Path(cfg.paths.output_dir) / "metrics.json", metrics)
        log.info(f"{'  '.join(f'{k} {v:.4f}' for k, v in metrics.items())}: {cfg.paths.output_dir}")
    return metrics
