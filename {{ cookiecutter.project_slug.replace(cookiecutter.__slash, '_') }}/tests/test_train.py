"""Training learns, and leaves the run directory the README promises."""

import json
import sys
from pathlib import Path

import hydra
import pytest
from conftest import ROOT, compose_config, run_script

METRIC_KEYS = {
    "train/loss",
    "train/acc",
    "train/f1",
    "val/loss",
    "val/acc",
    "val/f1",
    "val/acc_best",
    "test/loss",
    "test/acc",
    "test/f1",
}


def test_short_training_learns(trained_run: tuple[Path, dict[str, float]]) -> None:
    _, metrics = trained_run
    assert metrics["test/acc"] > 0.85  # chance is 0.1
    assert metrics["val/acc_best"] >= metrics["val/acc"] - 1e-6


def test_run_directory_holds_checkpoints_and_metrics(trained_run: tuple[Path, dict[str, float]]) -> None:
    run_dir, metrics = trained_run
    checkpoints = {p.name for p in (run_dir / "checkpoints").glob("*.ckpt")}
    assert "last.ckpt" in checkpoints
    assert any(name.startswith("epoch_") for name in checkpoints), checkpoints
    written = json.loads((run_dir / "metrics.json").read_text())
    assert written.keys() >= METRIC_KEYS
    assert all(isinstance(value, float) for value in written.values())
    assert written == pytest.approx(metrics)
    assert (run_dir / "csv" / "metrics.csv").is_file()


def assert_run_directory(run: Path, task_name: str) -> dict[str, float]:
    assert {"config.yaml", "overrides.yaml", "hydra.yaml"} <= {p.name for p in (run / ".hydra").iterdir()}
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert len(list((run / "checkpoints").glob("epoch_*.ckpt"))) == 1
    assert (run / f"{task_name}.log").is_file()
    assert (run / "config_tree.log").is_file()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics.keys() >= METRIC_KEYS
    return metrics


def test_command_line_run_writes_the_run_directory(tmp_path: Path) -> None:
    result = run_script("train.py", "debug=limit", "logger=csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = (tmp_path / "logs" / "debug" / "runs").iterdir()
    assert_run_directory(run, "debug")
    assert (run / "csv" / "metrics.csv").is_file()
    # Not a terminal: one plain line per epoch, no progress-bar control characters.
    assert "epoch 3/3" in result.stdout
    assert "\x1b[" not in result.stdout and "\r" not in result.stdout
    # What it takes to reproduce the run.
    info = json.loads((run / ".hydra" / "run_info.json").read_text())
    assert info["command"][1:] == [str(ROOT / "train.py"), "debug=limit", "logger=csv"]
    assert info["seed"] == 42 and info["torch_initial_seed"] == 42 and info["deterministic"] is False
    assert "commit" in info["git"] and info["hostname"] and info["devices"]
    assert {"torch", "lightning", "hydra-core"} <= {name.lower() for name in info["packages"]}
    assert info["config"]["trainer"]["max_epochs"] == 3  # resolved


@pytest.mark.parametrize("terminal", [True, False])
def test_progress_is_a_rich_bar_in_a_terminal_and_lines_elsewhere(
    terminal: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lightning.pytorch.callbacks import RichProgressBar

    from {{ cookiecutter.package_name }}.callbacks.progress import EpochLines

    monkeypatch.setattr(sys.stdout, "isatty", lambda: terminal)
    bar = hydra.utils.instantiate(compose_config("train", tmp_path).callbacks.progress_bar)
    if terminal:
        assert isinstance(bar, RichProgressBar)
        assert bar.refresh_rate == 10  # redraws per second: Lightning's 100 slows training down
    else:
        assert isinstance(bar, EpochLines)


def test_seed_zero_is_a_seed(tmp_path: Path) -> None:
    from {{ cookiecutter.package_name }}.train import train

    train(compose_config("train", tmp_path, ["seed=0", "debug=fdr"]))
    info = json.loads((tmp_path / "run_info.json").read_text())  # outside Hydra: in the run directory
    assert info["seed"] == 0 and info["torch_initial_seed"] == 0  # unseeded, torch would draw one


@pytest.mark.slow
def test_default_training_reaches_its_target_accuracy(tmp_path: Path) -> None:
    """`python train.py` exactly as a user first runs it: default config and logger."""
    result = run_script("train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = (tmp_path / "logs" / "train" / "runs").iterdir()
    assert assert_run_directory(run, "train")["test/acc"] >= {{ '0.97' if cookiecutter.example == 'digits' else '0.9' }}


def test_run_directory_holds_the_pictures(trained_run: tuple[Path, dict[str, float]]) -> None:
    import csv

    run_dir, metrics = trained_run
    for picture in ("confusion_matrix.png", "learning_curves.png"):
        assert (run_dir / picture).read_bytes().startswith(b"\x89PNG"), picture
    with (run_dir / "test_per_class.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == {{ '10' if cookiecutter.example == 'digits' else '4' }}
    correct = sum(float(row["recall"]) * int(row["support"]) for row in rows)
    assert correct / sum(int(row["support"]) for row in rows) == pytest.approx(metrics["test/acc"], abs=1e-6)


def test_trainer_profiles_its_hooks_only_when_a_profiler_is_asked_for(tmp_path: Path) -> None:
    from lightning.pytorch.profilers import SimpleProfiler

    from {{ cookiecutter.package_name }}.utils.instantiate import instantiate_trainer

    quiet = instantiate_trainer(compose_config("train", tmp_path, ["logger=csv"]))
    # One shared do-nothing context for every hook call, not a new one per call.
    assert quiet.profiler.profile("[Callback]a.on_train_batch_end") is quiet.profiler.profile("b")
    profiled = instantiate_trainer(compose_config("train", tmp_path, ["logger=csv", "debug=profiler"]))
    assert isinstance(profiled.profiler, SimpleProfiler)
