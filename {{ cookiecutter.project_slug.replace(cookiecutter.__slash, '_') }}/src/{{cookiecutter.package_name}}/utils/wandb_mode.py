"""W&B that never waits for a login: offline where there are no credentials."""

import netrc
import os
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import WandbLogger


def has_credentials() -> bool:
    """True if W&B can log in without asking: WANDB_API_KEY, or `wandb login` (~/.netrc)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


def wandb_logger(**kwargs: Any) -> WandbLogger:
    """A WandbLogger; WANDB_MODE wins if set, else offline without credentials.

    In a multirun, each job's run is grouped under the multirun's name unless `group` is set.

    An offline run is kept in <run>/wandb/ and uploaded later with `wandb sync <that dir>`.
    """
    if "WANDB_MODE" not in os.environ and not has_credentials():
        os.environ["WANDB_MODE"] = "offline"
    if kwargs.get("group") is None and (sweep := multirun_name()):
        kwargs["group"] = sweep  # the jobs of one multirun, shown together
    return WandbLogger(**kwargs)


def multirun_name() -> str | None:
    """The name of the multirun this job belongs to (its directory's name), or None."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    return Path(HydraConfig.get().sweep.dir).name
