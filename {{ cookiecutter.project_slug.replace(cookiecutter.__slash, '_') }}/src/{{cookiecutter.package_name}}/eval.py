"""Evaluation of a checkpoint on the test split: `python eval.py ckpt_path=PATH [overrides]`.

The checkpoint records its architecture and the data it was trained on: nothing else is needed.
`data=...` evaluates on other data with the same input shape and classes.
"""

import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.utils import config, runs

log = logging.getLogger(__name__)


def evaluate(cfg: DictConfig) -> dict[str, float]:
    """Test the checkpoint at `cfg.ckpt_path`, write metrics.json, return the metrics."""
    from {{ cookiecutter.package_name }}.utils.checkpoints import model_and_data

    config.quiet_console()
    model, datamodule = model_and_data(cfg)
    loggers = [hydra.utils.instantiate(c) for c in (cfg.get("logger") or {}).values() if c]
    trainer = hydra.utils.instantiate(cfg.trainer, logger=loggers or False)
    metrics = {k: float(v) for k, v in sorted(trainer.test(model, datamodule=datamodule, verbose=False)[0].items())}
    if trainer.is_global_zero:
        runs.write_json(Path(cfg.paths.output_dir) / "metrics.json", metrics)
        log.info("  ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
    return metrics


@hydra.main(version_base="1.3", config_path="configs", config_name="eval")
def run_eval(cfg: DictConfig) -> None:
    config.save_config(cfg, Path(cfg.paths.output_dir))
    evaluate(cfg)


def main() -> None:
    runs.register_resolvers()
    run_eval()


if __name__ == "__main__":
    main()
