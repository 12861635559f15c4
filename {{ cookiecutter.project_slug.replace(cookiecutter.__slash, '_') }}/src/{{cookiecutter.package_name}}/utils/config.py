"""The config, checked (in train.py before anything heavy loads); what ran, recorded in its run directory."""

import gc
import logging
import os
import platform
import shutil
import subprocess
import sys
import warnings
from datetime import datetime
from importlib import metadata
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from {{ cookiecutter.package_name }}.utils.runs import ConfigError, write_json

TYPES = {bool: "true or false", int: "an integer", float: "a number"}  # exact types: a bool is no int
UNCHECKED = ("hydra", "trainer.devices", "trainer.deterministic", "trainer.fast_dev_run", "trainer.limit_")
UNCHECKED += ("trainer.overfit_batches", "callbacks.model_checkpoint.save_last", "logger.wandb.log_model")
warnings.filterwarnings("ignore", message="provider=hydra.searchpath in main")  # no configs/ of your own


def check_types(cfg: DictConfig, overrides: list[str]) -> None:
    """A ConfigError names a value left out (???), or one of the wrong type (train.py: before torch loads)."""
    if missing := sorted(OmegaConf.missing_keys(cfg)):
        raise ConfigError(f"{', '.join(missing)}: required, and no value given: pass {missing[0]}=<value>.")
    if OmegaConf.select(cfg, "callbacks.backbone_finetuning") and not (cfg.pretrained or cfg.get("resume")):
        raise ConfigError("pretrained: required to fine-tune (a frozen random backbone learns nothing).")
    if not cfg.get("train", True) and not cfg.get("ckpt_path"):
        raise ConfigError("train=false tests the checkpoint at ckpt_path: pass ckpt_path=<a .ckpt file>.")
    parsed = [o for o in OverridesParser.create().parse_overrides(overrides) if not o.is_delete()]
    groups = HydraConfig.get().runtime.choices  # not values; UNCHECKED: Hydra's, and Lightning's multi-typed
    values = [o for o in parsed if o.key_or_group not in groups and not o.key_or_group.startswith(UNCHECKED)]
    chosen = [o.input_line for o in parsed if o not in values or isinstance(o.value(), list)]  # group=[a,b]
    defaults = hydra.compose(HydraConfig.get().job.config_name, chosen) if values else None
    for k in [o.key_or_group for o in values if o.value() is not None]:  # null passes (no seed, defaults)
        default, given = (OmegaConf.select(c, k, throw_on_resolution_failure=False) for c in (defaults, cfg))
        if (t := type(default)) in TYPES and not (type(given) is t or (t is float and type(given) is int)):
            raise ConfigError(f"{k}={given!r}: expected {TYPES[t]} (the default is {default!r}).")
    for key in ("max_epochs", "accumulate_grad_batches"):  # -1 epochs has no schedule; 0 batches: Lightning's
        if not isinstance(n := cfg.trainer.get(key), int) or n < 1:  # ZeroDivisionError traceback
            raise ConfigError(f"trainer.{key}={n}: accepted: a positive integer.")


def quiet_console(cfg: DictConfig) -> None:
    """Known upstream noise off the console, at its source (Lightning's handler too); matmul precision."""
    if (precision := cfg.extras.float32_matmul_precision) not in ("highest", "high", "medium"):
        raise ConfigError(f"extras.float32_matmul_precision={precision!r}: accepted: highest, high, medium.")
    gc.disable()  # while torch, Lightning and W&B load: the collector scanned them 8 times (1.3 s)
    import lightning  # noqa: F401

    logging.getLogger("lightning").handlers.clear()  # and below, Lightning's 💡 tips: adverts
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(lambda r: "💡" not in r.getMessage())
    # torch 2.13 deprecates what Lightning 2.6 and torchdata 0.11 still call.
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)`|'set_vital' is deprecated")
    # Lightning's notes on choices made: SLURM here, not a job; fine-tuning's train_bn; 0 workers (ours);
    # cpu on a GPU; few batches; resumed checkpoints; debug=overfit's order (to it, any sampler "shuffles").
    warnings.filterwarnings("ignore", "The (`srun`|dirpath|provided params|'.*' does not have)|GPU available")
    warnings.filterwarnings("ignore", "The number of training|Checkpoint dir|You requested to overfit")
{%- if cookiecutter.__wandb == 'True' %}
    if "wandb" in (cfg.get("logger") or {}):  # W&B warns of Lightning's `anonymous` unless set up first
        __import__("wandb").setup()  # silently: WANDB_SILENT, in configs/hydra/default.yaml
{%- endif %}
    __import__("torch").set_float32_matmul_precision(precision)  # on CUDA GPUs (Ampere or newer) alone
    if not gc.get_freeze_count():  # a process's first job: what has loaded is never scanned again
        gc.freeze()
    gc.enable()


def save_config(cfg: DictConfig, run: Path, first_start: bool = False) -> None:
    """config.yaml, the resolved config; at a run's first start, .hydra/run_info.json: what ran, where."""
    (run / "config.yaml").write_text(text := OmegaConf.to_yaml(cfg, resolve=True))
    if cfg.extras.get("print_config"):
        print(text)
    if first_start:
        git = ["git", "-C", str(Path(__file__).parent), "describe", "--always", "--dirty"]
        commit = shutil.which("git") and subprocess.run(git, capture_output=True, text=True)
        info = dict(started=f"{datetime.now().astimezone()}", command=[sys.executable, *sys.argv])
        info["cwd"], info["python"] = os.getcwd(), sys.version
        info["git"] = commit.stdout.strip() if commit and not commit.returncode else None  # -dirty: changed
        info["packages"] = {d.metadata["Name"]: d.version for d in metadata.distributions()}
        info["machine"] = f"{platform.node()}, {platform.platform()}, {os.cpu_count()} CPUs"
        write_json(run / ".hydra" / "run_info.json", info)
