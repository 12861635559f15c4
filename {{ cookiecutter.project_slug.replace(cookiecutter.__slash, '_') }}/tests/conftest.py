"""Shared helpers: compose configs as the command line does, run the real scripts, make small data."""

import csv
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict
from PIL import Image

import {{ cookiecutter.package_name }}.utils.runs  # noqa: F401  (the configs' resolvers)

ROOT = Path(__file__).resolve().parents[1]
CONFIG_MODULE = "{{ cookiecutter.package_name }}.configs"
CONFIGS = ROOT / "src" / "{{ cookiecutter.package_name }}" / "configs"
# Known noise of the libraries underneath, which a run must not print (stopped and resumed too);
# "-packages/": any library's warning (Lightning's print the file that warns, not the category).
NOISE = ("litlogger", "anonymous setting", "LeafSpec", "srun", "set_vital", "Traceback", "Warning")
NOISE += ("`weights_only` was not set", "exists and is not empty", "💡", "-packages/")
NOISE += ("it/s",)  # a progress bar drawn into a file (its rate): off a terminal, log lines alone
# Metrics the project logs, by the names in metrics.json.
METRIC_KEYS = {f"{stage}/{name}" for stage in ("train", "val", "test") for name in ("loss", "acc", "f1")}
METRIC_KEYS.add("val/acc_best")
# A whole run in seconds: two epochs of four batches, CSV logs, no progress bar. On the CPU: these runs
# are compared to the bit, and a GPU's kernels vary from run to run (two runs of seed 0 on an H100
# differed in the fifth digit); tests/test_gpu.py trains on the GPU.
QUICK = (
    "trainer.max_epochs=2",
    "trainer.accelerator=cpu",
    "trainer.limit_train_batches=4",
    "trainer.limit_val_batches=2",
    "trainer.limit_test_batches=2",
    "logger=csv",
    "callbacks.progress_bar=null",
)


def continue_command(output: str) -> list[str]:
    """The command a stopped run printed to continue it (its last `Continue:`), split as a shell does."""
    return shlex.split(output.split("Continue: ")[-1].splitlines()[0])


def stop_at(hook: str, **options: object) -> list[str]:
    """Overrides that signal a run (SIGTERM, or `signal=`) once, when Lightning calls `hook`, at training
    step `step=` and on rank `rank=` if given: tests/signal_helpers.py's SendSignal, as from outside."""
    settings = {"_target_": "signal_helpers.SendSignal", "dirpath": "${paths.output_dir}", "hook": hook}
    return [f"+callbacks.signal.{key}={value}" for key, value in {**settings, **options}.items()]


def trainer_stop_at(hook: str, dirpath: Path, name: str = "SIGTERM") -> str:
    """The same signal, as Lightning takes a callback: `++trainer.callbacks=[...]` (eval.py and predict.py
    have no callbacks group; theirs are in trainer.callbacks, replaced); the marker file in `dirpath`."""
    sender = f"_target_:signal_helpers.SendSignal,dirpath:'{dirpath}',hook:{hook},signal:{name}"
    return "++trainer.callbacks=[{" + sender + "}]"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (make test) the workers share the cores: one torch thread pool each. The runs
    a test starts take Ctrl+C as from a terminal, also when this suite runs as a script's background job
    (`make test &`), which starts with SIGINT ignored and hands that to every process it starts. Runs
    log in each test's folder and read the data where yours do (DATA_DIR, else the project's data/): a
    default data config of yours at `${paths.data_dir}/<file>` is found, and the examples' written once."""
    if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    os.environ.setdefault("DATA_DIR", str(ROOT / "data"))
    signal.signal(signal.SIGINT, signal.default_int_handler)


def compose_config(name: str, run_dir: Path, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose `name` (train, eval, predict, export) with overrides, writing into `run_dir`."""
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        quick = ["logger=csv"] if name in ("train", "eval") else []
        cfg = compose(config_name=name, overrides=[*quick, *overrides])
    with open_dict(cfg):
        cfg.paths.root_dir = str(run_dir)
        cfg.paths.output_dir = str(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return cfg


@contextmanager
def as_command(name: str, overrides: Sequence[str] = ()) -> Iterator[None]:
    """Hydra as `python <name>.py overrides` sets it up, around a call of the entry point's function."""
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        HydraConfig.instance().set_config(compose(name, list(overrides), return_hydra_config=True))
        try:
            yield
        finally:
            HydraConfig.instance().cfg = None


def type_checked(run_dir: Path, overrides: Sequence[str]) -> DictConfig:
    """The train config of `overrides`, through the type check train.py makes of them (ConfigError)."""
    from {{ cookiecutter.package_name }}.utils.config import check_types

    cfg = compose_config("train", run_dir, overrides)
    with as_command("train", overrides):
        check_types(cfg, overrides)
    return cfg


def run_script(
    script: str, *overrides: str, cwd: Path, timeout: float = 300, launcher: Sequence[str] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    """`python [launcher] <script> overrides...` as a user runs it, logs under `cwd`.

    `env` adds variables; an empty value removes one.
    """
    cwd.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, *launcher, str(ROOT / script), *overrides]
    return subprocess.run(
        command, cwd=cwd, env=script_env(cwd, **env), capture_output=True, text=True, timeout=timeout
    )


def script_env(cwd: Path, **env: str) -> dict[str, str]:
    """The environment of a run under test: the project's code and tests/ importable, logs under
    `cwd`, offline, no launcher's variables; `env` adds variables, an empty value removes one."""
    full_env = {
        **os.environ,
        # tests/ too, for the helpers a run under test loads (signal_helpers).
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
        ),
        "PROJECT_ROOT": str(cwd),
        "WANDB_MODE": "offline",  # tests never upload, whatever credentials the machine has
        **env,
    }
    # A suite started under SLURM or torchrun must not hand its launcher to the runs.
    launched = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    for key in ("HYDRA_FULL_ERROR", "RUN_NAME", "GROUP_WORLD_SIZE", *launched):
        if key not in env:
            full_env.pop(key, None)
    for key in [key for key, value in env.items() if value == ""]:
        full_env.pop(key)
    return full_env


