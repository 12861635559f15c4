"""Reading checkpoints the same way everywhere: one clear message for a missing or broken file."""

import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from {{ cookiecutter.package_name }}.utils.runs import ConfigError

log = logging.getLogger(__name__)


def read_checkpoint(path: str | Path, key: str = "ckpt_path") -> dict[str, Any]:
    """The checkpoint at `path` (tensors mapped from the file, read when used), or a ConfigError."""
    if not path:
        raise ConfigError(f"{key} is not set: pass a checkpoint, e.g. {key}=logs/train/runs/<run>/checkpoints/last.ckpt.")
    file = Path(path).expanduser()
    if not file.is_file():
        found = sorted(str(p.relative_to(file)) for p in file.glob("**/*.ckpt")) if file.is_dir() else []
        raise ConfigError(
            f"{key}={str(path)!r}: no such checkpoint file."
            + (f" It is a directory holding {', '.join(found[:5])}." if found else "")
            + " Pass a .ckpt file, e.g. logs/train/runs/<run>/checkpoints/last.ckpt."
        )
    try:
        return torch.load(file, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # truncated, corrupt, or not a checkpoint at all
        raise ConfigError(
            f"{key}={str(path)!r} is not a readable checkpoint ({type(error).__name__}). "
            "It may be truncated or corrupt: pass another .ckpt file."
        ) from None


def checkpoint_to_continue(run: Path, ckpt_path: str | None) -> str | None:
    """`ckpt_path` if given (checked); else the run's newest readable checkpoint, for a run that
    continues (resume=, a requeued SLURM job, a restarted torchrun); None for a new run."""
    if ckpt_path:
        read_checkpoint(ckpt_path)
        return ckpt_path
    for path in sorted(run.glob("checkpoints/*.ckpt"), key=lambda p: p.stat().st_mtime_ns, reverse=True):
        try:
            checkpoint = read_checkpoint(path)
        except ConfigError as error:
            log.warning(f"Skipped: {error}")
            continue
        log.info(f"Continuing from {path} (epoch {checkpoint['epoch']}, step {checkpoint['global_step']}).")
        return str(path)
    return None


def load_matching_weights(net: nn.Module, path: str) -> None:
    """Start `net` from a checkpoint's weights where names and shapes match (fine-tuning)."""
    saved = read_checkpoint(path, key="pretrained")["state_dict"]
    source = {k.removeprefix("net."): v for k, v in saved.items() if k.startswith("net.")}
    target = net.state_dict()
    loaded = [k for k in target if k in source and source[k].shape == target[k].shape]
    if not loaded:
        raise ConfigError(f"pretrained={path!r}: no layer of that checkpoint fits this net; pass one of the same kind.")
    net.load_state_dict({k: source[k] for k in loaded}, strict=False)
    log.info(f"Pretrained weights from {path}: {len(loaded)} tensors loaded.")
    for name, keys in (("skipped", sorted(source.keys() - set(loaded))), ("new", sorted(target.keys() - set(loaded)))):
        if keys:
            log.info(f"  {name}: {', '.join(keys)}")


def model_and_data(cfg: Any) -> tuple[Any, Any]:
    """The checkpoint's model (on the CPU, in eval mode) and a DataModule: the data config the
    checkpoint records, or `data=` from the command line if it fits the model."""
    import hydra

    from {{ cookiecutter.package_name }}.models.classifier import Classifier

    checkpoint = read_checkpoint(cfg.get("ckpt_path"))
    model = Classifier.load_from_checkpoint(cfg.ckpt_path, map_location="cpu", weights_only=True).eval()
    data = cfg.get("data") or checkpoint.get("resumable", {}).get("data")
    if not data:
        raise ConfigError(f"ckpt_path={cfg.ckpt_path}: the checkpoint records no data config; pass data=<option>.")
    datamodule = hydra.utils.instantiate(data)
    datamodule.prepare_data()
    trained = (list(model.hparams.input_shape), model.hparams.num_classes)
    given = (list(datamodule.input_shape), datamodule.num_classes)
    if trained != given:
        raise ConfigError(
            f"The data does not fit the model: it has inputs of shape {given[0]} in {given[1]} classes, "
            f"the checkpoint was trained on inputs of shape {trained[0]} in {trained[1]} classes."
        )
    return model, datamodule
