"""Scaling by configuration alone: devices, strategies and launchers, with one run directory."""

import importlib.util
import itertools
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hydra
import pytest
import torch
from conftest import (
    NOISE,
    QUICK,
    ROOT,
    assert_same_run,
    compose_config,
    continue_command,
    free_port,
    metrics,
    run_dirs,
    run_script,
    stop_at,
)
from test_configs import options

from {{ cookiecutter.package_name }}.utils.runs import run_name

ACCELERATOR = {"default": "auto", "cpu": "cpu", "gpu": "gpu", "mps": "mps"}
PAIRS = list(itertools.product(options("trainer"), options("strategy")))


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
    if strategy == "fsdp" and trainer == "cpu":  # on any machine, a GPU's too: Lightning's own refusal
        with pytest.raises(Exception, match="requires a GPU accelerator, but received `accelerator='cpu'`"):
            hydra.utils.instantiate(cfg.trainer, logger=False, callbacks=[])
        return
    reason = missing_hardware(cfg.trainer.accelerator, strategy)
    if reason:
        pytest.skip(f"{reason}: composed and its Trainer arguments checked only")
    made = hydra.utils.instantiate(cfg.trainer, logger=False, callbacks=[])
    if strategy != "auto":
        assert type(made.strategy).__name__ == cfg.trainer.strategy._target_.rsplit(".", 1)[1]


def test_precision_is_configuration(tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path, ["trainer.precision=bf16-mixed"])
    assert hydra.utils.instantiate(cfg.trainer, logger=False, callbacks=[]).precision == "bf16-mixed"


@pytest.mark.slow
def test_compiled_model_trains(tmp_path: Path) -> None:
    from {{ cookiecutter.package_name }}.train import train

    # A backend that runs the graphs torch.compile hands it as they are (no C++ toolchain or minutes of
    # compiling), and counts them: the model's forward went through torch.compile.
    graphs = []

    @torch._dynamo.register_backend(name="counted_eager")
    def counted_eager(graph: torch.fx.GraphModule, example_inputs: list) -> Callable:
        graphs.append(graph)
        return graph.forward

    overrides = ["debug=fdr", "compile.enabled=true", "compile.backend=counted_eager"]
    assert "test/acc" in train(compose_config("train", tmp_path, overrides))
    assert graphs


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
    monkeypatch.setenv("SLURM_STEP_ID", "0")  # the job's first srun (a requeued job's too)
    assert run_name() == "slurm-4242_3"
    monkeypatch.setenv("SLURM_STEP_ID", "2")  # its third: a run of its own
    assert run_name() == "slurm-4242_3.2"
    monkeypatch.setenv("SLURM_JOB_NAME", "interactive")  # salloc: not a batch job
    assert run_name() == "torchrun-5f3a"
    monkeypatch.setenv("RUN_NAME", "my-run")
    assert run_name() == "my-run"


