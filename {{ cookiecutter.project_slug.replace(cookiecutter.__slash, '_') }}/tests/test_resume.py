"""A stopped run continues where it stopped, and ends exactly as if it had never stopped.

Signals are sent by the run itself at a chosen step (tests/signal_helpers.py), through the
same handlers `kill`, Ctrl+C or SLURM reach.
"""

import csv
import json
import os
import stat
from pathlib import Path

import hydra
import pytest
import torch
from conftest import compose_config, run_script

from {{ cookiecutter.package_name }}.callbacks.preemption import EXIT_CODE
from {{ cookiecutter.package_name }}.utils.errors import ConfigError
from {{ cookiecutter.package_name }}.utils.resume import check_fits

EPOCHS = 2
COMMON = ("logger=csv", f"trainer.max_epochs={EPOCHS}", "callbacks.progress_bar=null")


def train(cwd: Path, *overrides: str, **env: str):
    return run_script("train.py", *COMMON, *overrides, cwd=cwd, **env)


def output(result) -> str:
    """What the run printed: Hydra logs to stdout, Python warnings and errors go to stderr."""
    return result.stdout + result.stderr


def signal_at(step: int, name: str = "SIGTERM") -> tuple[str, ...]:
    prefix = "+callbacks.send_signal"
    return (
        f"{prefix}._target_=signal_helpers.SendSignalAt",
        f"{prefix}.step={step}",
        f"{prefix}.signal={name}",
    )


def run_dir(cwd: Path, name: str) -> Path:
    return cwd / "logs" / "train" / "runs" / name


def metrics(run: Path) -> dict[str, float]:
    return json.loads((run / "metrics.json").read_text())


def weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"]


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> int:
    """Training batches per epoch of the default data."""
    datamodule = hydra.utils.instantiate(compose_config("train", tmp_path_factory.mktemp("data")).data)
    datamodule.setup("fit")
    return len(datamodule.train_dataloader())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("whole")
    result = train(cwd, RUN_NAME="whole")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir(cwd, "whole")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["epoch_end", "mid_epoch"])
def test_stopped_and_resumed_run_ends_exactly_like_an_uninterrupted_one(
    where: str, batches: int, uninterrupted: Path, tmp_path: Path
) -> None:
    # At the last batch of the first epoch; or halfway through the last epoch, so that its
    # averaged training metrics span the restart.
    step = batches if where == "epoch_end" else batches + batches // 2
    stopped = train(tmp_path, *signal_at(step), RUN_NAME="stopped")
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    run = run_dir(tmp_path, "stopped")
    assert (run / "checkpoints" / "interrupted.ckpt").is_file()
    assert not (run / "metrics.json").exists()
    assert "resume=" in output(stopped)

    resumed = train(tmp_path, "resume=stopped")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Continuing" in output(resumed) and "interrupted.ckpt" in output(resumed)
    assert metrics(run) == metrics(uninterrupted)
    expected, got = (
        weights(uninterrupted / "checkpoints" / "last.ckpt"),
        weights(run / "checkpoints" / "last.ckpt"),
    )
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[key], got[key]) for key in expected)
    # One metrics.csv holds both parts; each start's config is kept.
    with (run / "csv" / "metrics.csv").open() as file:
        validated = [row["epoch"] for row in csv.DictReader(file) if row.get("val/acc")]
    assert validated == [str(epoch) for epoch in range(EPOCHS)]
    assert (run / ".hydra" / "run_info.json").is_file()
    assert len(list((run / ".hydra").glob("resumed-*/run_info.json"))) == 1


