"""A run's life: its directory, who holds it, how it stops, where it continues; no torch at import."""

import json
import logging
{%- if cookiecutter.__wandb == 'True' %}
import netrc
{%- endif %}
import os
import shlex
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from dotenv import load_dotenv
from hydra import compose
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException, InstantiationException
from omegaconf import OmegaConf

log = logging.getLogger(__name__)
EXIT_CODE = 75  # EX_TEMPFAIL of sysexits.h: a temporary failure; running again continues the work
received: list[str] = []  # the stop signals this process has received
MAY_CHANGE = ("trainer.max_", "trainer.accelerator", "trainer.devices", "trainer.num_nodes")
MAY_CHANGE += ("strategy", "hydra", "extras", "logger", "data.root", "data.path", "paths", "task_name")


class ConfigError(CompactHydraException): ...  # bad input: Hydra prints the message alone (exit 1)


class TrainingError(CompactHydraException): ...  # training cannot go on (a non-finite loss)


class Stopped(SystemExit):  # resumable: EXIT_CODE (other ranks 0, or DDP's launcher kills rank 0)
    def __init__(self, run: Path, step: int) -> None:
        super().__init__(EXIT_CODE if launched_as_rank_zero() and "WANDB_SWEEP_ID" not in os.environ else 0)
        n, args = os.getenv("LOCAL_WORLD_SIZE"), [sys.argv[0], f'resume="{run}"']  # n: torchrun's workers
        start = f"torchrun --standalone --nproc-per-node={n}" if n else "python"  # args[0]: as started
        if self.code and (multirun := run.parent / "multirun.yaml").is_file():  # the sweeper's record of it
            saved = yaml.safe_load(multirun.read_text())["hydra"]["overrides"]  # as typed: ${...} unresolved
            again = [o for o in saved["hydra"] + saved["task"] if not o.startswith("hydra.sweep.dir=")]
            args = [sys.argv[0], *again, f'hydra.sweep.dir="{run.parent}"']  # not resume=: this job alone
        if self.code:  # quoted for Hydra, then for the shell: a path with spaces, ä or ' pastes whole
            log.warning(f"Stopped at step {step}, exit {self.code}. Continue: {start} %s", shlex.join(args))


@contextmanager
def named_errors(hint: str = "") -> Iterator[None]:  # a DataModule's or net's ValueError, a file's OSError
    try:
        yield
    except (ValueError, OSError, InstantiationException) as error:  # Hydra wraps __init__'s, nested for a net
        while isinstance(error, InstantiationException) and error.__cause__:
            error = error.__cause__
        raise ConfigError(f"{error}{hint}") from error


def _note(signum: int, frame: Any) -> None:
    if received and signum == signal.SIGINT:
        raise KeyboardInterrupt  # a second Ctrl+C: stop now
    received.append(signal.Signals(signum).name)
    log.warning(f"Received {received[-1]}: stopping at the next safe point, to resume later.")


def catch_signals(note: bool = True) -> None:
    """Note SIGTERM, SIGINT, SIGUSR1 (SLURM's warning) instead of dying; `note=False`: act as usual again."""
    with suppress(ValueError):  # in another thread than the main one: signals are the main thread's alone
        signal.signal(signal.SIGINT, _note if note else signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(signum, _note if note else signal.SIG_DFL)


def launched_as_rank_zero() -> bool:  # global rank 0 by the launcher's environment: torchrun, srun, DDP's
    rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))
    return rank == os.environ.get("LOCAL_RANK", "0") == os.environ.get("NODE_RANK", "0") == "0"


def launch_id() -> str:  # the same on all ranks of one launch and for a requeued SLURM job, not its next srun
    if os.environ.get("SLURM_JOB_ID") and os.environ.get("SLURM_JOB_NAME") not in ("bash", "interactive"):
        task, step = os.environ.get("SLURM_ARRAY_TASK_ID"), os.environ.get("SLURM_STEP_ID", "0")
        return f"slurm-{os.environ['SLURM_JOB_ID']}{f'_{task}' if task else ''}{f'.{step}' * (step != '0')}"
    if run := os.environ.get("TORCHELASTIC_RUN_ID"):  # torchrun's --rdzv-id ("none": each node's launcher)
        return f"torchrun-{run if run != 'none' else f'{socket.gethostname()}-{os.getppid()}'}"
    return f"{socket.gethostname()}-{os.getpid()}"


def run_name() -> str:  # RUN_NAME; a W&B agent's trial (one SLURM job may run many); the launch; the time
    trial = os.environ.get("WANDB_SWEEP_ID") and f"wandb-{os.environ.get('WANDB_RUN_ID')}"  # on all ranks
    launch = launch_id() if launch_id().startswith(("slurm-", "torchrun-")) else None
    return os.environ.get("RUN_NAME") or trial or launch or f"{datetime.now():%Y-%m-%d_%H-%M-%S_%f}"


