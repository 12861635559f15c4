"""Run-wide conveniences chosen in configs/extras: warnings, printing the config."""

import os
import warnings
from pathlib import Path

import rich
import rich.syntax
import rich.tree
from omegaconf import DictConfig, OmegaConf

# Printed first; the rest of the top-level keys follow in config order.
FIRST = ("data", "model", "trainer", "callbacks", "logger", "paths")


def apply_extras(cfg: DictConfig) -> None:
    """Apply the `extras` config group before training starts."""
    extras = cfg.get("extras") or {}
    if extras.get("ignore_warnings"):
        warnings.filterwarnings("ignore")
    if extras.get("print_config") and launched_as_rank_zero():
        print_config_tree(cfg, save_to=Path(cfg.paths.output_dir) / "config_tree.log")


def launched_as_rank_zero() -> bool:
    """Rank 0 by the launcher's environment (torchrun, srun, Lightning's DDP), before Lightning starts."""
    if "RANK" in os.environ:
        return os.environ["RANK"] == "0"
    if "SLURM_PROCID" in os.environ:
        return os.environ["SLURM_PROCID"] == "0"
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


def print_config_tree(cfg: DictConfig, save_to: Path | None = None) -> None:
    """Print the resolved config as a rich tree, and save the same text in the run directory."""
    tree = rich.tree.Tree("CONFIG", style="bold", guide_style="dim")
    keys = [k for k in FIRST if k in cfg] + [k for k in cfg if k not in FIRST]
    for key in keys:
        value = cfg[key]
        text = OmegaConf.to_yaml(value, resolve=True) if isinstance(value, DictConfig) else str(value)
        tree.add(str(key), style="yellow").add(rich.syntax.Syntax(text, "yaml"))
    rich.print(tree)
    if save_to is not None:
        save_to.parent.mkdir(parents=True, exist_ok=True)
        with save_to.open("w") as file:
            rich.print(tree, file=file)
