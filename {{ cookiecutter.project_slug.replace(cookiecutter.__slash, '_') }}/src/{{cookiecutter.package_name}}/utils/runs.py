"""A run's life: its directory, who holds it, how it stops and how it continues.

Plain Python (no torch): the entry points use it before the heavy imports, and the configs
resolve their run directory with it on every rank, in a launcher, in a requeued job.
"""

import hashlib
import json
import logging
{%- if cookiecutter.__wandb == 'True' %}
import netrc
{%- endif %}
import os
import signal
import socket
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from hydra.errors import CompactHydraException
from omegaconf import OmegaConf

log = logging.getLogger(__name__)

EXIT_CODE = 75  # EX_TEMPFAIL of sysexits.h: a temporary failure; running again continues the work
received: list[str] = []  # the stop signals this process has received
# Overrides a resume may change: more epochs, other hardware, another launcher.
RESUME_MAY_CHANGE = ("trainer.max_epochs", "trainer.max_steps", "trainer.accelerator", "trainer.devices",
                     "trainer.num_nodes", "trainer.strategy", "strategy", "trainer", "data.num_workers",
                     "data.pin_memory", "hydra", "extras")


class ConfigError(CompactHydraException):
    """Bad input: Hydra prints the message alone (HYDRA_FULL_ERROR=1 adds the traceback), exit 1."""


class TrainingError(CompactHydraException):
    """Training cannot go on (a non-finite loss): the message says where, and what was kept."""


class Stopped(SystemExit):
    """The run stopped on a signal and can continue: the launching process exits with EXIT_CODE,
    other ranks with 0 (Lightning's DDP launcher kills everything when a rank exits with an error)."""

    def __init__(self, run: Path, where: str = "") -> None:
        super().__init__(EXIT_CODE if launched_as_rank_zero() else 0)
        if launched_as_rank_zero():
            log.warning(f"Stopped{where} (exit status {EXIT_CODE}). Continue with: python train.py resume={run}")


def _note(signum: int, frame: Any) -> None:
    if received and signum == signal.SIGINT:
        raise KeyboardInterrupt  # a second Ctrl+C: stop now
    received.append(signal.Signals(signum).name)
    log.warning(f"Received {received[-1]}: stopping at the next safe point, to resume later.")


def catch_signals(note: bool = True) -> None:
    """Note SIGTERM, SIGINT and SIGUSR1 (SLURM's warning) instead of dying on them; or, with
    `note` false (no callback would stop the run), let them act as usual again."""
    if threading.current_thread() is threading.main_thread():
        for signum, usual in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler),
                              (signal.SIGUSR1, signal.SIG_DFL)):
            signal.signal(signum, _note if note else usual)


def launched_as_rank_zero() -> bool:
    """Global rank 0 by the launcher's environment (torchrun, srun, Lightning's DDP children)."""
    rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))
    return rank == "0" and os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


def launch_id() -> str:
    """The same for every rank of one launch and for a requeued SLURM job; new for any other start."""
    env = os.environ
    if env.get("SLURM_JOB_ID") and env.get("SLURM_JOB_NAME") not in ("bash", "interactive"):
        name = f"slurm-{env['SLURM_JOB_ID']}"
        name += f"_{env['SLURM_ARRAY_TASK_ID']}" if env.get("SLURM_ARRAY_TASK_ID") else ""
        return name + (f".{env['SLURM_STEP_ID']}" if env.get("SLURM_STEP_ID", "0") != "0" else "")
    if env.get("TORCHELASTIC_RUN_ID", "none") != "none":  # torchrun --standalone or --rdzv-id=<id>
        return f"torchrun-{env['TORCHELASTIC_RUN_ID']}"
    if "TORCHELASTIC_RUN_ID" in env:  # a static rendezvous: the ranks of a node share their launcher
        return f"torchrun-{socket.gethostname()}-{os.getppid()}"
    return f"{socket.gethostname()}-{os.getpid()}"


def run_name() -> str:
    """RUN_NAME if set; else the SLURM job or torchrun launch (every rank the same, and a requeued
    job comes back to its directory); else the start time."""
    launch = launch_id()
    if os.environ.get("RUN_NAME") or not launch.startswith(("slurm-", "torchrun-")):
        return os.environ.get("RUN_NAME") or datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")
    return launch


def finished(run: Path) -> bool:
    return (run / "metrics.json").is_file()


def holder(run: Path) -> str | None:
    """Who holds the run, if a live process of another launch does: "pid 12 on host x"."""
    try:
        lock = json.loads((run / ".lock").read_text())
    except (OSError, ValueError):
        return None
    if lock["launch"] == launch_id():
        return None  # this launch's (another rank, or the same SLURM job requeued)
    if lock["host"] == socket.gethostname():
        try:
            os.kill(lock["pid"], 0)
        except ProcessLookupError:
            return None  # a dead process's: stale
        except PermissionError:
            pass
    return f"pid {lock['pid']} on host {lock['host']} (since {lock['since']})"