@pytest.mark.slow
def test_interrupt_and_slurm_warning_stop_with_a_checkpoint_and_requeue(tmp_path: Path) -> None:
    # A fake scontrol records the requeue; the requeued job has the same id, so the same directory.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scontrol.log"}\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    slurm = {
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NAME": "train",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }

    first = train(tmp_path, *signal_at(3, "SIGUSR1"), **slurm)
    assert first.returncode == EXIT_CODE, first.stderr[-3000:]
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]
    run = run_dir(tmp_path, "slurm-4242")
    assert (run / "checkpoints" / "interrupted.ckpt").is_file()

    requeued = train(tmp_path, **slurm)  # no resume=: the job's directory already has checkpoints
    assert requeued.returncode == 0, requeued.stderr[-3000:]
    assert "Continuing" in output(requeued)
    assert metrics(run)["test/acc"] > 0.5

    interrupted = train(tmp_path, *signal_at(2, "SIGINT"), RUN_NAME="ctrl-c")
    assert interrupted.returncode == EXIT_CODE, interrupted.stderr[-3000:]
    assert (run_dir(tmp_path, "ctrl-c") / "checkpoints" / "interrupted.ckpt").is_file()
    assert not (tmp_path / "scontrol.log").read_text().count("\n") > 1  # only SLURM's warning requeues


@pytest.mark.slow
def test_kill_during_a_checkpoint_write_keeps_the_previous_one(tmp_path: Path) -> None:
    # SIGKILL halfway through writing last.ckpt at the end of the second epoch.
    killed = run_script(
        "train.py", *COMMON, cwd=tmp_path, launcher=["-m", "signal_helpers"],
        KILL_DURING_SAVE="last.ckpt:2", RUN_NAME="killed",
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-3000:]
    run = run_dir(tmp_path, "killed")
    first_last = run / "checkpoints" / "last.ckpt"
    assert torch.load(first_last, weights_only=True)["epoch"] == 0  # intact, from the first epoch
    assert list((run / "checkpoints").glob(".last.ckpt.tmp-*"))  # the partial write, beside it

    resumed = train(tmp_path, "resume=latest")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert metrics(run)["test/acc"] > 0.5


@pytest.mark.slow
def test_resume_skips_unreadable_checkpoints_and_leaves_finished_runs_alone(
    batches: int, tmp_path: Path
) -> None:
    stopped = train(tmp_path, *signal_at(batches + 3), RUN_NAME="stopped")
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    run = run_dir(tmp_path, "stopped")
    newest = run / "checkpoints" / "interrupted.ckpt"
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated, as by a full disk

    resumed = train(tmp_path, f"resume={run}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Skipping unreadable checkpoint {newest}" in output(resumed)
    finished = metrics(run)

    again = train(tmp_path, "resume=stopped")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "finished run" in output(again) and "nothing to do" in output(again)
    assert metrics(run) == finished

    # A new run from this run's checkpoint writes only into its own directory.
    before = {p: p.read_bytes() for p in (run / "checkpoints").iterdir()}
    follow_up = train(
        tmp_path, f"ckpt_path={run}/checkpoints/last.ckpt", "trainer.max_epochs=3", RUN_NAME="next"
    )
    assert follow_up.returncode == 0, follow_up.stderr[-3000:]
    assert {p: p.read_bytes() for p in (run / "checkpoints").iterdir()} == before
    assert (run_dir(tmp_path, "next") / "checkpoints" / "last.ckpt").is_file()


def test_resume_names_what_it_cannot_find(tmp_path: Path) -> None:
    missing = train(tmp_path, "resume=no-such-run")
    assert missing.returncode == 1
    assert "resume='no-such-run': no such run directory" in missing.stderr
    assert "Traceback" not in missing.stderr

    latest = train(tmp_path, "resume=latest")
    assert latest.returncode == 1
    assert "resume=latest: no unfinished run with a checkpoint" in latest.stderr


@pytest.mark.slow
def test_resume_without_a_usable_checkpoint_says_so(tmp_path: Path) -> None:
    (run_dir(tmp_path, "empty") / "checkpoints").mkdir(parents=True)
    empty = train(tmp_path, "resume=empty")
    assert empty.returncode == 1
    assert "holds no checkpoint to continue from" in empty.stderr

    broken = run_dir(tmp_path, "broken") / "checkpoints" / "last.ckpt"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"\0" * 100)
    result = train(tmp_path, "resume=broken")
    assert result.returncode == 1
    assert f"none of its checkpoints can be read ({broken})" in result.stderr
    assert f"Skipping unreadable checkpoint {broken}" in output(result)


