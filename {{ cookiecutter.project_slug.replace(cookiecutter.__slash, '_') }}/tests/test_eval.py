"""Evaluating a checkpoint reproduces the training run's test metrics."""

import json
from pathlib import Path

import pytest
from conftest import compose_config, run_script

from {{ cookiecutter.package_name }}.eval import evaluate


def best_checkpoint(run_dir: Path) -> Path:
    (best,) = (run_dir / "checkpoints").glob("epoch_*.ckpt")
    return best


def test_eval_reproduces_test_accuracy(trained_run: tuple[Path, dict[str, float]], tmp_path: Path) -> None:
    run_dir, train_metrics = trained_run
    cfg = compose_config("eval", tmp_path, [f"ckpt_path={best_checkpoint(run_dir)}"])
    metrics = evaluate(cfg)
    assert metrics["test/acc"] == pytest.approx(train_metrics["test/acc"], abs=1e-6)
    assert json.loads((tmp_path / "metrics.json").read_text()) == pytest.approx(metrics)


@pytest.mark.slow
def test_eval_command_writes_its_own_run_directory(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    run_dir, train_metrics = trained_run
    result = run_script("eval.py", f"ckpt_path={best_checkpoint(run_dir)}", "logger=csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (eval_run,) = (tmp_path / "logs" / "eval" / "runs").iterdir()
    metrics = json.loads((eval_run / "metrics.json").read_text())
    assert metrics["test/acc"] == pytest.approx(train_metrics["test/acc"], abs=1e-6)