def hold(run: Path) -> None:
    """Lock the run for this launch (rank 0 only); refuse if a live process of another holds it."""
    if not launched_as_rank_zero():
        return
    if who := holder(run):
        raise ConfigError(f"{run} is in use by {who}. Wait for it to end, or stop it first.")
    lock = {"host": socket.gethostname(), "pid": os.getpid(), "launch": launch_id(),
            "since": datetime.now().isoformat(timespec="seconds")}
    (run / ".lock").write_text(json.dumps(lock) + "\n")
    for partial in run.glob("**/.*.tmp"):  # left by a process killed while writing
        partial.unlink()


def release(run: Path) -> None:
    if launched_as_rank_zero() and holder(run) is None:
        (run / ".lock").unlink(missing_ok=True)


def find_run(runs: str, resume: str) -> Path:
    """The run that `resume` names: `latest` (the newest unfinished one no process holds), a
    run directory, or the name of one in `runs`."""
    root = Path(runs)
    found = [d for d in root.iterdir() if (d / ".hydra").is_dir()] if root.is_dir() else []
    if resume == "latest":
        stopped = [d for d in found if not finished(d) and holder(d) is None]
        if stopped:
            return max(stopped, key=lambda d: max(p.stat().st_mtime for p in [d, *d.glob("checkpoints/*")]))
        raise ConfigError(f"resume=latest: no unfinished run in {root} that no other process holds.")
    for candidate in (Path(resume).expanduser(), root / resume):
        if (candidate / ".hydra").is_dir():
            return candidate.resolve()
    recent = ", ".join(sorted((d.name for d in found), reverse=True)[:5]) or "none"
    raise ConfigError(
        f"resume={resume!r}: no such run (a directory holding .hydra/). Recent runs in {root}: {recent}. "
        "Accepted: resume=latest, resume=<run directory> or resume=<run name>."
    )


def run_dir(runs: str, resume: str | None = None) -> str:
    """A new `runs/<run_name>`, or the run that `resume` names. One that names none gets a new
    directory here (an error while Hydra resolves its settings would be a long traceback):
    train.py reports it and removes that directory."""
    if resume:
        try:
            return str(find_run(runs, resume))
        except ConfigError:
            pass
    return f"{runs}/{run_name()}"


def hydra_subdir(run: str) -> str | None:
    """`.hydra` for the first start of a run; None (Hydra saves nothing) for every later start
    and for ranks other than 0."""
    return ".hydra" if launched_as_rank_zero() and not (Path(run) / ".hydra").exists() else None


def resume_overrides(run: Path, given: list[str]) -> list[str]:
    """The overrides of the run's first start, with those of `given` that a resume may change;
    a ConfigError lists any other difference."""
    saved = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text()) or []
    key = lambda override: override.split("=", 1)[0].lstrip("+~")  # noqa: E731
    new = [o for o in given if key(o) != "resume" and o not in saved]
    refused = [o for o in new if not key(o).startswith(RESUME_MAY_CHANGE)]
    if refused:
        raise ConfigError(
            f"resume={run} continues that run with its own config ({' '.join(saved) or 'no overrides'}); "
            f"these would change it: {' '.join(refused)}. A resume may change only "
            f"{', '.join(RESUME_MAY_CHANGE)}. For other settings, start a new run."
        )
    return [o for o in saved if key(o) not in {key(n) for n in new}] + new


def multirun_name() -> str | None:
    """The name of the multirun this job belongs to (a W&B group), or None."""
    from hydra.core.hydra_config import HydraConfig

    cfg = HydraConfig.get() if HydraConfig.initialized() else None
    return Path(cfg.sweep.dir).name if cfg and cfg.mode.name == "MULTIRUN" else None


def run_id(run: str) -> str:
    """A logger run id made from the run directory: every start of a run logs into the same one."""
    return hashlib.sha1(str(Path(run).resolve()).encode()).hexdigest()[:16]
{%- if cookiecutter.__wandb == 'True' %}


def wandb_offline() -> bool:
    """Offline unless W&B can log in without asking (WANDB_API_KEY, `wandb login`) or WANDB_MODE says."""
    if "WANDB_MODE" in os.environ or os.environ.get("WANDB_API_KEY"):
        return False
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is None
    except (OSError, netrc.NetrcParseError):
        return True
{%- endif %}


def project_root() -> str:
    """$PROJECT_ROOT if set, else the directory the command runs from: the base of logs/ and data/."""
    return os.environ.get("PROJECT_ROOT") or os.getcwd()


def register_resolvers() -> None:
    """The configs' own ${...} functions, resolved once per run."""
    resolvers = [project_root, run_name, run_dir, hydra_subdir, multirun_name, run_id{{ ", wandb_offline" if cookiecutter.__wandb == "True" }}]
    for function in resolvers:
        if not OmegaConf.has_resolver(function.__name__):
            OmegaConf.register_new_resolver(function.__name__, function, use_cache=True)


def write_json(path: Path, values: dict) -> None:
    """Write whole or not at all: a reader never sees half a file (a killed write leaves a .tmp)."""
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(json.dumps(values, indent=2) + "\n")
    os.replace(partial, path)


def say(message: str) -> None:
    """A line on the console only: nothing is written into a run this process does not change."""
    print(message, file=sys.stderr)
