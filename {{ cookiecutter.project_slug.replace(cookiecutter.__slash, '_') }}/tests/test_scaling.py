"""Scaling by configuration alone: devices, strategies and launchers, with one run directory."""

import importlib.util
import itertools
import json
import os
import re
import socket
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hydra
import pytest
import torch
from conftest import compose_config, run_script
from test_configs import options

from {{ cookiecutter.package_name }}.callbacks.preemption import EXIT_CODE
from {{ cookiecutter.package_name }}.utils.resolvers import run_name

ACCELERATOR = {"default": "auto", "cpu": "cpu", "gpu": "gpu", "mps": "mps"}
PAIRS = list(itertools.product(options("trainer"), options("strategy")))
# Quick real runs: CSV logs, five epochs, no progress bar in the captured output.
SHORT = ["logger=csv", "trainer.max_epochs=5", "callbacks.progress_bar=null"]


def missing_hardware(accelerator: str, strategy: str) -> str | None:
    gpu_only = ("fsdp", "deepspeed", "single_device")
    if (accelerator == "gpu" or strategy in gpu_only) and not torch.cuda.is_available():
        return "needs a CUDA GPU"
    if accelerator == "mps" and not torch.backends.mps.is_available():
        return "needs Apple MPS"
    return None


@pytest.mark.parametrize(("trainer", "strategy"), PAIRS, ids=[f"{t}-{s}" for t, s in PAIRS])
def test_trainer_and_strategy_compose_into_a_trainer(trainer: str, strategy: str, tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path, [f"trainer={trainer}", f"strategy={strategy}"])
    assert cfg.trainer.accelerator == ACCELERATOR[trainer]
    if strategy == "auto":
        assert cfg.trainer.strategy == "auto"
    else:
        assert cfg.trainer.strategy._target_.startswith("lightning.pytorch.strategies.")
    if strategy == "deepspeed" and importlib.util.find_spec("deepspeed") is None:
        with pytest.raises(Exception, match=r"pip install -U deepspeed"):
            hydra.utils.instantiate(cfg.trainer, logger=False, callbacks=[])
        pytest.skip("deepspeed is not installed: its missing-package error checked only")
    reason = missing_hardware(cfg.trainer.accelerator, strategy)
    if reason:
        pytest.skip(f"{reason}: composed and its Trainer arguments checked only")
    made = hydra.utils.instantiate(cfg.trainer, logger=False, callbacks=[])
    if strategy != "auto":
        assert type(made.strategy).__name__ == cfg.trainer.strategy._target_.rsplit(".", 1)[1]


def test_precision_compile_and_matmul_precision_are_configuration(tmp_path: Path) -> None:
    overrides = ["trainer.precision=bf16-mixed", "compile.enabled=true", "float32_matmul_precision=high"]
    cfg = compose_config("train", tmp_path, overrides)
    assert hydra.utils.instantiate(cfg.trainer, logger=False, callbacks=[]).precision == "bf16-mixed"
    assert cfg.compile.enabled and cfg.float32_matmul_precision == "high"


@pytest.mark.slow
def test_compiled_model_trains(tmp_path: Path) -> None:
    from {{ cookiecutter.package_name }}.train import train

    # The eager backend runs the torch.compile path without a C++ toolchain or minutes of compiling.
    metrics = train(
        compose_config("train", tmp_path, ["debug=fdr", "compile.enabled=true", "compile.backend=eager"])
    )
    assert "test/acc" in metrics


def test_run_name_is_shared_by_the_ranks_of_a_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in (
        "RUN_NAME",
        "SLURM_JOB_ID",
        "SLURM_JOB_NAME",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_STEP_ID",
        "TORCHELASTIC_RUN_ID",
    ):
        monkeypatch.delenv(key, raising=False)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d{6}", run_name())
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "5f3a")
    assert run_name() == "torchrun-5f3a"
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NAME", "train.sbatch")
    assert run_name() == "slurm-4242"
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert run_name() == "slurm-4242_3"
    monkeypatch.setenv("SLURM_JOB_NAME", "interactive")  # salloc: not a batch job
    assert run_name() == "torchrun-5f3a"
    monkeypatch.setenv("RUN_NAME", "my-run")
    assert run_name() == "my-run"