@pytest.mark.slow
def test_unreadable_checkpoint_file_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken.ckpt"
    broken.write_bytes(b"not a checkpoint")
    result = train(tmp_path, f"ckpt_path={broken}")
    assert result.returncode == 1
    assert f"ckpt_path={broken}: not a readable checkpoint" in result.stderr
    assert "Traceback" not in result.stderr


def test_checkpoint_of_another_architecture_names_the_mismatching_keys(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    run, _ = trained_run
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    other = compose_config("train", tmp_path, ["model.num_classes=3", "model.class_names=null"])
    with pytest.raises(ConfigError, match=r"does not fit the configured model \(other shapes: net\.head"):
        check_fits(hydra.utils.instantiate(other.model), checkpoint, "last.ckpt")
    check_fits(hydra.utils.instantiate(compose_config("train", tmp_path).model), checkpoint, "last.ckpt")


@pytest.mark.slow
def test_non_finite_loss_stops_training_and_keeps_the_last_good_checkpoint(
    batches: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from {{ cookiecutter.package_name }}.models.classifier import Classifier
    from {{ cookiecutter.package_name }}.train import train as train_in_process
    from {{ cookiecutter.package_name }}.utils.errors import TrainingError

    bad_step = batches + 2
    real_step = Classifier.training_step

    def training_step(self: Classifier, batch, batch_idx: int) -> torch.Tensor:
        loss = real_step(self, batch, batch_idx)
        return loss * float("nan") if self.global_step == bad_step else loss

    monkeypatch.setattr(Classifier, "training_step", training_step)
    cfg = compose_config("train", tmp_path, COMMON)
    with pytest.raises(
        TrainingError, match=f"The training loss is nan at step {bad_step} \\(epoch 1, batch 2\\)"
    ):
        train_in_process(cfg)
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["epoch"] == 0
    assert all(
        torch.isfinite(value).all() for value in last["state_dict"].values() if value.is_floating_point()
    )
    assert not (tmp_path / "checkpoints" / "interrupted.ckpt").exists()


def test_non_finite_loss_is_caught_before_a_checkpoint_in_the_middle_of_the_check_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The losses are read back every 32 steps; a checkpoint due before that checks them first.
    from {{ cookiecutter.package_name }}.models.classifier import Classifier
    from {{ cookiecutter.package_name }}.train import train as train_in_process
    from {{ cookiecutter.package_name }}.utils.errors import TrainingError

    real_step = Classifier.training_step

    def training_step(self: Classifier, batch, batch_idx: int) -> torch.Tensor:
        loss = real_step(self, batch, batch_idx)
        return loss * float("inf") if self.global_step == 1 else loss

    monkeypatch.setattr(Classifier, "training_step", training_step)
    last = "callbacks.last_checkpoint"
    every_3_steps = [f"{last}.every_n_epochs=null", f"+{last}.every_n_train_steps=3"]
    cfg = compose_config("train", tmp_path, [*COMMON, *every_3_steps])
    # The first bad step is named, not the later ones its broken weights made non-finite too.
    with pytest.raises(TrainingError, match=r"The training loss is inf at step 1 \(epoch 0, batch 1\)"):
        train_in_process(cfg)
    assert not list(tmp_path.rglob("*.ckpt*"))
{%- if cookiecutter.__wandb == 'True' %}


@pytest.mark.slow
def test_resumed_run_appends_to_the_same_wandb_run(tmp_path: Path) -> None:
    tracked = ("logger=wandb", f"trainer.max_epochs={EPOCHS}")
    stopped = run_script("train.py", *tracked, *signal_at(5), cwd=tmp_path, RUN_NAME="tracked")
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    run = run_dir(tmp_path, "tracked")
    first_id = json.loads((run / "logger_runs.json").read_text())["wandb"]

    resumed = run_script("train.py", *tracked, "resume=tracked", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    parts = sorted(run.glob("wandb/offline-run-*"))
    assert len(parts) == 2
    assert all(part.name.endswith(f"-{first_id}") for part in parts)  # one W&B run, in two parts
    assert json.loads((run / "logger_runs.json").read_text())["wandb"] == first_id
{%- endif %}
