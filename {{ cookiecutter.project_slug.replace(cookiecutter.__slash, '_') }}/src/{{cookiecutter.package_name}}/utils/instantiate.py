"""Build lists of callbacks and loggers from their config groups."""

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
