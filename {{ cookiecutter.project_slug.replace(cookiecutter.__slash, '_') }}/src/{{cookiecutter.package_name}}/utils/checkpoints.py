"""Checking checkpoint paths given on the command line, before any heavy work starts."""

from pathlib import Path
from typing import Any

import hydra

from {{ cookiecutter.package_name }}.utils.errors import ConfigError


def existing_checkpoint(path: str | None, key: str = "ckpt_path") -> Path:
    """Return `path` as a Path if it is a checkpoint file, else raise a ConfigError naming it."""
    if not path:
        raise ConfigError(
            f"{key} is not set: pass the checkpoint to use, e.g. "
            f"{key}=logs/train/runs/<timestamp>/checkpoints/last.ckpt."
        )
    ckpt = Path(path).expanduser()
    if ckpt.is_file():
        return ckpt.resolve()
    hint = ""
    if ckpt.is_dir():
        found = sorted(p.name for p in ckpt.glob("*.ckpt")) or sorted(
            str(p.relative_to(ckpt)) for p in ckpt.glob("checkpoints/*.ckpt")
        )
        hint = f" It is a directory; checkpoints in it: {', '.join(found) or 'none'}."
    raise ConfigError(
        f"{key}={path!r}: no such checkpoint file.{hint} Pass the path of a .ckpt file, "
        "e.g. logs/train/runs/<timestamp>/checkpoints/last.ckpt."
    )


def load_model(model_class: str, path: str) -> Any:
    """The LightningModule saved at `path`, on the CPU, its architecture read from the checkpoint."""
    return hydra.utils.get_class(model_class).load_from_checkpoint(path, map_location="cpu")
