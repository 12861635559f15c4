"""A run directory never lies: resumed with its own config, one process at a time, nothing half-written."""

import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import (
    QUICK,
    ROOT,
    as_command,
    compose_config,
    logged_rows,
    metrics,
    run_dirs,
    run_script,
    script_env,
    stop_at,
)
from hydra import compose
from omegaconf import OmegaConf

from {{ cookiecutter.package_name }}.utils.runs import (
    EXIT_CODE,
    MAY_CHANGE,
    ConfigError,
    project_root,
    resume_overrides,
    run_id,
)

STOP_AT_STEP_2 = stop_at("on_train_batch_end", step=2)


def test_places_given_relative_or_with_a_home_folder_are_made_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """PROJECT_ROOT=~/x (.env) made a folder named ~ in the working directory, and a relative one stayed
    relative in the saved config; a relative data.root, read from another directory, said only its name."""
    from {{ cookiecutter.package_name }}.data.image_folder import ImageFolderDataModule

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROJECT_ROOT", "~/projects/x")
    assert project_root() == os.path.join(os.path.expanduser("~"), "projects", "x")
    monkeypatch.setenv("PROJECT_ROOT", "../y")
    assert project_root() == os.path.join(os.path.dirname(os.getcwd()), "y")
    monkeypatch.delenv("PROJECT_ROOT")
    assert project_root() == os.getcwd()
    with pytest.raises(ValueError, match=re.escape(f"data.root='{Path.cwd() / 'photos'}': no such folder")):
        _ = ImageFolderDataModule(root="photos").class_names


