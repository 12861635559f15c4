"""SLURM: the sbatch script is valid and runs the real entry point; the submitit launcher works."""

import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, compose_config, run_script

SBATCH = ROOT / "scripts" / "slurm" / "train.sbatch"


def test_sbatch_script_is_valid_bash_and_runs_train_py() -> None:
    assert subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True).returncode == 0
    text = SBATCH.read_text()
    command = re.search(r"^srun python (\S+)", text, re.MULTILINE)
    assert command and (ROOT / command.group(1)).is_file()
    assert "--signal=USR1@" in text
    # CPU and GPU nodes alike: no GPU asked for or assumed unless the user says so.
    assert not re.search(r"^#SBATCH --gpus", text, re.MULTILINE) and "trainer=gpu" not in text


def test_slurm_launcher_has_the_cluster_settings(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="{{ cookiecutter.package_name }}.configs", version_base="1.3"):
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
    with initialize_config_module(config_module="{{ cookiecutter.package_name }}.configs", version_base="1.3"):
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


@pytest.mark.slow
def test_submitit_local_launcher_runs_a_job(tmp_path: Path) -> None:
    result = run_script(
        "train.py", "-m", "hydra/launcher=submitit_local", "debug=fdr", "logger=csv", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((tmp_path / "logs" / "debug" / "multiruns").glob("*/0/metrics.json"))
