"""The configs' own resolvers: where the project lives, and what a run directory is called.

They are plain functions of the environment, so they resolve anywhere: in a multirun's
launcher (before Hydra's runtime config exists), on every rank, in a requeued job.
"""

import os
from datetime import datetime
from pathlib import Path

from omegaconf import OmegaConf

from {{ cookiecutter.package_name }}.utils.errors import ConfigError
from {{ cookiecutter.package_name }}.utils.extras import launched_as_rank_zero
from {{ cookiecutter.package_name }}.utils.resume import resume_dir


def project_root() -> str:
    """$PROJECT_ROOT if set, else the directory the command runs from: the base of logs/ and data/."""
    return os.environ.get("PROJECT_ROOT") or os.getcwd()


def run_name() -> str:
    """The same on every rank of one launch, new for every launch.

    RUN_NAME if set; else the SLURM job, the torchrun launch, or the time of this start.
    Under torchrun or srun every rank starts on its own, so a timestamp would differ between
    ranks; a name from the launcher does not.

    A SLURM job that is requeued keeps its job id, so it comes back to its own directory.
    """
    env = os.environ
    if env.get("RUN_NAME"):
        return env["RUN_NAME"]
    if env.get("SLURM_JOB_ID") and env.get("SLURM_JOB_NAME") not in ("bash", "interactive"):
        name = f"slurm-{env['SLURM_JOB_ID']}"
        if env.get("SLURM_ARRAY_TASK_ID"):
            name += f"_{env['SLURM_ARRAY_TASK_ID']}"
        if env.get("SLURM_STEP_ID", "0") != "0":
            name += f".{env['SLURM_STEP_ID']}"
        return name
    run_id = env.get("TORCHELASTIC_RUN_ID")
    if run_id and run_id != "none":  # torchrun --standalone, or --rdzv-id=<id>
        return f"torchrun-{run_id}"
    if run_id == "none":  # static rendezvous: the ranks of a node share their launcher process
        return f"torchrun-{os.getppid()}-{_process_start(os.getppid())}"
    return datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")


def run_dir(runs: str, resume: str | None = None) -> str:
    """`runs/<run_name>` for a new run; the directory of the run that `resume` names otherwise.

    A `resume` that names no run gets a new directory here, and train.py reports the error:
    an error raised while Hydra resolves its own settings would come with a long traceback.
    """
    if resume:
        try:
            return resume_dir(runs, resume)
        except ConfigError:
            pass
    return f"{runs}/{run_name()}"


def hydra_subdir(run: str) -> str | None:
    """Where Hydra saves this start's config: `.hydra`, or for a resumed run a new folder below it.

    A resumed run keeps the config and overrides of its first start and adds those of each
    restart. Under torchrun or srun only rank 0 saves it (None: not saved).
    """
    if not launched_as_rank_zero():
        return None
    if not (Path(run) / ".hydra").exists():
        return ".hydra"
    return f".hydra/resumed-{datetime.now().strftime('%Y-%m-%d_%H-%M-%S_%f')}"


def _process_start(pid: int) -> str:
    """When a process started (clock ticks since boot), to tell launches with the same pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "0"


def register() -> None:
    """Make the resolvers above available to the configs (cached: one value a run)."""
    resolvers = {
        "project_root": project_root,
        "run_name": run_name,
        "run_dir": run_dir,
        "hydra_subdir": hydra_subdir,
    }
    for name, function in resolvers.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, function, use_cache=True)
