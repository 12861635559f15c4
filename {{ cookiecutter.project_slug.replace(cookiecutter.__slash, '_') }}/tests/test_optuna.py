"""Optuna through hydra-optuna-sweeper: a search in memory, and one stopped and continued from sqlite."""

from pathlib import Path

import optuna
import pytest
import yaml
from conftest import run_script

FAST = ("debug=fdr", "logger=csv")


def search(cwd: Path, trials: int, *overrides: str, name: str):
    return run_script(
        "train.py", "-m", "hparams_search=optuna", f"hydra.sweeper.n_trials={trials}", *FAST, *overrides,
        cwd=cwd, RUN_NAME=name,
    )  # fmt: skip


@pytest.mark.slow
def test_search_returns_the_optimized_metric_of_each_trial(tmp_path: Path) -> None:
    result = search(tmp_path, 3, name="memory")
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = tmp_path / "logs" / "debug" / "multiruns" / "memory"
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert 0.0 <= best["best_value"] <= 1.0
    # Continuous, integer and categorical parameters, config groups included, were searched.
    searched = {"model.optimizer.lr", "trainer.max_epochs", "data.batch_size", "model/net"}
    assert searched <= best["best_params"].keys()
    assert len(list(sweep.glob("*/metrics.json"))) == 3


@pytest.mark.slow
def test_search_stopped_and_continued_from_sqlite(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    shared = (f"hydra.sweeper.storage={storage}", "hydra.sweeper.study_name=continued")
    for part in ("first", "second"):
        result = search(tmp_path, 2, *shared, name=part)
        assert result.returncode == 0, result.stderr[-3000:]
    study = optuna.load_study(study_name="continued", storage=storage)
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(finished) == 4
    assert all(0.0 <= t.value <= 1.0 for t in finished)
