"""SLURM: the sbatch script and the submitit launcher, composed here and run on a real cluster.

The tests marked `slurm` submit jobs to a single-node cluster that they start themselves
(tests/slurm_cluster.py): they need root and SLURM's daemons (apt-get install slurm-wlm munge),
skip where those are missing, and fail instead where the variable CI is set. Run them alone with
`python -m pytest -m slurm`. Their trainings are tiny; each is compared with the same training
run here without SLURM, to the bit.
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from conftest import CONFIG_MODULE, ROOT, assert_same_run, compose_config, free_port, run_script, script_env
from slurm_cluster import ENDED, Cluster, started_cluster, unavailable

SBATCH = ROOT / "scripts" / "slurm" / "train.sbatch"
# Two epochs of six training batches, CSV logs: seconds per run.
TINY = (
    "logger=csv",
    "trainer.max_epochs=2",
    "+trainer.limit_train_batches=6",
    "+trainer.limit_val_batches=2",
    "+trainer.limit_test_batches=2",
    "callbacks.progress_bar=null",
)
# One torch thread in every process, so a job and the run it is compared with compute alike.
THREADS = {"OMP_NUM_THREADS": "1"}
# The step after which a job waits for the scheduler's signal (mid-way through the first epoch).
PAUSE_STEP = 3


def test_sbatch_script_is_valid_bash_and_runs_train_py() -> None:
    assert subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True).returncode == 0
    text = SBATCH.read_text()
    command = re.search(r"^srun (?:--\S+ )*python (\S+)", text, re.MULTILINE)
    assert command and (ROOT / command.group(1)).is_file()
    assert "--signal=USR1@" in text
    # CPU and GPU nodes alike: no GPU asked for or assumed unless the user says so.
    assert not re.search(r"^#SBATCH --gpus", text, re.MULTILINE) and "trainer=gpu" not in text


def test_slurm_launcher_has_the_cluster_settings(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose("train", overrides=["hydra/launcher=slurm"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    for key in (
        "partition",
        "nodes",
        "gpus_per_node",
        "tasks_per_node",
        "cpus_per_task",
        "mem_gb",
        "timeout_min",
    ):
        assert key in launcher
    assert compose_config("train", tmp_path).trainer.num_nodes == 1
    # The jobs' allocation follows the trainer: one task per device, on every node.
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        overrides = ["hydra/launcher=slurm", "trainer.devices=4", "trainer.num_nodes=2"]
        launcher = compose("train", overrides=overrides, return_hydra_config=True).hydra.launcher
    assert (launcher.tasks_per_node, launcher.nodes, launcher.gpus_per_node) == (4, 2, None)
    assert launcher.additional_parameters.signal == f"USR1@{launcher.signal_delay_s}"


def test_slurm_launcher_without_a_scheduler_says_so(tmp_path: Path) -> None:
    # No sbatch on PATH, as on a laptop: one message, no traceback, nothing written.
    empty = tmp_path / "bin"
    empty.mkdir()
    result = run_script("train.py", "-m", "hydra/launcher=slurm", "debug=fdr", cwd=tmp_path, PATH=str(empty))
    assert result.returncode == 1
    assert "no SLURM scheduler found" in result.stderr and "hydra/launcher=submitit_local" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "logs").exists()
    # SLURM's commands without a cluster to reach (no configuration, or its controller down).
    fatal = "scontrol: fatal: Could not establish a configuration source"
    for name, says in (("sbatch", ""), ("scontrol", fatal)):
        (command := empty / name).write_text(f"#!/bin/sh\necho '{says}' >&2\nexit 1\n")
        command.chmod(0o755)
    arguments = ["-m", "hydra/launcher=slurm", "debug=fdr"]
    result = run_script("train.py", *arguments, cwd=tmp_path, PATH=f"{empty}:/bin")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "no SLURM scheduler found here (`scontrol ping`: scontrol: fatal: Could not" in result.stderr
    assert not (tmp_path / "logs").exists()
    # The tasks per node are trainer.devices: auto or a list of indices failed with OmegaConf's traceback.
    for devices in ("auto", "[0,1]", "-1"):
        result = run_script("train.py", *arguments, f"trainer.devices={devices}", cwd=tmp_path)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        said = f"trainer.devices={devices.replace(',', ', ')}: on SLURM, one task per device starts on each"
        assert said in result.stderr and "such as trainer.devices=4" in result.stderr
        assert not (tmp_path / "logs").exists()


@pytest.mark.slow
def test_submitit_local_launcher_runs_a_job(tmp_path: Path) -> None:
    result = run_script(
        "train.py", "-m", "hydra/launcher=submitit_local", "debug=fdr", "logger=csv", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((tmp_path / "logs" / "debug" / "multiruns").glob("*/0/metrics.json"))


# ---- On a real cluster ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    reason = unavailable()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, and the SLURM cluster cannot start here: {reason}")
        pytest.skip(f"no SLURM cluster can start here: {reason}")
    with started_cluster() as started:
        yield started


def job_env(cluster: Cluster, cwd: Path) -> dict[str, str]:
    """What a job gets from the shell that submits it (sbatch passes the environment on)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLURM_", "SBATCH_", "SRUN_")) and key not in ("RUN_NAME", "HYDRA_FULL_ERROR")
    }
    return {
        **env,
        **cluster.env,
        **THREADS,
        # `python` in the script is this interpreter; the project and tests/ are importable.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
        "PROJECT_ROOT": str(cwd),
        "WANDB_MODE": "offline",
        # Lightning's port under SLURM is 15000 + the job id's last digits: the same in two test
        # clusters on one host.
        "MASTER_PORT": str(free_port()),
    }


