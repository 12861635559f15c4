"""The project's Hydra plugins: Hydra takes them only from the hydra_plugins namespace.

Hydra imports every module here at start-up, so this one imports no Optuna.
"""

from pathlib import Path
from typing import Any

from hydra.plugins.search_path_plugin import SearchPathPlugin

from {{ cookiecutter.package_name }}.utils import optuna_sweeper
from {{ cookiecutter.package_name }}.utils.runs import project_root


class OptunaSweeper(optuna_sweeper.OptunaSweeper):
    """utils/optuna_sweeper.py's sweeper, by the name hydra/sweeper/optuna.yaml gives it."""


class ProjectConfigs(SearchPathPlugin):
    """<project root>/configs/, once it exists: a search writes experiment/<study>_best.yaml there."""

    def manipulate_search_path(self, search_path: Any) -> None:
        if (folder := Path(project_root()) / "configs").is_dir():
            search_path.append("project", f"file://{folder}")