def single_run_dir(root: Path) -> Path:
    runs = [p for p in root.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture(scope="module")
def single_process(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    cwd = tmp_path_factory.mktemp("single")
    result = run_script("train.py", "trainer.accelerator=cpu", *SHORT, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    run = single_run_dir(cwd / "logs" / "train" / "runs")
    return run, json.loads((run / "metrics.json").read_text())


def assert_one_ddp_run(root: Path, single: dict[str, float]) -> Path:
    run = single_run_dir(root)
    assert len(list(run.parent.parent.rglob("metrics.json"))) == 1
    metrics = json.loads((run / "metrics.json").read_text())
    # Same global batch (2 x 32 = 64), another sample order: close, not equal.
    assert metrics["test/acc"] == pytest.approx(single["test/acc"], abs=0.04)
    return run


# Two ranks, 32 each: the same global batch as one process with 64.
DDP = ["trainer.accelerator=cpu", "trainer.devices=2", "strategy=ddp", "data.batch_size=32"]
# One torch thread per rank, however the ranks are started, so that they compute alike.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two DDP processes on this machine, started by Lightning: the directory of their run."""
    cwd = tmp_path_factory.mktemp("ddp")
    result = run_script("train.py", *DDP, *SHORT, cwd=cwd, **ONE_THREAD)
    assert result.returncode == 0, result.stderr[-3000:]
    return cwd / "logs" / "train" / "runs"


@pytest.mark.slow
def test_ddp_on_cpu_writes_one_run_and_matches_one_process(single_process, two_processes: Path) -> None:
    assert_one_ddp_run(two_processes, single_process[1])


@pytest.mark.slow
def test_ddp_stops_every_rank_at_the_step_one_rank_was_signalled(tmp_path: Path) -> None:
    # Only rank 1 gets SIGTERM. Rank 0 must stop at the same step: alone, it would wait forever
    # in the next step's gradient all-reduce.
    signal = "+callbacks.send_signal"
    only_rank_1 = [f"{signal}._target_=signal_helpers.SendSignalAt", f"{signal}.step=3", f"{signal}.rank=1"]
    result = run_script("train.py", *DDP, *SHORT, *only_rank_1, cwd=tmp_path, timeout=240)
    assert result.returncode == EXIT_CODE, result.stderr[-3000:]
    run = single_run_dir(tmp_path / "logs" / "train" / "runs")
    checkpoint = torch.load(run / "checkpoints" / "interrupted.ckpt", weights_only=True)
    # Signalled at the end of step 3, in the middle of the first epoch: both stopped there.
    assert checkpoint["global_step"] == 3 and checkpoint["epoch"] == 0
    assert not (run / "metrics.json").exists()


@pytest.mark.slow
def test_torchrun_writes_one_run_and_matches_one_process(single_process, tmp_path: Path) -> None:
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    result = run_script("train.py", *DDP, *SHORT, cwd=tmp_path, launcher=launcher)
    assert result.returncode == 0, result.stderr[-3000:]
    run = assert_one_ddp_run(tmp_path / "logs" / "train" / "runs", single_process[1])
    assert run.name.startswith("torchrun-")


@pytest.mark.slow
def test_multirun_with_ddp_writes_one_sweep_directory(tmp_path: Path) -> None:
    result = run_script("train.py", "-m", *DDP, "debug=limit", "logger=csv", "seed=1,2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    logs = tmp_path / "logs" / "debug"
    assert [p.name for p in logs.iterdir()] == ["multiruns"]
    sweep = single_run_dir(logs / "multiruns")
    assert sorted(p.relative_to(sweep).as_posix() for p in sweep.rglob("metrics.json")) == [
        "0/metrics.json",
        "1/metrics.json",
    ]


@pytest.mark.slow
def test_ddp_metrics_equal_a_single_process_evaluation(single_process, tmp_path: Path) -> None:
    checkpoint = next((single_process[0] / "checkpoints").glob("epoch_*.ckpt"))
    results = {}
    for name, devices in (("one", ["trainer.devices=1"]), ("two", ["trainer.devices=2", "strategy=ddp"])):
        cwd = tmp_path / name
        cwd.mkdir()
        result = run_script(
            "eval.py", f"ckpt_path={checkpoint}", "trainer.accelerator=cpu", *devices, "logger=csv", cwd=cwd
        )
        assert result.returncode == 0, result.stderr[-3000:]
        results[name] = json.loads(
            (single_run_dir(cwd / "logs" / "eval" / "runs") / "metrics.json").read_text()
        )
    # The test split has an even size, so two ranks see every sample exactly once.
    assert results["two"]["test/acc"] == pytest.approx(results["one"]["test/acc"], abs=1e-6)
    assert results["two"]["test/f1"] == pytest.approx(results["one"]["test/f1"], abs=1e-6)
    assert results["two"]["test/loss"] == pytest.approx(results["one"]["test/loss"], rel=1e-3)


@pytest.mark.slow
def test_slurm_job_id_names_the_run_directory(tmp_path: Path) -> None:
    result = run_script(
        "train.py", "debug=fdr", cwd=tmp_path, SLURM_JOB_ID="777", SLURM_JOB_NAME="train.sbatch"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "logs" / "debug" / "runs" / "slurm-777" / "metrics.json").is_file()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_torchrun_on_two_nodes_equals_two_processes_on_one(two_processes: Path, tmp_path: Path) -> None:
    # Two torchrun launchers on this host behave as two nodes: each runs what a node of a cluster
    # runs, with the first node's address. The same --rdzv-id names their one run directory.
    port = free_port()
    nodes = [
        ["-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1", f"--node-rank={rank}"]
        + [f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=two-nodes"]
        for rank in (0, 1)
    ]
    overrides = [*DDP, "trainer.devices=1", "trainer.num_nodes=2", *SHORT]

    def node(launcher: list[str]):
        return run_script("train.py", *overrides, cwd=tmp_path, launcher=launcher, timeout=240, **ONE_THREAD)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(node, nodes))
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    run = single_run_dir(tmp_path / "logs" / "train" / "runs")
    assert run.name == "torchrun-two-nodes"
    reference = single_run_dir(two_processes)
    metrics = [json.loads((r / "metrics.json").read_text()) for r in (run, reference)]
    assert metrics[0] == metrics[1]
    last = [r / "checkpoints" / "last.ckpt" for r in (run, reference)]
    weights = [torch.load(path, weights_only=True)["state_dict"] for path in last]
    assert [key for key in weights[1] if not torch.equal(weights[0][key], weights[1][key])] == []


@pytest.mark.slow
def test_no_srun_hint_outside_slurm(tmp_path: Path) -> None:
    # Lightning hints at srun on every run where `srun` is on PATH and not used; a stand-in srun
    # makes this machine one with SLURM installed.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text("#!/bin/sh\nexit 0\n")
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    hint = "The `srun` command is available on your system but is not used"
    detect = "from lightning.fabric.plugins.environments import SLURMEnvironment; SLURMEnvironment.detect()"
    env = {**{k: v for k, v in os.environ.items() if k != "SLURM_NTASKS"}, "PATH": path}  # not in a job
    lightning_alone = subprocess.run([sys.executable, "-c", detect], env=env, capture_output=True, text=True)
    assert hint in lightning_alone.stderr  # the hint this test is about, as Lightning gives it
    result = run_script("train.py", "debug=fdr", cwd=tmp_path, PATH=path, SLURM_NTASKS="")
    assert result.returncode == 0, result.stderr[-3000:]
    assert hint not in result.stdout + result.stderr
