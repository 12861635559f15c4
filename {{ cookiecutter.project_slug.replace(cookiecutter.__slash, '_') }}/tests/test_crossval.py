"""k-fold cross-validation: one run per fold, and the cross-validated result in the multirun's summary."""

import json
from pathlib import Path

import pytest
import torch
from conftest import ROOT, continue_command, run_script, stop_at

from {{ cookiecutter.package_name }}.utils.runs import EXIT_CODE


@pytest.mark.slow
def test_cross_validation_multirun_writes_a_summary(tmp_path: Path) -> None:
    # Named job directories: the summary sorted them by int(name), a ValueError.
    result = run_script(
        "train.py", "-m", "data.num_folds=3", "data.fold=0,1,2", "trainer.max_epochs=2", "logger=csv",
        "hydra.sweep.subdir=k/fold_${data.fold}", cwd=tmp_path, RUN_NAME="cv",  # nested: summed up too
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = tmp_path / "logs" / "train" / "multiruns" / "cv"
    summary = json.loads((sweep / "summary.json").read_text())
    folds = ["fold_0", "fold_1", "fold_2"]
    accuracies = [json.loads((sweep / "k" / fold / "metrics.json").read_text())["test/acc"] for fold in folds]
    assert [job["dir"] for job in summary["jobs"]] == folds
    assert all(f"data.fold={k}" in job["overrides"] for k, job in enumerate(summary["jobs"]))
    assert summary["metrics"]["test/acc"]["n"] == 3
    assert summary["metrics"]["test/acc"]["mean"] == pytest.approx(sum(accuracies) / 3)
    assert summary["metrics"]["test/acc"]["std"] == pytest.approx(
        torch.tensor(accuracies).std().item(), abs=1e-6
    )
    # The console's line: the cross-validated estimate, each fold's best on its own validation (a walk
    # read the test set's mean there: one test set, scored by each fold's model).
    mean, std, highest = (summary["metrics"]["val/acc_best"][key] for key in ("mean", "std", "highest"))
    said = f"3 jobs; val/acc_best {mean:.4f} ± {std:.4f} (highest: job {highest})."
    assert said in result.stdout + result.stderr  # and the best job (a sweep's mean means nothing: a walk's)
    assert highest == max(summary["jobs"], key=lambda job: job["metrics"]["val/acc_best"])["dir"]


@pytest.mark.slow
def test_a_multirun_with_a_failed_job_writes_the_summary_of_the_others(tmp_path: Path) -> None:
    # Hydra ends a multirun on a failed job's error, after its last job, before on_multirun_end: no summary.
    sweep = ["data.fold=0,7,1", "debug=limit", "logger=csv", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    result = run_script("train.py", "-m", *sweep, cwd=tmp_path)
    assert result.returncode == 1 and "data.fold=7: must be null or 0 to 4" in result.stderr, result.stderr
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    assert [job["dir"] for job in summary["jobs"]] == ["0", "2"] and summary["metrics"]["val/acc"]["n"] == 2


@pytest.mark.slow
def test_a_multirun_run_again_in_its_directory_continues_it_and_refuses_other_values(tmp_path: Path) -> None:
    # Run again with other values, a job took them: a finished job's overrides.yaml named them beside
    # the old metrics, and a stopped job trained on from its checkpoint with them.
    sweep = ("debug=limit", "logger=csv", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    first = run_script("train.py", "-m", "model.optimizer.lr=0.001,0.002", *sweep, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    (tmp_path / "sweep" / "1" / "metrics.json").unlink()  # job 1 stopped after its last checkpoint
    again = run_script("train.py", "-m", "model.optimizer.lr=0.001,0.002", *sweep, cwd=tmp_path)
    assert again.returncode == 0 and "is finished (it has metrics.json)" in again.stderr, again.stderr[-3000:]
    assert "Restoring states from the checkpoint" in again.stdout + again.stderr
    assert (tmp_path / "sweep" / "1" / "metrics.json").exists()
    other = run_script("train.py", "-m", "model.optimizer.lr=0.05", *sweep, cwd=tmp_path)
    assert other.returncode == 1 and "these would change it: model.optimizer.lr=0.05" in other.stderr
    assert "model.optimizer.lr=0.001" in (tmp_path / "sweep" / "0" / ".hydra" / "overrides.yaml").read_text()


@pytest.mark.slow
def test_a_multirun_stopped_in_a_job_says_how_to_continue_all_of_it(tmp_path: Path) -> None:
    # Not `resume=<that job>`: it would finish that job alone, never run the others nor write the summary;
    # nor a placeholder for the overrides: a user who left them out ran job 0 alone, and nothing said so.
    sweep = tmp_path / "a sweep"  # a path to quote
    swept = ["model.optimizer.lr=0.001,0.002", "debug=limit", "logger=csv"]
    swept += stop_at("on_train_batch_end", step=1, dirpath=tmp_path)  # once: the first job
    typed = "hydra.sweep.subdir=${hydra.job.num}"  # Hydra's default: kept as typed (was resolved)
    stopped = run_script("train.py", "-m", *swept, typed, f"hydra.sweep.dir='{sweep}'", cwd=tmp_path)
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    said = continue_command(stopped.stdout + stopped.stderr)
    assert said[:2] == ["python", str(ROOT / "train.py")]  # the script as it was started
    assert said[2:] == [typed, "hydra.mode=MULTIRUN", *swept, f'hydra.sweep.dir="{sweep}"']
    assert not (sweep / "1").exists()
    again = run_script(*said[1:], cwd=tmp_path)  # the command printed, as pasted
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(json.loads((sweep / "summary.json").read_text())["jobs"]) == 2
