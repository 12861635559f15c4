"""Stop anywhere, resume exactly: a run stopped at any phase, then resumed, ends as one never stopped."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import (
    NOISE,
    QUICK,
    ROOT,
    assert_same_run,
    continue_command,
    logged_rows,
    metrics,
    run_dirs,
    run_script,
    script_env,
    stop_at,
)

from {{ cookiecutter.package_name }}.utils.runs import EXIT_CODE

# Where a signal arrives, as the Lightning hook that sends it (one: Hydra's start of the job),
# and the exit status it must give: 75 and resumable, or 0 where all the work was already done.
PHASES = {
    "start-up": (["+hydra.callbacks.signal._target_=signal_helpers.SignalOnJobStart"], EXIT_CODE),
    "setup": (stop_at("setup"), EXIT_CODE),
    "sanity check": (stop_at("on_sanity_check_start"), EXIT_CODE),
    "training": (stop_at("on_train_batch_end", step=6), EXIT_CODE),
    "validation": (stop_at("on_validation_batch_end"), EXIT_CODE),
    "checkpoint write": (stop_at("on_save_checkpoint"), EXIT_CODE),
    "between fit and test": (stop_at("on_fit_end"), EXIT_CODE),
    "test": (stop_at("on_test_batch_end"), EXIT_CODE),
    "teardown": (stop_at("on_test_end"), 0),
}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("uninterrupted")
    result = run_script("train.py", *QUICK, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = run_dirs(cwd / "logs")
    return run


@pytest.mark.slow
@pytest.mark.parametrize("phase", PHASES)
def test_a_run_stopped_at_any_phase_resumes_to_the_same_end(
    phase: str, uninterrupted: Path, tmp_path: Path
) -> None:
    overrides, status = PHASES[phase]
    stopped = run_script("train.py", *QUICK, *overrides, cwd=tmp_path, RUN_NAME="Ben's ä $HOME")  # to quote
    assert stopped.returncode == status, stopped.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    if status == EXIT_CODE:
        assert not (run / "metrics.json").exists()
        python, script, resume = continue_command(stopped.stdout)  # as a shell reads it pasted, then Hydra
        assert (python, script, resume) == ("python", str(ROOT / "train.py"), f'resume="{run}"')  # as run
        resumed = run_script(script, resume, cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        consoles = stopped.stdout + stopped.stderr + resumed.stdout + resumed.stderr
        assert not [word for word in NOISE if word in consoles], consoles
    assert_same_run(run, uninterrupted)


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["training", "test"])
def test_a_run_moved_while_stopped_resumes_where_it_is_now(
    phase: str, uninterrupted: Path, tmp_path: Path
) -> None:
    # Moved to another disk or machine (or copied) between its stop and its resume: the checkpoint
    # callbacks' state names files by absolute paths, which must follow the run to keep and test its best.
    stopped = run_script("train.py", *QUICK, *PHASES[phase][0], cwd=tmp_path)
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    moved = Path(shutil.move(run, tmp_path / "elsewhere"))
    for file in moved.glob("checkpoints/*.ckpt"):  # times as `cp -r` or scp leave them: in the copy's order
        os.utime(file, (0, 0) if file.name == "interrupted.ckpt" else None)  # (a walk: an older resumed)
    resumed = run_script("train.py", f"resume={moved}", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    if phase == "training":  # mid-epoch 2: its stop's checkpoint, not epoch 1's end (by step, not time)
        assert f"at {moved}/checkpoints/interrupted.ckpt" in resumed.stdout, resumed.stdout[-3000:]
    assert_same_run(moved, uninterrupted)


@pytest.mark.slow
def test_a_run_started_by_its_console_script_says_that_script_to_continue(
    uninterrupted: Path, tmp_path: Path
) -> None:
    # As pip writes a console script (`<slug>-train`). The command printed said `train.py`: not there.
    script, package = tmp_path / "bin" / "project-train", "{{ cookiecutter.package_name }}"
    script.parent.mkdir()
    script.write_text(f"import sys\nfrom {package}.train import main\nsys.exit(main())\n")
    stopped = run_script(str(script), *QUICK, *PHASES["training"][0], cwd=tmp_path)
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    assert continue_command(stopped.stdout)[:2] == ["python", str(script)]
    resumed = run_script(*continue_command(stopped.stdout)[1:], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_run(*run_dirs(tmp_path / "logs"), uninterrupted)


# Lightning's options that shape the epoch, each with state a stop in its middle must keep: gradients
# summed over batches (the stop waits for the optimizer's step), a validation before the epoch's end, the
# last validation's metrics in an epoch without one; and loader workers (data.num_workers, which the config
# advises raising), fetching ahead: in a second epoch they fetched the first epoch's order (a probe's find),
# and signalled with the run, as by `timeout` or SLURM, torch's workers died and failed it (another's).
# Each with the training step the stop comes before; the signal reaches the run's child processes too.
LOOPS = {
    "accumulated gradients": (["trainer.accumulate_grad_batches=3"], 2),
    "mid-epoch validation": (["trainer.val_check_interval=2"], 2),
    # The signal before a batch that a validation follows: the stop waits for it (a resume skipped it).
    "mid-epoch validation due": (["trainer.val_check_interval=2"], 1),
    "validation every other epoch": (["trainer.check_val_every_n_epoch=2", "trainer.max_epochs=3"], 10),
    "loader workers": (["data.num_workers=2"], 6),
}


@pytest.mark.slow
@pytest.mark.parametrize("loop", LOOPS)
def test_a_run_stopped_mid_epoch_resumes_to_the_same_end_with_each_loop_option(
    loop: str, tmp_path: Path
) -> None:
    overrides, step = LOOPS[loop]
    reference = run_script("train.py", *QUICK, *overrides, cwd=tmp_path / "a")
    assert reference.returncode == 0, reference.stderr[-3000:]
    stop = stop_at("on_train_batch_start", step=step, children=True)
    stopped = run_script("train.py", *QUICK, *overrides, *stop, cwd=tmp_path / "b")
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "b" / "logs")
    assert run_script("train.py", f"resume={run}", cwd=tmp_path / "b").returncode == 0
    assert_same_run(run, run_dirs(tmp_path / "a" / "logs")[0])


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_a_run_killed_after_an_epoch_resumes_from_its_end_to_the_same_end(
    workers: int, tmp_path: Path
) -> None:
    # SIGKILL as the second epoch starts: last.ckpt holds the first's end. With workers, the resumed run
    # fetched the first epoch's order again (a probe: test/acc 0.963 against 0.978, no warning).
    overrides = (*QUICK, "trainer.max_epochs=3", f"data.num_workers={workers}")
    reference = run_script("train.py", *overrides, cwd=tmp_path / "a")
    assert reference.returncode == 0, reference.stderr[-3000:]
    kill = stop_at("on_train_epoch_start", step=4, signal="SIGKILL")
    assert run_script("train.py", *overrides, *kill, cwd=tmp_path / "b").returncode == -signal.SIGKILL
    (run,) = run_dirs(tmp_path / "b" / "logs")
    resumed = run_script("train.py", "resume=latest", cwd=tmp_path / "b")
    assert f"checkpoint path at {run / 'checkpoints' / 'last.ckpt'}" in resumed.stdout, resumed.stdout[-3000:]
    assert_same_run(run, run_dirs(tmp_path / "a" / "logs")[0])


# Where a stop or a kill leaves a ReduceLROnPlateau schedule (`model/scheduler=plateau`), stepped by
# Lightning after the epoch's checkpoints and not in an epoch resumed: each resume lowered the rate an epoch
# late (a probe: test/acc 0.29 against 0.54). Here it lowers it every epoch: val/loss never improves 100-fold.
PLATEAU = (*QUICK, "trainer.max_epochs=3", "model/scheduler=plateau", "model.scheduler.patience=0")
PLATEAU += ("+model.scheduler.threshold=100",)
PLATEAU_STOPS = {
    "mid-epoch": stop_at("on_train_batch_start", step=6),
    "at an epoch's end": stop_at("on_validation_batch_end", step=4),
    "killed after an epoch": stop_at("on_train_epoch_start", step=4, signal="SIGKILL"),
}


@pytest.fixture(scope="module")
def plateau_uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("plateau")
    reference = run_script("train.py", *PLATEAU, cwd=cwd)
    assert reference.returncode == 0, reference.stderr[-3000:]
    (expected,) = run_dirs(cwd / "logs")
    rates = [float(row["lr-AdamW"]) for row in logged_rows(expected) if row["lr-AdamW"]]
    assert rates == pytest.approx([rates[0], rates[0] / 10, rates[0] / 100]), rates  # lowered at each end
    return expected


@pytest.mark.slow
@pytest.mark.parametrize("stop", PLATEAU_STOPS)
def test_a_plateau_schedule_resumes_to_the_same_end(
    stop: str, plateau_uninterrupted: Path, tmp_path: Path
) -> None:
    stopped = run_script("train.py", *PLATEAU, *PLATEAU_STOPS[stop], cwd=tmp_path)
    assert stopped.returncode in (EXIT_CODE, -signal.SIGKILL), stopped.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    assert run_script("train.py", f"resume={run}", cwd=tmp_path).returncode == 0
    assert_same_run(run, plateau_uninterrupted)


@pytest.mark.slow
def test_a_run_stopped_early_resumes_to_the_same_end(tmp_path: Path) -> None:
    # Early stopping that never sees val/loss improve by 100: the third epoch of six is the last. A stop
    # before it keeps the patience counted; one after it (before the test) must not train a fourth epoch.
    never_better = ("monitor=val/loss", "mode=min", "min_delta=100", "patience=2")
    early = [*QUICK, "trainer.max_epochs=6", "callbacks=[default,early_stopping]"]
    early += [f"callbacks.early_stopping.{setting}" for setting in never_better]
    reference = run_script("train.py", *early, cwd=tmp_path / "a")
    assert reference.returncode == 0, reference.stderr[-3000:]
    (expected,) = run_dirs(tmp_path / "a" / "logs")
    assert torch.load(expected / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 2
    for where, stop in {
        "third epoch": stop_at("on_train_epoch_start", step=8),
        "fit end": stop_at("on_fit_end"),
        "test": stop_at("on_test_batch_end"),
    }.items():
        stopped = run_script("train.py", *early, *stop, cwd=tmp_path / where)
        assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
        (run,) = run_dirs(tmp_path / where / "logs")
        resumed = run_script("train.py", f"resume={run}", cwd=tmp_path / where)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert_same_run(run, expected)
    # A new run from its checkpoint (ckpt_path=) trains on: one epoch, then early stopping ends it again.
    last = expected / "checkpoints" / "last.ckpt"
    longer = run_script("train.py", *early, f"ckpt_path={last}", cwd=tmp_path / "b")
    assert longer.returncode == 0, longer.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "b" / "logs")
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 3


@pytest.mark.slow
def test_a_run_started_from_a_checkpoint_resumes_from_its_own(uninterrupted: Path, tmp_path: Path) -> None:
    # Trained longer from a finished run's last checkpoint, and stopped in its third epoch: a resume (or
    # a requeue) continues from the new run's interrupted.ckpt, not again from the one it started from.
    longer = (f"ckpt_path={uninterrupted / 'checkpoints' / 'last.ckpt'}", *QUICK, "trainer.max_epochs=4")
    reference = run_script("train.py", *longer, cwd=tmp_path / "a")
    assert reference.returncode == 0, reference.stderr[-3000:]
    stop = stop_at("on_train_batch_end", step=10)
    stopped = run_script("train.py", *longer, *stop, cwd=tmp_path / "b")
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "b" / "logs")
    resumed = run_script("train.py", f"resume={run}", cwd=tmp_path / "b")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    restored = f"Restoring states from the checkpoint path at {run / 'checkpoints' / 'interrupted.ckpt'}"
    assert restored in resumed.stdout + resumed.stderr
    assert_same_run(run, run_dirs(tmp_path / "a" / "logs")[0])


@pytest.mark.slow
def test_a_fine_tuning_run_stopped_after_its_backbone_thawed_resumes_to_the_same_end(
    uninterrupted: Path, tmp_path: Path
) -> None:
    # Lightning's BackboneFinetuning freezes the backbone at every start and thaws it in its epoch alone:
    # resumed after that epoch, the backbone trained no more, and the metrics differed.
    tune = ["experiment=finetune", f"pretrained={uninterrupted / 'checkpoints' / 'last.ckpt'}", *QUICK]
    tune += ["trainer.max_epochs=3", "callbacks.backbone_finetuning.unfreeze_backbone_at_epoch=1"]
    reference = run_script("train.py", *tune, cwd=tmp_path / "a")
    assert reference.returncode == 0, reference.stderr[-3000:]
    for where, stop in {"in its thaw epoch": 6, "after it": 9}.items():
        stopped = run_script(
            "train.py", *tune, *stop_at("on_train_batch_end", step=stop), cwd=tmp_path / where
        )
        assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
        (run,) = run_dirs(tmp_path / where / "logs")
        resumed = run_script("train.py", f"resume={run}", cwd=tmp_path / where)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert_same_run(run, run_dirs(tmp_path / "a" / "logs")[0])


@pytest.mark.slow
def test_ddp_run_with_one_rank_signalled_stops_every_rank_and_resumes_to_the_same_end(tmp_path: Path) -> None:
    ddp = ("trainer.accelerator=cpu", "trainer.devices=2", "strategy=ddp", "data.batch_size=32", *QUICK)
    reference = run_script("train.py", *ddp, cwd=tmp_path / "a", timeout=600)
    assert reference.returncode == 0, reference.stderr[-3000:]
    # Rank 1 alone, in the middle of the second epoch: alone it would wait for rank 0 forever.
    only_rank_1 = stop_at("on_train_batch_end", step=6, rank=1)
    stopped = run_script("train.py", *ddp, *only_rank_1, cwd=tmp_path / "b", timeout=600)
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "b" / "logs")
    assert torch.load(run / "checkpoints" / "interrupted.ckpt", weights_only=True)["global_step"] == 6
    # Resumed on one device, the rest of that epoch cannot be served as two would have: said, not hidden.
    shutil.copytree(run, tmp_path / "copy")
    alone = run_script("train.py", f"resume={tmp_path / 'copy'}", "trainer.devices=1", cwd=tmp_path / "b")
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert "Saved mid-epoch on 2 devices: its rest repeats or skips" in alone.stdout + alone.stderr
    resumed = run_script("train.py", f"resume={run}", cwd=tmp_path / "b", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_run(run, run_dirs(tmp_path / "a" / "logs")[0])


@pytest.mark.slow
@pytest.mark.parametrize("when", ["after the last epoch", "as the last epoch starts"])
def test_a_kill_keeps_the_best_validation_accuracy(when: str, tmp_path: Path) -> None:
    # A learning rate so high that the last epoch is not the best one. Killed as it starts, the resumed run
    # trains it and must remember the best before it (val_acc_best's state, persistent: a probe found
    # nothing failed without it).
    lr = "model.optimizer.lr={{ '0.2' if cookiecutter.example == 'digits' else '0.5' }}"  # seeded: the same each run
    overrides = [*QUICK, "trainer.max_epochs=4", lr, "model.scheduler=null"]
    reference = run_script("train.py", *overrides, cwd=tmp_path / "a")
    assert reference.returncode == 0, reference.stderr[-3000:]
    (reference_run,) = run_dirs(tmp_path / "a" / "logs")
    best = metrics(reference_run)
    if best["val/acc_best"] == best["val/acc"]:  # on data of yours (test_models checks what is saved)
        pytest.skip(f"{lr}: the last epoch is the best on this data: a higher rate may make it not")
    rows = [row for row in logged_rows(reference_run) if row["val/acc"]]  # each epoch: the best so far
    so_far = [max(float(row["val/acc"]) for row in rows[: epoch + 1]) for epoch in range(len(rows))]
    assert [float(row["val/acc_best"]) for row in rows] == pytest.approx(so_far) and len(rows) == 4
    last = {"hook": "on_train_epoch_start", "step": 12}  # 3 epochs of 4 steps (QUICK)
    kill = stop_at(signal="SIGKILL", **({"hook": "on_train_end"} if when.startswith("after") else last))
    killed = run_script("train.py", *overrides, *kill, cwd=tmp_path / "b")
    assert killed.returncode == -signal.SIGKILL
    (run,) = run_dirs(tmp_path / "b" / "logs")
    resumed = run_script("train.py", "resume=latest", cwd=tmp_path / "b")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert metrics(run) == best


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once(tmp_path: Path) -> None:
    env = script_env(tmp_path)
    stall = ["+callbacks.stall._target_=signal_helpers.Stall", "+callbacks.stall.dirpath=${paths.output_dir}"]
    command = [sys.executable, ROOT / "train.py", *QUICK, *stall]
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    while not list(tmp_path.glob("logs/train/runs/*/.stalled")):  # stuck in a step: no safe point soon
        assert process.poll() is None
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)  # noted: the run would stop after this step
    time.sleep(1)
    assert process.poll() is None  # still in its step
    process.send_signal(signal.SIGINT)  # stop now
    started = time.monotonic()
    assert process.wait(timeout=120) not in (0, EXIT_CODE)
    assert time.monotonic() - started < 60