def snapshot(run: Path) -> dict[str, tuple[int, int]]:
    """Every file of a run, with its size and modification time."""
    return {
        str(p.relative_to(run)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in run.rglob("*")
        if p.is_file()
    }


@pytest.fixture
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with its own overrides, stopped by a signal in its first epoch."""
    cwd = tmp_path_factory.mktemp("stopped")
    result = run_script("train.py", *QUICK, "seed=3", "trainer.max_epochs=3", *STOP_AT_STEP_2, cwd=cwd)
    assert result.returncode == EXIT_CODE, result.stderr[-3000:]
    (run,) = run_dirs(cwd / "logs")
    return run


@pytest.mark.slow
def test_resume_continues_with_the_run_s_own_config_and_may_extend_it(stopped: Path, tmp_path: Path) -> None:
    before = snapshot(stopped)
    changed = run_script("train.py", f"resume={stopped}", "seed=4", "model.optimizer.lr=0.1", cwd=tmp_path)
    assert changed.returncode == 1
    assert "seed=4 model.optimizer.lr=0.1" in changed.stderr and "trainer.max_epochs" in changed.stderr
    assert snapshot(stopped) == before  # a refused resume changes nothing in the run
    # Stopped again as it starts: the command it prints (no max_epochs) continues the longer run.
    (stopped / ".signal-sent").unlink()  # the helpers signal once per run
    stop = "+hydra.callbacks.signal._target_=signal_helpers.SignalOnJobStart"
    longer = run_script("train.py", f"resume={stopped}", "trainer.max_epochs=4", stop, cwd=tmp_path)
    assert longer.returncode == EXIT_CODE, longer.stderr[-3000:]
    longer = run_script("train.py", f"resume={stopped}", cwd=tmp_path)
    assert longer.returncode == 0, longer.stderr[-3000:]
    config = (stopped / "config.yaml").read_text()
    assert "seed: 3\n" in config and "max_epochs: 4\n" in config
    last = torch.load(stopped / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["epoch"] == 3  # four epochs
    # The learning rate's schedule follows the new length: the cosine ends at epoch 4, not 3.
    assert last["lr_schedulers"][0]["T_max"] == 4 and last["lr_schedulers"][0]["last_epoch"] == 4
    assert metrics(stopped)["test/acc"] > 0
    # Finished: a second resume (a requeued job, say) does nothing and changes nothing, longer or not.
    before = snapshot(stopped)
    for longer in [], ["trainer.max_epochs=5"]:
        again = run_script("train.py", f"resume={stopped}", *longer, cwd=tmp_path)
        assert again.returncode == 0 and "is finished (it has metrics.json)" in again.stderr
    assert snapshot(stopped) == before
    # What it says to do instead: a new run from the finished one's weights, with a schedule of its own.
    words = shlex.split(re.search(r"Train on: python \S+ (.*)", again.stderr)[1])  # as pasted
    assert {"seed=3", "trainer.max_epochs=5"} <= set(words)  # the length asked for, not the run's
    hint = words[-1]
    assert hint == f'pretrained="{stopped}/checkpoints/last.ckpt"'  # quoted for Hydra too: spaces, ä
    on = run_script("train.py", *QUICK, "seed=3", hint, "trainer.max_epochs=5", cwd=tmp_path / "on")
    assert on.returncode == 0, on.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "on" / "logs")
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["epoch"] == 4 and last["lr_schedulers"][0]["T_max"] == 5 and metrics(run)["test/acc"] > 0
    # It trains: every weight moves (the finished schedule's learning rate, 0, would move none).
    finished = torch.load(stopped / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert all(not torch.equal(v, last["state_dict"][k]) for k, v in finished.items() if k.endswith("weight"))


def test_a_reduce_on_plateau_schedule_steps_on_the_validation_loss(tmp_path: Path) -> None:
    # Was Lightning's traceback: such a scheduler needs a monitor. A threshold no loss meets: 0.1x each epoch.
    plateau = ["model/scheduler=plateau", "model.scheduler.patience=0", "+model.scheduler.threshold=10"]
    result = run_script("train.py", *QUICK, *plateau, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    rows = logged_rows(run)
    assert [float(row["lr-AdamW"]) for row in rows if row["lr-AdamW"]] == pytest.approx([3e-3, 3e-4])


@pytest.mark.slow
def test_a_run_stopped_after_its_last_epoch_resumes_longer_on_the_new_schedule(tmp_path: Path) -> None:
    # Stopped in its test: its cosine has ended at learning rate 0. Resumed with more epochs, the rate
    # is the new length's cosine at the epoch reached (0.003 at epoch 0: half at 2 of 4), and it trains.
    stop = stop_at("on_test_batch_end")
    assert run_script("train.py", *QUICK, *stop, cwd=tmp_path).returncode == EXIT_CODE
    (run,) = run_dirs(tmp_path / "logs")
    ended = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    longer = run_script("train.py", f"resume={run}", "trainer.max_epochs=4", cwd=tmp_path)
    assert longer.returncode == 0, longer.stderr[-3000:]
    rows = logged_rows(run)
    rates = [float(row["lr-AdamW"]) for row in rows if row["lr-AdamW"]]
    assert rates == pytest.approx([0.003, 0.0015, 0.0015, 0.003 * (1 + math.cos(math.pi * 3 / 4)) / 2])
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["epoch"] == 3 and metrics(run)["test/acc"] > 0
    moved = [not torch.equal(v, last["state_dict"][k]) for k, v in ended.items() if "weight" in k]
    assert moved and all(moved)


@pytest.mark.slow
def test_a_resume_taking_back_epochs_or_steps_is_refused_and_any_schedule_resumes(tmp_path: Path) -> None:
    stop = stop_at("on_train_batch_end", step=9)  # in its third epoch
    steps = ["model.scheduler._target_=torch.optim.lr_scheduler.MultiStepLR", "~model.scheduler.T_max"]
    steps += ["+model.scheduler.milestones=[2,3]", "+model.scheduler.gamma=0.1"]  # saved as a Counter
    started = run_script("train.py", *QUICK, "trainer.max_epochs=4", *steps, *stop, cwd=tmp_path)
    assert started.returncode == EXIT_CODE, started.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    before = {k: v for k, v in snapshot(run).items() if k != "train.log"}  # Hydra's log records each start
    shorter = run_script("train.py", f"resume={run}", "trainer.max_epochs=1", cwd=tmp_path)
    assert shorter.returncode == 1 and "Traceback" not in shorter.stderr, shorter.stderr[-3000:]
    assert (
        "trainer.max_epochs=1: " in shorter.stderr and "interrupted.ckpt has begun 3 epochs" in shorter.stderr
    )
    # Fewer steps than trained: Lightning ended at once, and the stop's checkpoint (its last steps) went.
    fewer = run_script("train.py", f"resume={run}", "trainer.max_steps=8", cwd=tmp_path)
    assert fewer.returncode == 1 and "Traceback" not in fewer.stderr, fewer.stderr[-3000:]
    assert "trainer.max_steps=8: " in fewer.stderr and "interrupted.ckpt has trained 9 steps" in fewer.stderr
    assert {k: v for k, v in snapshot(run).items() if k != "train.log"} == before  # config, overrides, logs
    resumed = run_script("train.py", f"resume={run}", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = logged_rows(run)
    rates = [float(row["lr-AdamW"]) for row in rows if row.get("lr-AdamW")]  # both starts
    assert rates == pytest.approx([3e-3, 3e-3, 3e-4, 3e-5])


def first_start(run: Path, overrides: list[str]) -> Path:
    """A run's .hydra as its first start leaves it: the overrides, and the config they composed then."""
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(json.dumps(overrides))  # JSON is YAML
    typed = {"hydra": {"overrides": {"task": overrides, "hydra": []}}}
    (run / ".hydra" / "hydra.yaml").write_text(json.dumps(typed))
    with as_command("train", overrides):
        OmegaConf.save(compose("train", overrides), run / ".hydra" / "config.yaml")  # unresolved, as Hydra
    return run / ".hydra" / "config.yaml"


def test_a_resume_may_change_the_hardware_the_length_and_the_data_s_place_only(tmp_path: Path) -> None:
    config = first_start(tmp_path, ["seed=3", "trainer.max_epochs=3"])
    moved = ["trainer=gpu", "trainer.max_epochs=5", "trainer.devices=2", "strategy=ddp", "data.root=/new"]
    moved += ["data.path=/new.csv", "paths.data_dir=/data", "task_name=team", "logger=[]"]  # whose runs
    with as_command("train"):  # it composes the run's first config again: Hydra set up, as in train.py
        assert resume_overrides(tmp_path, ["resume=x", *moved]) == ["seed=3", *moved]
        # `+` where the default config lacks the key (data.path for digits), which the run's may have: `++`.
        added = ["+data.path=/b.csv", "++data.root=/c", "+trainer.max_time=9"]
        forced = ["++data.path=/b.csv", "++data.root=/c", "++trainer.max_time=9"]
        assert resume_overrides(tmp_path, added) == ["seed=3", "trainer.max_epochs=3", *forced]
        changes = ("seed=4", "trainer.gradient_clip_val=1.0", "trainer.precision=16-mixed", "data=csv")
        for changed in (*changes, "data.num_workers=2"):  # mid-epoch, a loader resumes on as many only
            with pytest.raises(ConfigError, match=re.escape(f"these would change it: {changed}.")) as refused:
                resume_overrides(tmp_path, ["trainer.devices=2", changed])
        # The refusal names all a resume may change (it left out extras, task_name and paths: a probe).
        assert all(key.split(".")[-1].strip("_") in str(refused.value) for key in MAY_CHANGE), MAY_CHANGE
        # Config files edited since the run started (they compose its overrides otherwise now): its resume
        # trained the edited config, silently (a walk's: another dropout and weight decay). Refused, named.
        then = OmegaConf.load(config)
        then.trainer.max_epochs, then.paths.log_dir, then.logger = 9, "/elsewhere", {}  # a resume may change
        OmegaConf.save(then, config)
        assert resume_overrides(tmp_path, []) == ["seed=3", "trainer.max_epochs=3"]
        then.model.optimizer.lr, then.trainer.gradient_clip_val = 0.5, 1.0  # what it trains
        OmegaConf.save(then, config)
        edits = r"change it: model \(configs/ edited\) trainer \(configs/ edited\)\."
        with pytest.raises(ConfigError, match=edits):
            resume_overrides(tmp_path, ["trainer.max_epochs=5"])


def test_a_run_keeps_its_w_b_id_when_it_moves(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    assert run_id(str(tmp_path / "run")) is None and run_id(None) is None  # before W&B's first start: new
    (tmp_path / "run" / "wandb" / "offline-run-20260101_000000-ab12cd34" / "files").mkdir(parents=True)
    (tmp_path / "run" / "wandb" / "latest-run").symlink_to("offline-run-20260101_000000-ab12cd34")
    moved = (tmp_path / "run").rename(tmp_path / "elsewhere")
    assert run_id(str(moved)) == "ab12cd34"
    # Copied as `cp -rL`, scp -r or a zip do: W&B's link latest-run became a folder (a walk: a new id).
    copied = Path(shutil.copytree(moved, tmp_path / "copy", symlinks=False))
    assert (copied / "wandb" / "latest-run").is_dir() and run_id(str(copied)) == "ab12cd34"


def test_resume_of_a_run_in_use_is_refused_naming_the_holder(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "train" / "runs" / "busy"
    first_start(run, [])
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = {"host": socket.gethostname(), "pid": holder.pid, "launch": "another", "since": "today"}
        (run / ".lock").write_text(json.dumps(lock))
        refused = run_script("train.py", "resume=busy", cwd=tmp_path)
        assert refused.returncode == 1
        assert f"in use by pid {holder.pid} on host {socket.gethostname()}" in refused.stderr
        assert f"if it died, delete {run}/.lock" in refused.stderr  # killed, or the run copied from there
        assert "no unfinished run" in run_script("train.py", "resume=latest", cwd=tmp_path).stderr
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_latest_skips_a_held_run_and_a_stale_lock_is_taken_over(stopped: Path, tmp_path: Path) -> None:
    runs = tmp_path / "logs" / "train" / "runs"
    runs.mkdir(parents=True)
    os.symlink(stopped, runs / "stopped")
    newer = runs / "newer"
    (newer / ".hydra").mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    try:
        lock = {"host": socket.gethostname(), "pid": holder.pid, "launch": "another", "since": "today"}
        (newer / ".lock").write_text(json.dumps(lock))
        (stopped / ".lock").write_text(json.dumps({**lock, "pid": dead.pid}))  # its process died
        result = run_script("train.py", "resume=latest", cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        assert (stopped / "metrics.json").exists() and not (newer / "metrics.json").exists()
        assert not (stopped / ".lock").exists()  # released at the end
    finally:
        holder.kill()
        holder.wait()


def test_resume_of_no_run_lists_the_runs_there_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "logs" / "train" / "runs" / "2026-01-01_00-00-00_000000" / ".hydra").mkdir(parents=True)
    result = run_script("train.py", "resume=no-such-run", cwd=tmp_path)
    assert result.returncode == 1
    assert (
        f"resume='no-such-run': not in {tmp_path / 'logs' / 'train' / 'runs'}" in result.stderr
        and "2026-01-01_00-00-00_000000" in result.stderr
    )
    assert [p.name for p in (tmp_path / "logs" / "train" / "runs").iterdir()] == [
        "2026-01-01_00-00-00_000000"
    ]


def test_a_start_that_fails_leaves_no_run_directory(tmp_path: Path) -> None:
    result = run_script("train.py", "data=image_folder", f"data.root={tmp_path / 'none'}", cwd=tmp_path)
    assert result.returncode == 1
    assert f"data.root='{tmp_path / 'none'}': no such folder" in result.stderr
    assert not run_dirs(tmp_path / "logs")


@pytest.mark.slow
def test_resume_skips_an_unreadable_checkpoint(tmp_path: Path) -> None:
    stopped = run_script("train.py", *QUICK, *STOP_AT_STEP_2, cwd=tmp_path)
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    (run / "checkpoints" / "interrupted.ckpt").write_bytes(b"not a checkpoint")
    resumed = run_script("train.py", f"resume={run}", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "interrupted.ckpt' is not a readable checkpoint" in resumed.stdout
    assert (run / "metrics.json").exists()


@pytest.mark.parametrize("entry", ["train", "eval", "predict", "export"])
def test_a_missing_corrupt_or_foreign_checkpoint_is_one_message_anywhere(entry: str, tmp_path: Path) -> None:
    """Each entry point's own function, as its command runs it (Hydra prints the message alone)."""
    from importlib import import_module

    from {{ cookiecutter.package_name }}.utils.runs import ConfigError

    function = {"train": "train", "eval": "evaluate", "predict": "predict", "export": "export"}[entry]
    run = getattr(import_module(f"{{ cookiecutter.package_name }}.{entry}"), function)
    broken = tmp_path / "broken.ckpt"
    broken.write_bytes(b"\x80\x02 truncated")
    foreign = tmp_path / "foreign.ckpt"  # another program's Lightning checkpoint, or weights alone
    torch.save({"state_dict": {}, "pytorch-lightning_version": "2.6", "hyper_parameters": {"lr": 1}}, foreign)
    cases = {
        str(broken): f"ckpt_path='{broken}' is not a readable checkpoint",
        str(foreign): f"ckpt_path='{foreign}': not a checkpoint of this project (no net config in it).",
        "/no/such.ckpt": "ckpt_path='/no/such.ckpt': no such checkpoint file.",
        "null": "ckpt_path is not set.",
    }
    for path, message in cases.items():
        if entry == "train" and path == "null":
            continue  # training needs no checkpoint
        overrides = [f"ckpt_path={path}", *([f"input={tmp_path}"] if entry == "predict" else [])]
        cfg = compose_config(entry, tmp_path / "run", overrides)
        with pytest.raises(ConfigError, match=re.escape(message)), as_command(entry, overrides):
            run(cfg)


@pytest.mark.slow
def test_a_non_finite_loss_stops_training_naming_the_step(tmp_path: Path) -> None:
    result = run_script("train.py", *QUICK, "model.optimizer.lr=1e30", "model.scheduler=null", cwd=tmp_path)
    assert result.returncode == 1
    assert "The training loss is nan at step" in result.stderr or "The training loss is inf" in result.stderr
    (run,) = run_dirs(tmp_path / "logs")  # kept: it says where training broke
    assert not (run / "metrics.json").exists()
    # resume=latest takes it (unfinished), and says that with no checkpoint its training starts over.
    again = run_script("train.py", "resume=latest", cwd=tmp_path)
    assert f"{run} has no checkpoint to continue from: its training starts over" in again.stdout
    assert again.returncode == 1 and "The training loss is" in again.stderr


def test_stop_signal_before_any_training_is_resumable_and_not_a_success(tmp_path: Path) -> None:
    env = script_env(tmp_path)
    process = subprocess.Popen(
        [sys.executable, ROOT / "train.py", *QUICK],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    while not run_dirs(tmp_path / "logs"):  # started: Hydra has made the run directory
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == EXIT_CODE, output[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    assert f"python {ROOT / 'train.py'} 'resume=\"{run}\"'" in output  # the script as started
