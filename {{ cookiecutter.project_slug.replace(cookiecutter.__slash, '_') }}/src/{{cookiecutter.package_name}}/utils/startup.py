"""What every entry point needs before Hydra composes its config."""

import warnings

from dotenv import find_dotenv, load_dotenv
from hydra.core.config_store import ConfigStore

from {{ cookiecutter.package_name }}.utils.resolvers import register


def share_config_store() -> None:
    """Let Hydra's copies of its config repository use the one live ConfigStore.

    Hydra 1.3 deep-copies the repository, and with it every structured config registered in
    the process-wide ConfigStore (its own, the sweeper's, the launcher's), each time it composes
    a config or lists a group: `--help` lists groups over a hundred times, which took 0.5-0.9 s.
    Hydra 1.4 no longer copies the store (facebookresearch/hydra#2928); this does the same for
    1.3. Nothing mutates the store through a copy, so sharing it changes no result.
    """
    ConfigStore.__deepcopy__ = lambda self, memo: self


def prepare_hydra() -> None:
    """The config resolvers, and quick composition: for the entry points, tests and benchmarks."""
    register()
    share_config_store()


def quiet_srun_hint() -> None:
    """Drop Lightning's hint that `srun` "is available on your system but is not used".

    Lightning gives it on every run outside a SLURM job on a machine with SLURM installed (a
    login node, a workstation with SLURM's commands), where that is intended; in a job it never does.
    """
    hint = "The `srun` command is available on your system but is not used"
    warnings.filterwarnings("ignore", message=hint)


def before_hydra() -> None:
    """Read .env from the working directory (set variables win), then prepare_hydra()."""
    load_dotenv(find_dotenv(usecwd=True))
    quiet_srun_hint()
    prepare_hydra()
