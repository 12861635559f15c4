"""The project's Hydra plugins: Hydra takes them only from the hydra_plugins namespace.

Hydra imports every module here at start-up, so this one imports no Optuna.
"""

from {{ cookiecutter.package_name }}.utils import optuna_sweeper


class OptunaSweeper(optuna_sweeper.OptunaSweeper):
    """utils/optuna_sweeper.py's sweeper, by the name hydra/sweeper/optuna.yaml gives it."""