def holder(run: Path) -> str | None:  # "pid 12 on host x ..." if a live process of another launch holds it
    try:
        lock = json.loads((run / ".lock").read_text())
        if lock["launch"] == launch_id():  # another rank of this launch, or this SLURM job requeued
            return None
        if lock["host"] == socket.gethostname():
            os.kill(lock["pid"], 0)  # raises if that process has died: a stale lock
    except (OSError, ValueError):
        return None
    return f"pid {lock['pid']} on host {lock['host']} (launch {lock['launch']}, since {lock['since']})"


@contextmanager
def held(run: Path) -> Iterator[None]:
    """Lock the run for this launch (on rank 0); refuse if a live process of another holds it."""
    if launched_as_rank_zero():
        if who := holder(run):
            raise ConfigError(f"{run} is in use by {who}: wait, or stop it; if it died, delete {run}/.lock.")
        lock = dict(host=socket.gethostname(), pid=os.getpid(), launch=launch_id(), since=f"{datetime.now()}")
        write_json(run / ".lock", lock)
    try:
        yield
    finally:
        if launched_as_rank_zero() and holder(run) is None:
            (run / ".lock").unlink(missing_ok=True)


def find_run(runs: str, resume: str) -> Path:
    """The run `resume` names: `latest` (the newest unfinished one no process holds), a path or a name."""
    root = Path(runs)
    found = [d for d in root.iterdir() if (d / ".hydra").is_dir()] if root.is_dir() else []
    stopped = [d for d in found if not (d / "metrics.json").exists() and holder(d) is None]
    if resume == "latest" and stopped:
        return max(stopped, key=lambda d: max(p.stat().st_mtime for p in [d, *d.glob("checkpoints/*")]))
    if resume == "latest":
        raise ConfigError(f"resume=latest: no unfinished run in {root} that no other process holds.")
    for candidate in (root / resume, Path(resume).expanduser()):
        if (candidate / ".hydra").is_dir():
            return candidate.resolve()
    recent = ", ".join(sorted((d.name for d in found), reverse=True)[:5]) or "none"
    raise ConfigError(f"resume={resume!r}: not in {root}. Accepted: latest, a run's path or name: {recent}.")


def run_dir(runs: str, resume: str | None = None) -> str:
    """A new `runs/<run_name>`, or the run `resume` names (none: a new one; train.py says why, removes it)."""
    with suppress(ConfigError):
        return str(find_run(runs, resume)) if resume else f"{runs}/{run_name()}"
    return f"{runs}/{run_name()}"


def hydra_subdir(run: str) -> str | None:  # .hydra at a run's first start; else Hydra saves nothing
    return ".hydra" if launched_as_rank_zero() and not (Path(run) / ".hydra").exists() else None


def resume_overrides(run: Path, given: list[str]) -> list[str]:
    """The run's overrides and those in `given` a resume may change; a ConfigError lists others, and edits."""
    read = lambda name: yaml.safe_load((run / ".hydra" / f"{name}.yaml").read_text())  # noqa: E731
    saved, key = read("overrides") or [], lambda override: override.split("=", 1)[0].lstrip("+~")
    new = [o if o[0] != "+" else "++" + o.lstrip("+") for o in given if key(o) != "resume" and o not in saved]
    first = (h := read("hydra")["hydra"]["overrides"])["task"] + [o for o in h["hydra"] if "searchpath" in o]
    now, then = OmegaConf.to_container(compose("train", first)), read("config")  # at its start; unresolved
    for section, _, name in (k.partition(".") for k in MAY_CHANGE if "." in k):  # configs/local/: machines'
        then[section] |= {k: v for k, v in now[section].items() if k.startswith(name)}
    edited = [f"{k} (configs/ edited)" for k in now if now[k] != then.get(k) and not k.startswith(MAY_CHANGE)]
    if refused := [o for o in new if key(o) != "trainer" and not key(o).startswith(MAY_CHANGE)] + edited:
        raise ConfigError(
            f"resume={run} continues that run with its own config ({' '.join(saved) or 'no overrides'}); "
            f"these would change it: {' '.join(refused)}. A resume may change trainer.max_epochs, max_steps, "
            "max_time, the hardware (accelerator, devices, num_nodes), strategy, extras, hydra, task_name, "
            "logger, the data's place (data.root, data.path, paths); else start a new run."
        )
    return [o for o in saved if key(o) not in {key(n) for n in new}] + new


