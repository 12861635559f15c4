"""What a search leaves: the best trial, printed and as an experiment config, and Optuna's plots as PNG."""

import logging
import warnings
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from {{ cookiecutter.package_name }}.utils.runs import project_root

log = logging.getLogger(__name__)


def report(study: Any, config: DictConfig) -> None:
    """Print the best trial; write <project root>/configs/experiment/<study>_best.yaml and the plots."""
    if all(t.state.name != "COMPLETE" for t in study.get_trials(deepcopy=False)):
        log.warning(f"Study {study.study_name} has no complete trial yet: no best trial.")
        return
    best, name, folder = study.best_trial, f"{study.study_name}_best", Path(config.hydra.sweep.dir)
    metric = OmegaConf.select(config, "optimized_metric", default="value")
    path = Path(project_root()) / "configs" / "experiment" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# @package _global_\n# The best trial ({best.number}, {metric} = {best.value:.4f}) of Optuna study "
        f"{study.study_name}: `python train.py experiment={name}`.\n"
        + experiment(best.user_attrs["overrides"], list(config.hydra.runtime.choices))
    )
    results = {"name": "optuna", "best_params": best.params, "best_value": best.value}
    (folder / "optimization_results.yaml").write_text(OmegaConf.to_yaml(results))
    plots(study, folder)
    log.info(
        f"Best trial {best.number}: {metric} = {best.value:.4f} with {' '.join(best.user_attrs['overrides'])}"
        f"\nTrain it again: python train.py experiment={name} ({path}). Plots: {folder}/*.png"
    )


def experiment(overrides: list[str], choices: list[str]) -> str:
    """An experiment config's body setting what `overrides` set.

    Hydra lets an experiment override only the groups before it in the defaults list; the ones
    after it (debug) it includes. `choices` lists the groups last to first, as Hydra records them.
    """
    later = choices[: choices.index("experiment") + 1] if "experiment" in choices else []
    defaults: list[Any] = []
    values = OmegaConf.create()
    for override in OverridesParser.create().parse_overrides(overrides):
        key, value = override.key_or_group, override.value()
        if key == "hparams_search" or override.is_delete():
            continue
        if key in later:
            defaults.append(f"/{key}/{value}")
        elif key in choices:
            defaults.append({f"override /{key}": value})
        else:
            OmegaConf.update(values, key, value, force_add=True)
    defaults.sort(key=lambda entry: isinstance(entry, dict))  # Hydra takes the overrides last (stable sort)
    return OmegaConf.to_yaml({"defaults": [*defaults, "_self_"], **OmegaConf.to_container(values)})


def plots(study: Any, folder: Path) -> None:
    """Optuna's optimization history, parameter importances and intermediate values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as optuna_plots

    for name in ("optimization_history", "param_importances", "intermediate_values"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Optuna calls its matplotlib plots experimental
                figure = getattr(optuna_plots, f"plot_{name}")(study).figure
            figure.savefig(folder / f"{name}.png", bbox_inches="tight", dpi=100)
            plt.close(figure)
        except Exception as error:  # importances need two complete trials, for example
            log.warning(f"No {name}.png: {error}")
