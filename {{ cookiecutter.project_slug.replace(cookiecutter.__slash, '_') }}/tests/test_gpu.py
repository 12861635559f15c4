"""On a CUDA GPU (skipped elsewhere): a mixed-precision run stopped midway resumes to its end, and a
checkpoint trained on the GPU serves every entry point on a machine without one."""

from pathlib import Path

import pytest
import torch
from conftest import NOISE, QUICK, best_checkpoint, logged, metrics, run_dirs, run_script, stop_at

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
GPU = ("trainer=gpu", *(o for o in QUICK if not o.startswith("trainer.accelerator")))


@pytest.mark.parametrize("precision", ["16-mixed", "bf16-mixed"])
def test_mixed_precision_stopped_mid_epoch_resumes_to_the_same_end(precision: str, tmp_path: Path) -> None:
    whole = run_script("train.py", *GPU, f"trainer.precision={precision}", cwd=tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    overrides = (*GPU, f"trainer.precision={precision}", *stop_at("on_train_batch_end", step=6))
    stopped = run_script("train.py", *overrides, cwd=tmp_path / "stopped")
    assert stopped.returncode == 75, stopped.stderr[-3000:]  # stopped, to be resumed
    (run,) = run_dirs(tmp_path / "stopped" / "logs")
    if precision == "16-mixed":  # the gradient scaler's state travels in the checkpoint
        saved = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
        assert "scale" in saved["MixedPrecision"], saved.keys()
    resumed = run_script("train.py", f"resume={run}", cwd=tmp_path / "stopped")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    consoles = whole.stdout + whole.stderr + stopped.stdout + stopped.stderr + resumed.stdout + resumed.stderr
    assert not [word for word in NOISE if word in consoles], consoles
    # A GPU's kernels vary from run to run (two uninterrupted runs differ in the fifth digit): the same
    # metrics logged at the same steps, and the same results but for that noise.
    reference = run_dirs(tmp_path / "whole" / "logs")[0]
    assert [row[:2] for row in logged(run)] == [row[:2] for row in logged(reference)]
    assert metrics(run) == pytest.approx(metrics(reference), abs=0.05)


def test_a_checkpoint_trained_on_the_gpu_serves_every_entry_point_without_one(tmp_path: Path) -> None:
    trained = run_script("train.py", *GPU, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs" / "train")
    checkpoint = f"ckpt_path={best_checkpoint(run)}"
{%- if cookiecutter.example == 'digits' %}
    inputs = f"input={tmp_path / 'data' / 'digits'}"
{%- else %}
    inputs = f"input={next((tmp_path / 'data').glob('blobs-*.csv'))}"
{%- endif %}
    no_gpu = {"CUDA_VISIBLE_DEVICES": "-1"}  # as on a laptop: the GPU's tensors must load on the CPU
    for script, *more in (
        ("eval.py", "trainer.limit_test_batches=2"),
        ("predict.py", inputs),
        ("export.py",),
    ):
        result = run_script(script, checkpoint, *more, cwd=tmp_path, **no_gpu)
        assert result.returncode == 0, f"{script}: {result.stderr[-3000:]}"
    (evaluated,) = run_dirs(tmp_path / "logs" / "eval")
    # The same weights on other kernels (the GPU's convolutions use TF32): a sample or two may differ.
    assert metrics(evaluated)["test/acc"] == pytest.approx(metrics(run)["test/acc"], abs=0.02)
    for task, written in (("predict", "predictions.csv"), ("export", "model.onnx")):
        assert (run_dirs(tmp_path / "logs" / task)[0] / written).stat().st_size > 0
