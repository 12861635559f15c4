"""Shared helpers: compose configs like the command line does, and run the real scripts."""

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import DictConfig, open_dict

from {{ cookiecutter.package_name }}.utils.startup import prepare_hydra

ROOT = Path(__file__).resolve().parents[1]
CONFIG_MODULE = "{{ cookiecutter.package_name }}.configs"
prepare_hydra()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (make test) the workers share the cores: cores/workers torch threads each.

    Set before the test modules import torch; the scripts the tests run inherit it. Two workers
    of two threads on two cores ran the fast tests 30 % slower than one process; of one thread,
    30 % quicker.
    """
    if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))


def compose_config(name: str, run_dir: Path, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose `name` (train or eval) with overrides, writing into `run_dir` instead of logs/.

    In-process runs log to CSV unless an override says otherwise: it is the quickest logger.
    The command-line tests (run_script) use the project's default logger.
    """
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        quick = ["logger=csv"] if name in ("train", "eval") else []
        cfg = compose(config_name=name, overrides=[*quick, *overrides])
    with open_dict(cfg):
        cfg.paths.root_dir = str(run_dir)
        cfg.paths.output_dir = str(run_dir)
        cfg.extras.print_config = False
    return cfg


def run_script(
    script: str, *overrides: str, cwd: Path, timeout: float = 300, launcher: Sequence[str] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    """Run `python [launcher...] <script> overrides...` as a user would, logs under `cwd`.

    `launcher` goes between the interpreter and the script, e.g. torchrun's module and flags.
    `env` adds variables; an empty value removes one.
    """
    full_env = {
        **os.environ,
        # tests/ too, for the helpers a run under test loads (signal_helpers).
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
        ),
        "PROJECT_ROOT": str(cwd),
        # Tests never upload anything, whatever credentials the machine has.
        "WANDB_MODE": "offline",
        **env,
    }
    # A test suite itself started under SLURM or torchrun must not hand its launcher to the run.
    for key in ("HYDRA_FULL_ERROR", "RUN_NAME", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "RANK", "LOCAL_RANK"):
        if key not in env:
            full_env.pop(key, None)
    for key in [key for key, value in env.items() if value == ""]:  # an empty value unsets
        full_env.pop(key)
    return subprocess.run(
        [sys.executable, *launcher, str(ROOT / script), *overrides],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    """One short real training shared by the tests that need a trained model."""
    from {{ cookiecutter.package_name }}.train import train

    run_dir = tmp_path_factory.mktemp("trained")
    cfg = compose_config("train", run_dir, ["trainer.max_epochs=4", "callbacks.progress_bar=null"])
    return run_dir, train(cfg)
