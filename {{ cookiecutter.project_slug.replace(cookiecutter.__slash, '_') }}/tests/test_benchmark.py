"""The benchmark's claims hold: the pipeline trains exactly like a hand-written loop."""

import re
import sys
import tempfile
from pathlib import Path

import hydra
import pytest
import torch
from conftest import ROOT, run_script

sys.path.insert(0, str(ROOT / "scripts"))
import benchmark  # noqa: E402


def test_pipeline_and_plain_loop_reach_the_same_loss() -> None:
    # The default config, shortened: same net, data order, optimizer, schedule and seed.
    result = benchmark.parity(["trainer.max_epochs=2", "logger=csv"], rounds=1)
    assert round(result["losses"]["pipeline"], 5) == round(result["losses"]["plain"], 5)
    assert all(rate > 0 for rates in result["rates"].values() for rate in rates)
    with tempfile.TemporaryDirectory() as tmp:
        datamodule = hydra.utils.instantiate(benchmark.config(Path(tmp), []).data)
    datamodule.setup("fit")
    assert result["steps"] == len(datamodule.train_dataloader())
    assert len(result["overheads"]) == 1


@pytest.mark.slow
def test_mixed_precision_pipeline_and_plain_loop_reach_the_same_loss() -> None:
    # On a CPU Lightning trains 16-mixed as bf16-mixed; the plain loop must do the same.
    overrides = ["trainer.max_epochs=2", "logger=csv", "trainer.precision=16-mixed"]
    losses = benchmark.parity([*overrides, "trainer.accelerator=cpu"], rounds=1)["losses"]
    assert round(losses["pipeline"], 5) == round(losses["plain"], 5)


def test_a_precision_the_plain_loop_cannot_mirror_is_named() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = benchmark.config(Path(tmp), ["trainer.precision=bf16-true"])
    with pytest.raises(ValueError, match="trainer.precision=bf16-true: the plain loop trains in 32-true, "):
        benchmark.device_and_autocast(cfg)


def test_training_steps_read_no_value_into_python() -> None:
    # A `.item()`, `float()` or per-step log in the hot path shows up here: on a GPU each such
    # read stalls the step until the device catches up. (The non-finite-loss check reads its
    # losses once per 32 steps and at each epoch's last batch: not in the steps counted.)
    counted = benchmark.work_per_step(["logger=csv"])
    assert counted["pipeline"]["reads"] == counted["plain"]["reads"]
    assert counted["plain"]["ops"] > 0 and counted["pipeline"]["calls"] > counted["plain"]["calls"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_training_steps_on_a_gpu_wait_for_it_no_more_than_a_plain_loop() -> None:
    # Waits for the GPU that read no value (a blocking copy to the host, `nonzero`, a
    # `synchronize`) stall the steps as much: torch's sync debug mode counts them all.
    counted = benchmark.work_per_step(["trainer=gpu", "logger=csv"])
    assert counted["pipeline"]["syncs"] == counted["plain"]["syncs"]
    assert counted["pipeline"]["reads"] == counted["plain"]["reads"]


@pytest.mark.slow
def test_plain_script_of_the_end_to_end_comparison_trains_with_torch_alone(tmp_path: Path) -> None:
    # Its imports are what a plain script pays for; the project's own are what is compared.
    spec = benchmark.plain_spec(["trainer.max_epochs=1"], tmp_path)
    result = run_script("scripts/plain_train.py", str(spec), cwd=tmp_path, launcher=["-X", "importtime"])
    assert result.returncode == 0, result.stderr[-2000:]
    accuracy = re.fullmatch(r"test accuracy (\d\.\d{4})\n", result.stdout)
    assert accuracy and 0 <= float(accuracy[1]) <= 1, result.stdout
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in result.stderr.splitlines()}
    assert "torch" in imported
    assert not imported & {"lightning", "hydra", "omegaconf", "torchmetrics", "wandb"}


def test_epochs_too_short_to_count_a_step_are_reported_not_counted() -> None:
    # With batches of 1,024 the digits make 2 training batches per epoch, both left out.
    section = "".join(benchmark.work_section(["data.batch_size=1024"], steps=2))
    assert "Not counted: this configuration has 2 training batches per epoch" in section


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the benchmark would run")
def test_gpu_benchmark_without_a_gpu_is_skipped_with_a_reason(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    result = run_script("scripts/benchmark.py", "--trainer", "gpu", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Skipped: trainer.accelerator=gpu, and this machine has no CUDA GPU" in result.stdout
    assert not out.exists()
