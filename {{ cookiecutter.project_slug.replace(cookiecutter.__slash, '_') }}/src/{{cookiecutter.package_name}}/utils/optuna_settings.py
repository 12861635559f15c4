"""The Optuna sweeper's settings as Optuna objects: storage, sampler, pruner and search space.

A wrong setting gets one message naming it and what is accepted, before any trial starts. The
trials' pruning callback opens the storage and makes the pruner with the same functions.
"""

import time
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Transformer

from {{ cookiecutter.package_name }}.utils.runs import ConfigError

# The names hydra.sweeper.pruner and hydra.sweeper.sampler accept, and Optuna's classes.
NAMES = {
    "pruner": {
        "median": "MedianPruner",
        "successive_halving": "SuccessiveHalvingPruner",
        "hyperband": "HyperbandPruner",
        "none": "NopPruner",
    },
    "sampler": {"tpe": "TPESampler", "random": "RandomSampler", "gp": "GPSampler"},
}
SWEEPS = "interval(a, b), tag(log, interval(a, b)), int(interval(a, b)), range(a, b, step), choice(a, b, ...)"


def make(kind: str, spec: Any) -> Any:
    """An Optuna pruner or sampler (`kind`) from its name (median, tpe, ...) or a config with _target_."""
    import optuna
    from hydra.utils import instantiate

    names = NAMES[kind]
    accepted = f"{', '.join(names)}, or a config with _target_: optuna.{kind}s.<class> and its arguments"
    if spec is None or isinstance(spec, str):
        if (spec or "none") not in names:
            raise ConfigError(f"hydra.sweeper.{kind}={spec}: no such {kind}. Accepted: {accepted}.")
        spec = {"_target_": f"optuna.{kind}s.{names[spec or 'none']}"}
    try:
        made = instantiate(spec)
    except Exception as error:
        while error.__cause__ is not None:  # Hydra's "Error in call to target ...": its cause names the key
            error = error.__cause__
        why = f"{type(error).__name__}: {str(error).splitlines()[0]}"
        raise ConfigError(f"hydra.sweeper.{kind}: {why}. Accepted: {accepted}.") from None
    if not isinstance(made, optuna.pruners.BasePruner if kind == "pruner" else optuna.samplers.BaseSampler):
        raise ConfigError(f"hydra.sweeper.{kind}={spec}: no Optuna {kind} (_target_?). Accepted: {accepted}.")
    return made


def open_storage(url: str) -> Any:
    """The study's storage: a database URL (sqlite:///..., postgresql://...), else a journal file's path."""
    import optuna

    try:
        if "://" in url:
            return database(url)
        Path(url).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(url))
    except Exception as error:
        raise ConfigError(
            f"hydra.sweeper.storage={url} cannot be opened ({type(error).__name__}: "
            f"{str(error).splitlines()[0]}). Accepted: a database URL with its driver installed and its "
            "server reachable (sqlite:///logs/optuna.db, postgresql://user@host/db), or the path "
            "of a journal file (logs/optuna.journal)."
        ) from None


def database(url: str, attempts: int = 5) -> Any:
    """Optuna's RDBStorage. Workers that start together on a new database all create its tables:
    those that lose that race (a table or schema version already there) wait a second and open it."""
    import optuna
    from sqlalchemy.exc import IntegrityError

    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(url)
        except Exception as error:
            raced = isinstance(error, IntegrityError) or "already exists" in str(error)
            if not raced or attempt + 1 == attempts:
                raise
            time.sleep(1)


def search_space(overrides: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Optuna distributions for the sweeps among `overrides`, and the other overrides; a later one wins."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    space: dict[str, Any] = {}
    fixed: dict[str, str] = {}
    for override in OverridesParser.create().parse_overrides(overrides):
        key, value, line = override.get_key_element(), override.value(), override.input_line
        space.pop(key, None)
        fixed.pop(key, None)
        try:
            if not override.is_sweep_override():
                fixed[key] = line
            elif override.is_choice_sweep():
                space[key] = CategoricalDistribution(list(override.sweep_iterator(Transformer.encode)))
            elif override.is_range_sweep():
                values = list(override.sweep_iterator())
                number = IntDistribution if all(isinstance(v, int) for v in values) else FloatDistribution
                space[key] = number(values[0], round(values[-1], 12), step=value.step)  # 0.3 * 3: 0.899...
            elif override.is_interval_sweep():
                number = IntDistribution if isinstance(value.start, int) else FloatDistribution
                space[key] = number(value.start, value.end, log="log" in value.tags)
            else:
                raise ValueError("not a distribution")
        except (ValueError, IndexError) as error:
            raise ConfigError(
                f"hydra.sweeper.params: {line} cannot be searched ({error}). Accepted: {SWEEPS}."
            ) from None
    return space, list(fixed.values())
