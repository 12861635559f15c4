"""Build the Trainer, with the callbacks and loggers of their config groups."""

from typing import Any

import hydra
from omegaconf import DictConfig


def instantiate_dict(group: DictConfig | None) -> list[Any]:
    """Instantiate every entry of a group such as `callbacks` or `logger`.

    Each entry is a config with a `_target_`; entries set to null are skipped, so one
    can be switched off from the command line (`callbacks.model_summary=null`).
    """
    if not group:
        return []
    return [hydra.utils.instantiate(entry) for entry in group.values() if entry is not None]


def instantiate_trainer(cfg: DictConfig) -> Any:
    """The Trainer of `cfg.trainer`, with `cfg.callbacks` and `cfg.logger` (none where absent).

    Without a profiler (`trainer.profiler` null or absent) its hooks run without profiling contexts.
    """
    from {{ cookiecutter.package_name }}.utils.profiler import NoProfiler

    profiler = {} if cfg.trainer.get("profiler") else {"profiler": NoProfiler()}
    return hydra.utils.instantiate(
        cfg.trainer,
        callbacks=instantiate_dict(cfg.get("callbacks")),
        logger=instantiate_dict(cfg.get("logger")) or False,
        **profiler,
    )