def sbatch(cluster: Cluster, cwd: Path, *overrides: str, tasks: int = 1) -> str:
    """Submit scripts/slurm/train.sbatch from the project root, as its header says; its logs go to `cwd`."""
    options = [f"--ntasks-per-node={tasks}", "--cpus-per-task=1", "--mem=1G", f"--output={cwd}/slurm-%j.out"]
    result = cluster.command(
        "sbatch", "--parsable", *options, str(SBATCH), *TINY, *overrides, cwd=ROOT, env=job_env(cluster, cwd)
    )
    return result.stdout.strip().split(";")[0]


def job_output(cwd: Path, job_id: str) -> str:
    path = cwd / f"slurm-{job_id}.out"
    return path.read_text() if path.exists() else ""


def ended(record: dict[str, str]) -> tuple[str, str, str]:
    """How a job ended: its state, exit code (status:signal) and how often it was requeued."""
    return record["JobState"], record["ExitCode"], record["Restarts"]


def only_run(cwd: Path) -> Path:
    runs = [p for p in (cwd / "logs" / "train" / "runs").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def local_run(cwd: Path, *overrides: str) -> Path:
    """The same training on this machine, without SLURM: what a job must reproduce."""
    result = run_script("train.py", *TINY, *overrides, cwd=cwd, RUN_NAME="local", **THREADS)
    assert result.returncode == 0, result.stderr[-3000:]
    return cwd / "logs" / "train" / "runs" / "local"


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return local_run(tmp_path_factory.mktemp("local"), "trainer.accelerator=cpu")


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("local_ddp")
    return local_run(cwd, "trainer.accelerator=cpu", "trainer.devices=2", "strategy=ddp")


@pytest.fixture(scope="module")
def ddp_job(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    """`sbatch --ntasks-per-node=2 scripts/slurm/train.sbatch strategy=ddp`, run to its end."""
    cwd = tmp_path_factory.mktemp("ddp_job")
    job_id = sbatch(cluster, cwd, "strategy=ddp", tasks=2)
    return cwd, job_id, cluster.wait(job_id)


@pytest.mark.slow
@pytest.mark.slurm
def test_sbatch_trains_with_ddp_over_srun_into_one_run_directory(ddp_job, two_processes: Path) -> None:
    cwd, job_id, record = ddp_job
    output = job_output(cwd, job_id)
    assert ended(record) == ("COMPLETED", "0:0", "0"), output[-3000:]
    run = only_run(cwd)
    assert run.name == f"slurm-{job_id}"
    assert len(list(cwd.rglob("metrics.json"))) == 1
    # Two ranks over srun, the same as two processes started by Lightning here, to the bit.
    assert_same_run(run, two_processes)


@pytest.mark.slow
@pytest.mark.slurm
def test_a_finished_job_requeued_does_nothing_and_exits_0(cluster: Cluster, ddp_job) -> None:
    cwd, job_id, _ = ddp_job
    run = only_run(cwd)
    before = {p: p.read_bytes() for p in [run / "metrics.json", *(run / "checkpoints").iterdir()]}
    cluster.command("scontrol", "requeue", job_id)
    record = cluster.wait(job_id, restarts=1)
    output = job_output(cwd, job_id)
    assert ended(record) == ("COMPLETED", "0:0", "1"), output[-3000:]
    assert {p: p.read_bytes() for p in [run / "metrics.json", *(run / "checkpoints").iterdir()]} == before


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a node without a GPU")
def test_a_job_that_asks_for_a_gpu_on_a_node_without_one_fails_rather_than_train_on_its_cpus(
    cluster: Cluster, tmp_path: Path
) -> None:
    job_id = sbatch(cluster, tmp_path, "trainer=gpu")
    record, output = cluster.wait(job_id), job_output(tmp_path, job_id)
    assert ended(record)[:2] == ("FAILED", "1:0"), output[-3000:]
    assert "No supported gpu backend found" in output and not list(tmp_path.rglob("*.ckpt"))


@pytest.mark.slow
@pytest.mark.slurm
def test_each_srun_of_a_job_trains_a_run_of_its_own_and_a_requeue_finds_them(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Two trainings in one job (`srun python train.py ...; srun python train.py ...`): the second,
    step 1, is `slurm-<job>.1`, not the first run found finished (or, with other overrides, refused
    as a resume); the job requeued counts its steps from 0 again and each finds its own run ended."""
    srun = shlex.join(["srun", "python", "train.py", *TINY, "trainer.max_epochs=1"])
    options = ["--parsable", "--cpus-per-task=1", "--mem=1G", f"--output={tmp_path}/slurm-%j.out"]
    wrap = f"--wrap={srun} && {srun} model/net=mlp"
    submitted = cluster.command("sbatch", *options, wrap, cwd=ROOT, env=job_env(cluster, tmp_path))
    job_id = submitted.stdout.strip().split(";")[0]
    assert ended(cluster.wait(job_id)) == ("COMPLETED", "0:0", "0"), job_output(tmp_path, job_id)[-3000:]
    runs = tmp_path / "logs" / "train" / "runs"
    assert sorted(p.name for p in runs.iterdir()) == [f"slurm-{job_id}", f"slurm-{job_id}.1"]
    assert "nets.mlp.MLP" in (runs / f"slurm-{job_id}.1" / "config.yaml").read_text()
    ends = {path: path.read_bytes() for path in runs.glob("*/metrics.json")}
    cluster.command("scontrol", "requeue", job_id)
    record, output = cluster.wait(job_id, restarts=1), job_output(tmp_path, job_id)
    assert ended(record) == ("COMPLETED", "0:0", "1"), output[-3000:]
    assert {path: path.read_bytes() for path in runs.glob("*/metrics.json")} == ends and len(ends) == 2
    assert output.count("is finished (it has metrics.json). Train on: ") == 2


# The first is the default learning rate: its job trains as `one_process` does.
SWEPT = ("model.optimizer.lr=0.003", "model.optimizer.lr=0.001")
# A multirun's jobs submitted through Hydra's SLURM launcher, each as small as TINY needs.
ON_SLURM = ("hydra/launcher=slurm", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1")


@pytest.mark.slow
@pytest.mark.slurm
def test_multirun_through_submitit_runs_on_the_cluster_and_a_stopped_job_continues(
    cluster: Cluster, one_process: Path, tmp_path: Path
) -> None:
    # Job 0 waits after step PAUSE_STEP for SLURM's warning; job 1 runs through (its marker exists).
    (tmp_path / "paused-0.001.0").touch()
    lrs = "model.optimizer.lr=" + ",".join(lr.split("=")[1] for lr in SWEPT)
    pause = pause_for_signal(Path(str(tmp_path) + "/paused-${model.optimizer.lr}"))
    with ThreadPoolExecutor(1) as pool:
        command = ("train.py", "-m", *ON_SLURM, lrs, *TINY, *pause)
        multirun = pool.submit(run_script, *command, cwd=tmp_path, **cluster.env, **THREADS)
        deadline = time.monotonic() + 180
        while not (tmp_path / "paused-0.003.0").exists():
            assert not multirun.done() and time.monotonic() < deadline, "job 0 did not reach its pause"
            time.sleep(0.2)
        # submitit runs the jobs as an array: job 0 is task 0 (<array id>_0, also its folder's name).
        first = next((tmp_path / "logs" / "train" / "multiruns").glob("*/.submitit/*_0")).name
        cluster.command("scancel", "--signal=USR1", first)
        result = multirun.result(timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    sweeps = [p for p in (tmp_path / "logs" / "train" / "multiruns").iterdir() if p.is_dir()]
    assert len(sweeps) == 1, sweeps
    sweep_dir = sweeps[0]
    assert sorted(p.parent.name for p in sweep_dir.glob("*/metrics.json")) == ["0", "1"]
    summary = json.loads((sweep_dir / "summary.json").read_text())
    assert [job["overrides"][0] for job in summary["jobs"]] == list(SWEPT)
    assert "2 jobs; val/acc_best" in result.stdout + result.stderr  # on the console: not the jobs' alone
    # Job 0 was requeued, continued in its directory and ended as if never stopped; job 1 ran once.
    assert_same_run(sweep_dir / "0", one_process)
    second = first.removesuffix("_0") + "_1"
    assert ended(cluster.wait(first, restarts=1)) == ("COMPLETED", "0:0", "1")
    assert ended(cluster.wait(second)) == ("COMPLETED", "0:0", "0")


@pytest.mark.slurm
def test_a_partition_the_cluster_lacks_is_named_before_anything_is_written(
    cluster: Cluster, tmp_path: Path
) -> None:
    # submitit's sbatch failed inside the launcher: a 43-line traceback, and a multirun folder.
    (partition,) = cluster.command("sinfo", "-h", "-o", "%R").stdout.split()
    sweep = ("-m", "hydra/launcher=slurm", "debug=fdr")
    result = run_script("train.py", *sweep, "hydra.launcher.partition=gpu", cwd=tmp_path, **cluster.env)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    said = f"hydra.launcher.partition=gpu: no such partition on this cluster; accepted: {partition} (sinfo)"
    assert said in result.stderr
    assert not (tmp_path / "logs").exists()


@pytest.mark.slow
@pytest.mark.slurm
def test_ctrl_c_on_the_slurm_launcher_stops_waiting_and_says_how_to_stop_the_jobs(
    cluster: Cluster, tmp_path: Path
) -> None:
    # It said "stopping at the next safe point", then waited for the jobs to end, and exited 0.
    command = [sys.executable, str(ROOT / "train.py"), "-m", *ON_SLURM, SWEPT[0], *TINY]
    command += pause_for_signal(tmp_path / "paused")  # the job waits there (up to 120 s) while it is cut
    env, out = script_env(tmp_path, **cluster.env, **THREADS), subprocess.PIPE
    with subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT) as launcher:
        deadline = time.monotonic() + 180
        while not (tmp_path / "paused.0").exists():
            assert launcher.poll() is None and time.monotonic() < deadline, "the job did not reach its pause"
            time.sleep(0.2)
        launcher.send_signal(signal.SIGINT)
        output = launcher.communicate(timeout=30)[0].decode()
    (array,) = [p.name for p in tmp_path.glob("logs/train/multiruns/*/.submitit/*") if p.name.isdigit()]
    assert launcher.returncode == 1 and f"`scancel {array}` stops them" in output, output[-3000:]
    assert cluster.job(array)["JobState"] == "RUNNING"  # the job goes on, until cancelled
    cluster.command("scancel", array)
    assert ended(cluster.wait(array))[0] == "CANCELLED"


def pause_for_signal(marker: Path) -> tuple[str, ...]:
    """Overrides that make the job wait after step PAUSE_STEP for the scheduler's signal."""
    prefix = "+callbacks.pause_for_signal"
    return (
        f"{prefix}._target_=signal_helpers.PauseForSignal",
        f"{prefix}.step={PAUSE_STEP}",
        f"{prefix}.marker={marker}",
    )


def wait_for_markers(cluster: Cluster, job_id: str, markers: list[Path], cwd: Path) -> None:
    deadline = time.monotonic() + 180
    while not all(marker.exists() for marker in markers):
        assert cluster.job(job_id)["JobState"] not in ENDED, job_output(cwd, job_id)[-3000:]
        assert time.monotonic() < deadline, f"the job did not reach step {PAUSE_STEP} in time"
        time.sleep(0.2)


def saved_steps_once_requeued(cluster: Cluster, job_id: str, run: Path, cwd: Path) -> list[int]:
    """The training steps of the run's checkpoints, read while the requeued job waits to restart."""
    deadline = time.monotonic() + 120
    while True:
        record = cluster.job(job_id)
        if record["JobState"] == "PENDING" and int(record["Restarts"]) >= 1:
            break
        assert record["JobState"] not in ENDED, f"{ended(record)}: {job_output(cwd, job_id)[-3000:]}"
        assert time.monotonic() < deadline, f"not requeued in time: {ended(record)}"
        time.sleep(0.2)
    assert not (run / "metrics.json").exists()
    return sorted(
        torch.load(path, map_location="cpu", weights_only=True)["global_step"]
        for path in (run / "checkpoints").glob("*.ckpt")
    )


# How a cluster stops a job: its warning to the job's steps (`#SBATCH --signal=USR1@...`), the
# same to the batch shell only (`--signal=B:USR1@...`), or a requeue (SIGTERM to every task).
STOPS = {
    "warning_to_steps": ("scancel", "--signal=USR1"),
    "warning_to_batch_shell": ("scancel", "--batch", "--signal=USR1"),
    "requeue": ("scontrol", "requeue"),
}


def preempt_and_finish(cluster: Cluster, cwd: Path, stop: str, *overrides: str, tasks: int = 1) -> Path:
    """Submit, stop the job at step PAUSE_STEP as `stop` says, and let it finish after its requeue."""
    marker = cwd / "paused"
    job_id = sbatch(cluster, cwd, *overrides, *pause_for_signal(marker), tasks=tasks)
    wait_for_markers(cluster, job_id, [Path(f"{marker}.{rank}") for rank in range(tasks)], cwd)
    cluster.command(*STOPS[stop], job_id)
    run = cwd / "logs" / "train" / "runs" / f"slurm-{job_id}"
    # Saved at the step it was stopped, and not finished, before it comes back.
    assert PAUSE_STEP in saved_steps_once_requeued(cluster, job_id, run, cwd)
    record = cluster.wait(job_id, restarts=1)
    output = job_output(cwd, job_id)
    assert ended(record) == ("COMPLETED", "0:0", "1"), output[-3000:]
    assert only_run(cwd) == run
    return run


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.parametrize("stop", list(STOPS))
def test_stopped_job_requeues_and_ends_like_an_uninterrupted_run(
    cluster: Cluster, stop: str, one_process: Path, tmp_path: Path
) -> None:
    run = preempt_and_finish(cluster, tmp_path, stop)
    assert_same_run(run, one_process)


@pytest.mark.slow
@pytest.mark.slurm
def test_stopped_ddp_job_requeues_and_ends_like_an_uninterrupted_run(
    cluster: Cluster, two_processes: Path, tmp_path: Path
) -> None:
    run = preempt_and_finish(cluster, tmp_path, "warning_to_batch_shell", "strategy=ddp", tasks=2)
    assert_same_run(run, two_processes)

{%- if cookiecutter.__optuna == 'True' %}


@pytest.mark.slow
@pytest.mark.slurm
def test_an_array_of_optuna_workers_shares_one_study(cluster: Cluster, tmp_path: Path) -> None:
    """The README's `sbatch --array=0-7 scripts/slurm/train.sbatch -m hparams_search=optuna`, two workers:
    the script's own overrides came before Hydra's -m, and argparse refused the command."""
    import optuna

    from {{ cookiecutter.package_name }}.utils.optuna_settings import open_storage

    options = ["--array=0-1", "--cpus-per-task=1", "--mem=1G", f"--output={tmp_path}/slurm-%A_%a.out"]
    search = ["-m", "hparams_search=optuna", "hydra.sweeper.study_name=array", "hydra.sweeper.n_trials=2"]
    search += [*TINY, "model/net=mlp", "test=false"]
    env = job_env(cluster, tmp_path)
    array = cluster.command("sbatch", "--parsable", *options, str(SBATCH), *search, cwd=ROOT, env=env).stdout
    for task in (f"{array.strip().split(';')[0]}_{n}" for n in (0, 1)):
        assert ended(cluster.wait(task)) == ("COMPLETED", "0:0", "0"), job_output(tmp_path, task)[-3000:]
    journal = tmp_path / "logs" / "train" / "multiruns" / "array" / "optuna.journal"
    study = optuna.load_study(study_name="array", storage=open_storage(str(journal)))
    assert [trial.state.name for trial in study.trials] == ["COMPLETE", "COMPLETE"]
{%- endif %}