def read_checkpoint(path: str | Path | None, key: str = "ckpt_path", fits: Any = None) -> dict[str, Any]:
    """The checkpoint at `path` (tensors read when used) or a ConfigError: why not, or why `fits` does not."""
    import torch

    if not path or not Path(path).expanduser().is_file():
        problem = f"{key}={str(path)!r}: no such checkpoint file." if path else f"{key} is not set."
        raise ConfigError(f"{problem} Pass a .ckpt file, e.g. logs/train/runs/<run>/checkpoints/last.ckpt.")
    try:
        saved = torch.load(Path(path).expanduser(), map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # truncated, corrupt, or not a checkpoint at all
        raise ConfigError(f"{key}={str(path)!r} is not a readable checkpoint ({type(e).__name__}).") from None
    if not isinstance(saved, dict) or "net" not in saved.get("hyper_parameters", {}):  # another program's
        raise ConfigError(f"{key}={str(path)!r}: not a checkpoint of this project (no net config in it).")
    was = [list(saved["hyper_parameters"]["input_shape"]), list(saved["hyper_parameters"]["class_names"])]
    if fits is not None and (now := [list(fits.input_shape), list(fits.class_names)]) != was:  # in order
        raise ConfigError(
            f"{key}={str(path)!r} was trained on inputs of shape {was[0]} in {len(was[1])} classes {was[1]}; "
            f"this data has inputs of shape {now[0]} in {len(now[1])} classes {now[1]}: it does not fit."
        )
    return saved


def checkpoint_to_continue(run: Path, ckpt_path: str | None, datamodule: Any, model: Any) -> str | None:
    """The run's latest readable checkpoint (resume=, a requeue, ...); else `ckpt_path`, if `model` fits."""
    found = {}  # by step, then time: a copy (cp -r, scp) gives each file the time it was copied, any order
    for path in run.glob("checkpoints/*.ckpt"):
        try:
            found[str(path)] = (read_checkpoint(path)["global_step"], path.stat().st_mtime_ns)
        except ConfigError as error:
            log.warning(f"Skipped: {error}")
    if found:  # Lightning says "Restoring states from" it, once the resume is accepted
        return max(found, key=found.get)
    was = read_checkpoint(ckpt_path, fits=datamodule)["hyper_parameters"] if ckpt_path else model.hparams
    if key := next((key for key in ("net", "optimizer") if was[key] != model.hparams[key]), None):
        raise ConfigError(
            f"ckpt_path={ckpt_path!r} was trained with model.{key} {was[key]}, not {model.hparams[key]}: "
            f"pass its own, or start anew from its weights: pretrained={ckpt_path} (eval.py tests it as is)."
        )
    return ckpt_path


def multirun_name() -> str | None:  # the name of the multirun this job belongs to (a W&B group), or None
    cfg = HydraConfig.get() if HydraConfig.initialized() else None
    return Path(cfg.sweep.dir).name if cfg and cfg.mode and cfg.mode.name == "MULTIRUN" else None


def run_id(run: str | None) -> str | None:  # W&B's id of the run, wherever it is now; none: W&B makes one
    started = next(Path(run).glob("wandb/*run-*-*"), None) if run else None  # [offline-]run-<time>-<id>
    return started.name.rsplit("-", 1)[-1] if started else None  # its link latest-run: lost in some copies
{%- if cookiecutter.__wandb == 'True' %}


def wandb_mode() -> str | None:
    """Offline unless W&B can log in without asking (WANDB_API_KEY, `wandb login`) or WANDB_MODE says."""
    logged_in = None
    with suppress(OSError, netrc.NetrcParseError):
        logged_in = netrc.netrc().authenticators("api.wandb.ai")
    return None if os.environ.get("WANDB_MODE") or os.environ.get("WANDB_API_KEY") or logged_in else "offline"
{%- endif %}
{%- if cookiecutter.logger == 'mlflow' %}


def mlflow_run_id(run: str | None, store: str) -> str | None:  # its first start's (train.py notes it)
    if not (run and (noted := Path(run) / ".mlflow_run_id").is_file()):
        return None
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient(store).get_run(noted.read_text().strip()).info.run_id
    except Exception:  # the run was copied here from another machine or store: MLflow has no such run
        log.warning(f"{run}: its MLflow run is not in {store}: it logs to a new one.")
        return None


def mlflow_run_name(run: str | None) -> str | None:  # its directory's; a multirun's job: <multirun>/<job>
    name = Path(run).name if run else None  # --cfg job: no directory
    return f"{multirun}/{name}" if name and (multirun := multirun_name()) else name
{%- endif %}


def project_root() -> str:  # a plain function: it resolves in a multirun's launcher too (no HydraConfig)
    return os.path.abspath(os.path.expanduser(os.environ.get("PROJECT_ROOT") or os.getcwd()))  # ~, ..: where


def write_json(path: Path, values: dict | list) -> None:  # whole or not at all; jobs may write one at once
    (partial := path.with_name(f".{path.name}.{os.getpid()}")).write_text(json.dumps(values, indent=2) + "\n")
    os.replace(partial, path)


load_dotenv(".env")  # on import: ./.env's variables, those not set already
ConfigStore.__deepcopy__ = lambda self, memo: self  # --help: one store, not ~100 copies (0.29 s, not 0.52 s)
for function in [project_root, run_name, run_dir, hydra_subdir, multirun_name, run_id{{ ", wandb_mode" if cookiecutter.__wandb == "True" }}]:
    OmegaConf.register_new_resolver(function.__name__, function, use_cache=True, replace=True)
{%- if cookiecutter.logger == 'mlflow' %}
for function in [mlflow_run_id, mlflow_run_name]:
    OmegaConf.register_new_resolver(function.__name__, function, use_cache=True, replace=True)
{%- endif %}