# Two ranks of 32: the same global batch as one process of 64; 3 epochs, to learn something; 257
# validation samples: one rank has a batch more than the other (no sample is repeated to even them).
DDP = ("trainer.accelerator=cpu", "trainer.devices=2", "strategy=ddp", "data.batch_size=32", *QUICK[-2:])
DDP += ("trainer.max_epochs=3", "data.val_fraction=0.1428")
# One torch thread per rank, however the ranks are started, so that they compute alike.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
# Under torchrun, its sizes (--nproc-per-node, --nnodes) are the trainer's devices and nodes, and Lightning's
# strategy follows: with no overrides, each process trained alone into the one run, and exited 0 (a probe).
TORCHRUN = tuple(o for o in DDP if not o.startswith(("trainer.devices", "strategy")))


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-process DDP run started by Lightning itself: the yardstick of the launchers below."""
    cwd = tmp_path_factory.mktemp("ddp")
    result = run_script("train.py", *DDP, cwd=cwd, **ONE_THREAD)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not [word for word in NOISE if word in result.stdout + result.stderr], result.stderr
    (run,) = run_dirs(cwd / "logs")
    return run


@pytest.mark.slow
def test_ddp_writes_one_run_directory_close_to_one_process(two_processes: Path, tmp_path: Path) -> None:
    one = run_script("train.py", "trainer.accelerator=cpu", *QUICK[-2:], *DDP[-2:], cwd=tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    # The same global batch, another split of the samples between the ranks: close, not equal.
    assert metrics(two_processes)["test/acc"] == pytest.approx(metrics(run)["test/acc"], abs=0.05)


@pytest.mark.slow
def test_torchrun_writes_one_run_equal_to_lightning_s_own_ddp(two_processes: Path, tmp_path: Path) -> None:
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    result = run_script("train.py", *TORCHRUN, cwd=tmp_path, launcher=launcher, **ONE_THREAD)
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    assert run.name.startswith("torchrun-")
    assert_same_run(run, two_processes)


@pytest.mark.slow
def test_a_restarted_torchrun_continues_its_run_to_the_same_end(two_processes: Path, tmp_path: Path) -> None:
    # Rank 1 killed as the second epoch starts: torchrun starts both ranks again, which continue from
    # last.ckpt. torch hands a restart the rendezvous store of the start before, with its ranks' addresses
    # (pytorch#135712): Lightning's first gloo group failed ("Connection refused") without the README's
    # TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1.
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "--max-restarts=1"]
    epoch = torch.load(two_processes / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] // 3
    kill = stop_at("on_train_epoch_start", step=epoch, rank=1, signal="SIGKILL")
    env = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **ONE_THREAD}
    result = run_script("train.py", *TORCHRUN, *kill, cwd=tmp_path, launcher=launcher, **env)
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    assert f"checkpoint path at {run / 'checkpoints' / 'last.ckpt'}" in result.stdout + result.stderr
    assert_same_run(run, two_processes, failed_start=True)  # rank 0 failed, and logged the epoch's rate


@pytest.mark.slow
def test_a_stopped_torchrun_prints_the_torchrun_that_continues_it_to_the_same_end(
    two_processes: Path, tmp_path: Path
) -> None:
    # Rank 0 signalled mid-way through the second epoch: both ranks stop. The printed command was
    # `python train.py resume=...`, which went on in one process: another order of the epoch's rest.
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    epoch = torch.load(two_processes / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] // 3
    stop = stop_at("on_train_batch_start", step=epoch + 2, rank=0)
    stopped = run_script("train.py", *TORCHRUN, *stop, cwd=tmp_path, launcher=launcher, **ONE_THREAD)
    assert stopped.returncode != 0 and "Stopped at step" in stopped.stdout, stopped.stderr[-3000:]
    torchrun, *options, script, resume = continue_command(stopped.stdout)
    assert (torchrun, options) == ("torchrun", ["--standalone", "--nproc-per-node=2"])
    assert script == str(ROOT / "train.py")
    launcher = ["-m", "torch.distributed.run", *options]
    resumed = run_script(script, resume, cwd=tmp_path, launcher=launcher, **ONE_THREAD)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    assert_same_run(run, two_processes)


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
    overrides = TORCHRUN  # trainer.devices=1, num_nodes=2: torchrun's

    def node(launcher: list[str]) -> subprocess.CompletedProcess[str]:
        return run_script("train.py", *overrides, cwd=tmp_path, launcher=launcher, timeout=400, **ONE_THREAD)

    with ThreadPoolExecutor(2) as pool:
        for result in pool.map(node, nodes):
            assert result.returncode == 0, result.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs")
    assert run.name == "torchrun-two-nodes"
    assert_same_run(run, two_processes)


@pytest.mark.slow
def test_no_srun_hint_outside_slurm(tmp_path: Path) -> None:
    # Lightning hints at srun on every run where `srun` is on PATH and not used; a stand-in srun
    # makes this machine one with SLURM installed.
    srun = tmp_path / "bin" / "srun"
    srun.parent.mkdir()
    srun.write_text("#!/bin/sh\nexit 0\n")
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    path = f"{srun.parent}{os.pathsep}{os.environ['PATH']}"
    hint = "The `srun` command is available on your system but is not used"
    detect = "from lightning.fabric.plugins.environments import SLURMEnvironment; SLURMEnvironment.detect()"
    env = {**{k: v for k, v in os.environ.items() if k != "SLURM_NTASKS"}, "PATH": path}  # not in a job
    lightning_alone = subprocess.run([sys.executable, "-c", detect], env=env, capture_output=True, text=True)
    assert hint in lightning_alone.stderr  # the hint this test is about, as Lightning gives it
    result = run_script("train.py", "debug=fdr", cwd=tmp_path, PATH=path, SLURM_NTASKS="")
    assert result.returncode == 0, result.stderr[-3000:]
    assert hint not in result.stdout + result.stderr


@pytest.mark.slow
def test_multirun_with_ddp_writes_one_sweep_directory(tmp_path: Path) -> None:
    (mine := tmp_path / "mine" / "experiment").mkdir(parents=True)  # every rank finds the user's configs
    (mine / "two.yaml").write_text("# @package _global_\ntags: [mine]\n")
    searchpath = f"hydra.searchpath=[file://{mine.parent}]"
    overrides = (*DDP[:4], *QUICK, "seed=1,2", "experiment=two", searchpath)
    result = run_script("train.py", "-m", *overrides, cwd=tmp_path, RUN_NAME="sweep")
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = tmp_path / "logs" / "train" / "multiruns" / "sweep"
    assert sorted(p.relative_to(sweep).as_posix() for p in sweep.rglob("metrics.json")) == [
        "0/metrics.json",
        "1/metrics.json",
    ]
    assert not (tmp_path / "logs" / "train" / "runs").exists()


@pytest.mark.slow
def test_ddp_evaluation_equals_one_process(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    from conftest import best_checkpoint

    results = {}
    for name, devices in (("one", ["trainer.devices=1"]), ("two", ["trainer.devices=2", "strategy=ddp"])):
        ckpt = best_checkpoint(trained_run[0])
        result = run_script(
            "eval.py",
            f"ckpt_path={ckpt}",
            "trainer.accelerator=cpu",
            *devices,
            "logger=csv",
            "+data.test_fraction=0.105",  # 189 samples, one at a time: 95 on one rank, 94 on the other
            "+data.batch_size=1",
            cwd=tmp_path / name,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert not [word for word in NOISE if word in result.stdout + result.stderr], result.stderr
        results[name] = metrics(run_dirs(tmp_path / name / "logs")[0])
    # Every sample once: Lightning's own sampler would have repeated one to give both ranks 95.
    for key in ("test/acc", "test/f1"):
        assert results["two"][key] == pytest.approx(results["one"][key], abs=1e-6)
    assert results["two"]["test/loss"] == pytest.approx(results["one"]["test/loss"], rel=1e-4)


@pytest.mark.slow
def test_slurm_job_id_names_the_run_directory(tmp_path: Path) -> None:
    result = run_script(
        "train.py", "debug=fdr", cwd=tmp_path, SLURM_JOB_ID="777", SLURM_JOB_NAME="train.sbatch"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "logs" / "debug" / "runs" / "slurm-777" / "metrics.json").is_file()
