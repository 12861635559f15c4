"""Continuing a stopped run: which directory, which checkpoint, and whether it fits the model.

A run is finished when its metrics.json exists (train.py writes it last). A run that stopped
before (killed, preempted, requeued) is continued in its own directory from its newest
checkpoint that can be read; unreadable ones are skipped with a warning naming them.
"""

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.utils.errors import ConfigError

log = logging.getLogger(__name__)

FINISHED_MARKER = "metrics.json"
# What resume= accepts, for error messages.
ACCEPTED = "resume=latest, resume=<run directory> or resume=<run name> (a folder of logs/<task>/runs/)"


def checkpoints_in(run_dir: Path) -> list[Path]:
    """The run's checkpoints, newest first (a half-written temporary file is never one)."""
    found = [*run_dir.glob("checkpoints/*.ckpt"), *run_dir.glob("hpc_ckpt_*.ckpt")]
    return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)


def is_finished(run_dir: Path) -> bool:
    return (run_dir / FINISHED_MARKER).is_file()


def resume_dir(runs: str, resume: str) -> str:
    """The run directory that `resume` names: `latest`, a path, or a run name under `runs`."""
    runs_root = Path(runs)
    if resume == "latest":
        newest = {
            d: saved[0] for d in _run_dirs(runs_root) if (saved := checkpoints_in(d)) and not is_finished(d)
        }
        if not newest:
            raise ConfigError(
                f"resume=latest: no unfinished run with a checkpoint in {runs_root}. "
                f"Start a new run without resume=, or give {ACCEPTED}."
            )
        return str(max(newest, key=lambda d: newest[d].stat().st_mtime_ns))
    for candidate in (Path(resume).expanduser(), runs_root / resume):
        if candidate.is_dir():
            return str(candidate.resolve())
    recent = sorted((d.name for d in _run_dirs(runs_root)), reverse=True)[:5]
    raise ConfigError(
        f"resume={resume!r}: no such run directory (nor {runs_root / resume}). "
        f"Recent runs in {runs_root}: {', '.join(recent) or 'none'}. Accepted: {ACCEPTED}."
    )


def _run_dirs(runs_root: Path) -> list[Path]:
    return [d for d in runs_root.iterdir() if d.is_dir()] if runs_root.is_dir() else []


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint at `path`, memory-mapped (tensors are read only when used); raise if unreadable."""
    import torch

    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


def newest_readable_checkpoint(saved: list[Path]) -> tuple[Path, dict[str, Any]] | None:
    """The first of `saved` (newest first) that loads, warning about each one before it that does not."""
    for path in saved:
        try:
            return path, read_checkpoint(path)
        except Exception as error:  # truncated, corrupt or not a checkpoint at all
            log.warning(f"Skipping unreadable checkpoint {path} ({type(error).__name__}: {error}).")
    return None


def resume_point(cfg: DictConfig) -> dict[str, Any] | None:
    """The checkpoint training continues from (setting cfg.ckpt_path), or None for a fresh start.

    An explicit ckpt_path must be readable. Otherwise, if the run directory already holds
    checkpoints (resume=..., a requeued SLURM job, a restarted torchrun), the newest readable
    one is used; unreadable ones are skipped with a warning naming them.
    """
    run_dir = Path(cfg.paths.output_dir)
    if cfg.get("ckpt_path"):
        if cfg.get("resume"):
            raise ConfigError(
                f"ckpt_path={cfg.ckpt_path} and resume={cfg.resume} both given: resume= continues a "
                "run in its own directory, ckpt_path= starts a new run from a checkpoint; pass one."
            )
        try:
            return read_checkpoint(Path(cfg.ckpt_path))
        except Exception as error:
            raise ConfigError(
                f"ckpt_path={cfg.ckpt_path}: not a readable checkpoint ({type(error).__name__}: {error}). "
                "It may be truncated or corrupt; pass another .ckpt file."
            ) from error
    saved = checkpoints_in(run_dir)
    if not saved:
        if cfg.get("resume"):
            raise ConfigError(
                f"resume={cfg.resume}: {run_dir} holds no checkpoint to continue from (it stopped "
                "before saving one). Start a new run without resume=."
            )
        return None
    found = newest_readable_checkpoint(saved)
    if found is None:
        raise ConfigError(
            f"Cannot continue {run_dir}: none of its checkpoints can be read "
            f"({', '.join(str(p) for p in saved)}). Start a new run without resume=."
        )
    path, checkpoint = found
    epoch, step = checkpoint.get("epoch"), checkpoint.get("global_step")
    log.info(f"Continuing {run_dir} from {path} (epoch {epoch}, step {step}).")
    cfg.ckpt_path = str(path)
    return checkpoint


def check_fits(model: Any, checkpoint: Mapping[str, Any], path: Path | str) -> None:
    """Raise a ConfigError naming the mismatching keys if the checkpoint's weights do not fit `model`."""
    saved = {k: tuple(v.shape) for k, v in checkpoint.get("state_dict", {}).items()}
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(expected.keys() - saved.keys())
    unexpected = sorted(saved.keys() - expected.keys())
    resized = sorted(k for k in expected.keys() & saved.keys() if expected[k] != saved[k])
    if not (missing or unexpected or resized):
        return
    parts = []
    for label, keys in (("missing from the checkpoint", missing), ("not in the model", unexpected)):
        if keys:
            parts.append(f"{label}: {_some(keys)}")
    if resized:
        parts.append("other shapes: " + _some([f"{k} {saved[k]} vs {expected[k]}" for k in resized]))
    raise ConfigError(
        f"The checkpoint {path} does not fit the configured model ({'; '.join(parts)}). "
        "It was trained with another architecture or number of classes: use the same model "
        "config (model/net=..., data) as its run, see its .hydra/config.yaml, or start from it "
        "with model.pretrained=<ckpt> to load only the layers that fit."
    )


def _some(items: list[str], limit: int = 6) -> str:
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def continue_logger_runs(logger_cfg: Any, ids: Mapping[str, str]) -> None:
    """Point the logger configs at the runs saved in a checkpoint, so a resumed run appends to them."""
    from omegaconf import open_dict

    if not logger_cfg:
        return
    for entry in logger_cfg.values():
        if entry is None:
            continue
        target = str(entry.get("_target_", "")).lower()
        with open_dict(entry):
            if "wandb" in target and ids.get("wandb"):
                entry.id = ids["wandb"]
                entry.resume = "allow"
            elif "mlflow" in target and ids.get("mlflow"):
                entry.run_id = ids["mlflow"]