def run_dirs(root: Path) -> list[Path]:
    """The run directories (holding .hydra/) below `root`."""
    return sorted(p.parent for p in root.glob("**/.hydra"))


def metrics(run: Path) -> dict[str, float]:
    return json.loads((run / "metrics.json").read_text())


def logged_rows(run: Path) -> list[dict[str, str]]:
    """The CSV logger's rows, over all of a run's starts (csv/version_0, version_1, ...)."""
    return [row for path in sorted(run.glob("csv/*/metrics.csv")) for row in csv.DictReader(path.open())]


def logged(run: Path) -> list[tuple]:
    """What the CSV logger kept, over all of a run's starts: (step, name, value) of each metric."""
    rows = logged_rows(run)
    return sorted((row["step"], k, v) for row in rows for k, v in row.items() if v and k != "step")


def assert_same_run(run: Path, reference: Path, failed_start: bool = False) -> None:
    """The same metrics.json, the same logged history (CSV logger), the same best checkpoint (one: its
    epoch and score), and in last.ckpt the same weights to the bit. `failed_start`: a start that failed
    (and torchrun started again) wrote rows its next start logs again, the same."""
    import torch

    assert metrics(run) == metrics(reference)
    assert not (run / "checkpoints" / "interrupted.ckpt").exists()  # older than the end: eval.py took it
    history, expected = logged(run), logged(reference)
    if failed_start:  # rows logged again: compared as sets (the same, one or more times)
        history, expected = sorted(set(history)), sorted(set(expected))
    assert history == expected  # a stop at an epoch's end lost the epoch's train/* metrics
    best = [sorted(p.name for p in r.glob("checkpoints/epoch_*.ckpt")) for r in (run, reference)]
    assert best[0] == best[1] and len(best[0]) == 1, best
    got, expected = (
        torch.load(r / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)["state_dict"]
        for r in (run, reference)
    )
    assert got.keys() == expected.keys()
    assert [key for key in expected if not torch.equal(got[key], expected[key])] == []


def free_port() -> int:
    """A TCP port free on this machine now."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def write_image_folder(root: Path, classes: int = 3, size: int = 16, per_class: int = 40) -> Path:
    """RGB PNGs in one sub-folder per class: each class its own colour and stripes, plus noise."""
    rng = np.random.default_rng(0)
    for label in range(classes):
        (root / f"class_{label}").mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.normal(60, 30, (size, size, 3))
            pixels[:, :, label % 3] += 120
            pixels[label::classes, :, :] += 50
            image = Image.fromarray(pixels.clip(0, 255).astype(np.uint8), mode="RGB")
            image.save(root / f"class_{label}" / f"{i:03d}.png")
    return root


def write_table(path: Path, features: int = 4, classes: int = 3, rows: int = 300) -> Path:
    """A CSV file of numeric feature columns (on different scales) and a text label column."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 3, (classes, features))
    scales = 10.0 ** np.arange(features)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        names = ["width", "height", "depth", "mass", "age", *(f"x{i}" for i in range(5, features))]
        writer.writerow([*names[:features], "species"])
        for row in range(rows):
            label = row % classes
            values = (centres[label] + rng.normal(0, 1, features)) * scales
            writer.writerow([*(f"{v:.6g}" for v in values), f"kind_{label}"])
    return path


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    """One short real training, shared by the tests that need a trained model."""
    from {{ cookiecutter.package_name }}.train import train

    run_dir = tmp_path_factory.mktemp("trained")
    cfg = compose_config("train", run_dir, ["trainer.max_epochs=4", "callbacks.progress_bar=null"])
    return run_dir, train(cfg)


def best_checkpoint(run: Path) -> Path:
    (best,) = run.glob("checkpoints/epoch_*.ckpt")
    return best
