"""export.py: an ONNX model that computes what the checkpoint computes, runnable without this project."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import best_checkpoint, compose_config, run_script

from {{ cookiecutter.package_name }}.export import export
from {{ cookiecutter.package_name }}.models.classifier import Classifier


@pytest.fixture(scope="module")
def exported(trained_run: tuple[Path, dict[str, float]], tmp_path_factory: pytest.TempPathFactory) -> dict:
    checkpoint = best_checkpoint(trained_run[0])
    path = export(compose_config("export", tmp_path_factory.mktemp("onnx"), [f"ckpt_path={checkpoint}"]))
    model = Classifier.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True).eval()
    return {"path": path, "model": model, "metadata": json.loads(path.with_name("model.json").read_text())}


def test_the_export_command_says_where_the_model_is_and_nothing_else(
    trained_run: tuple[Path, dict[str, float]], tmp_path: Path
) -> None:
    # It printed 25 lines: torch's exporter's steps and each torchvision operator it skipped, the passes
    # of the ONNX optimizer.
    result = run_script("export.py", f"ckpt_path={best_checkpoint(trained_run[0])}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = (result.stdout + result.stderr).splitlines()
    assert line.endswith("model.onnx") and "Exported: " in line


@pytest.mark.parametrize("batch", [1, 7])
def test_onnx_runtime_equals_pytorch(exported: dict, batch: int) -> None:
    import onnxruntime

    x = torch.rand(batch, *exported["metadata"]["input"]["shape"][1:])
    (logits,) = onnxruntime.InferenceSession(str(exported["path"])).run(None, {"inputs": x.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(logits, exported["model"](x).numpy(), atol=1e-5, rtol=1e-5)
    assert exported["metadata"]["class_names"] == exported["model"].class_names
    assert exported["metadata"]["data"]["_target_"].endswith("DataModule")  # how inputs are made
    if len(shape := exported["metadata"]["input"]["shape"]) == 2:  # a table: its columns in the model's order
        assert len(exported["metadata"]["data"]["features"]) == shape[1], exported["metadata"]["data"]


def test_onnx_model_runs_without_project_code(exported: dict, tmp_path: Path) -> None:
    """A serving machine needs onnxruntime and numpy, not this project."""
    script = (
        "import json, sys, numpy, onnxruntime\n"
        "session = onnxruntime.InferenceSession(sys.argv[1])\n"
        "meta = json.loads(session.get_modelmeta().custom_metadata_map['metadata'])\n"
        "x = numpy.zeros([3, *meta['input']['shape'][1:]], dtype=meta['input']['dtype'])\n"  # numpy's name
        "(logits,) = session.run(None, {meta['input']['name']: x})\n"
        "print(json.dumps({'shape': list(logits.shape), 'classes': meta['class_names']}))\n"
    )
    env = {"PATH": "/usr/bin:/bin"}  # no PYTHONPATH; the script imports onnxruntime and numpy alone
    assert {p.name for p in exported["path"].parent.glob("model*")} == {"model.onnx", "model.json"}
    shutil.copy(exported["path"], tmp_path)  # the one file: weights inside, no model.onnx.data beside
    command = [sys.executable, "-I", "-c", script, str(tmp_path / "model.onnx")]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    classes = exported["model"].class_names
    assert json.loads(result.stdout) == {"shape": [3, len(classes)], "classes": classes}
