"""Checking the composed config before anything heavy loads, and a quiet, complete console."""

import logging
import warnings
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from {{ cookiecutter.package_name }}.utils.runs import ConfigError

TYPES = {bool: "true or false", int: "an integer", float: "a number"}


def check_types(cfg: DictConfig, overrides: list[str]) -> None:
    """Each value given on the command line has the type of the value it replaces: a ConfigError
    names the first that does not (`trainer.max_epochs=abc`), before torch is even imported."""
    parsed = [o for o in OverridesParser.create().parse_overrides(overrides) if not o.is_delete()]
    groups = set(HydraConfig.get().runtime.choices)
    values = [o for o in parsed if o.key_or_group not in groups and not o.key_or_group.startswith("hydra")]
    if not values:
        return
    defaults = hydra.compose(HydraConfig.get().job.config_name, [o.input_line for o in parsed if o not in values])
    for override in values:
        key = override.key_or_group
        default = OmegaConf.select(defaults, key, throw_on_resolution_failure=False)
        given = OmegaConf.select(cfg, key, throw_on_resolution_failure=False)
        expected = next((t for t in TYPES if type(default) is t), None)  # bool before int: exact types
        fits = expected is None or type(given) is expected or (expected is float and type(given) is int)
        if not fits:
            raise ConfigError(f"{key}={given!r}: expected {TYPES[expected]} (the default is {default!r}).")


def quiet_console() -> None:
    """Keep known upstream noise off the console, at its source; print each record once.

    Call it where Lightning loads: `import lightning` gives itself a console handler, while Hydra
    already prints and files every record.
    """
    import lightning  # noqa: F401

    logging.getLogger("lightning").handlers.clear()
    # An advertisement in every run ("Tip: ... try installing litlogger").
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(
        lambda record: "litlogger" not in record.getMessage()
    )
    # torch 2.13 deprecates a pytree class that Lightning 2.6 still uses.
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    # Lightning's hint on any machine with SLURM installed, when the run is not a SLURM job.
    warnings.filterwarnings("ignore", message=r"The `srun` command is available on your system")
    # torch 2.13 deprecates a call that torchdata 0.11's StatefulDataLoader makes.
    warnings.filterwarnings("ignore", message="'set_vital' is deprecated")


def save_config(cfg: DictConfig, run: Path) -> None:
    """The full resolved config as <run>/config.yaml, and on the console with extras.print_config."""
    text = OmegaConf.to_yaml(cfg, resolve=True)
    (run / "config.yaml").write_text(text)
    if cfg.get("extras", {}).get("print_config"):
        from rich.console import Console
        from rich.syntax import Syntax

        Console(soft_wrap=True).print(Syntax(text, "yaml"))
