"""export.py: ONNX and TorchScript models that compute what the checkpoint computes."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import compose_config, run_script
from test_eval import best_checkpoint

from {{ cookiecutter.package_name }}.export import export
from {{ cookiecutter.package_name }}.utils.checkpoints import load_model

MODEL_CLASS = "{{ cookiecutter.package_name }}.models.classifier.Classifier"


@pytest.fixture(scope="module")
def exported(trained_run: tuple[Path, dict[str, float]], tmp_path_factory: pytest.TempPathFactory) -> dict:
    checkpoint = best_checkpoint(trained_run[0])
    paths = {}
    for fmt in ("onnx", "torchscript"):
        run_dir = tmp_path_factory.mktemp(fmt)
        paths[fmt] = export(compose_config("export", run_dir, [f"ckpt_path={checkpoint}", f"format={fmt}"]))
    model = load_model(MODEL_CLASS, str(checkpoint)).eval()
    return {"paths": paths, "model": model}


def inputs_like(model: torch.nn.Module, metadata: dict, batch: int) -> torch.Tensor:
    return torch.rand(batch, *metadata["input"]["shape"][1:])


@pytest.mark.parametrize("batch", [1, 7])
def test_onnx_runtime_equals_pytorch(exported: dict, batch: int) -> None:
    import onnxruntime

    path = exported["paths"]["onnx"]
    metadata = json.loads(path.with_name("model.json").read_text())
    x = inputs_like(exported["model"], metadata, batch)
    session = onnxruntime.InferenceSession(str(path))
    (logits,) = session.run(None, {"inputs": x.numpy()})
    with torch.no_grad():
        expected = exported["model"](x).numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("batch", [1, 7])
def test_torchscript_equals_pytorch(exported: dict, batch: int) -> None:
    path = exported["paths"]["torchscript"]
    extra = {"metadata.json": ""}
    scripted = torch.jit.load(str(path), _extra_files=extra)
    metadata = json.loads(extra["metadata.json"])
    x = inputs_like(exported["model"], metadata, batch)
    with torch.no_grad():
        torch.testing.assert_close(scripted(x), exported["model"](x), atol=1e-5, rtol=1e-5)
    assert metadata["class_names"] == exported["model"].class_names


def test_onnx_model_runs_without_project_code(exported: dict, tmp_path: Path) -> None:
    """A serving machine needs onnxruntime and numpy, not this project."""
    path = exported["paths"]["onnx"]
    script = (
        "import json, sys, numpy, onnxruntime\n"
        "session = onnxruntime.InferenceSession(sys.argv[1])\n"
        "meta = json.loads(session.get_modelmeta().custom_metadata_map['metadata'])\n"
        "x = numpy.zeros([3, *meta['input']['shape'][1:]], dtype=numpy.float32)\n"
        "(logits,) = session.run(None, {meta['input']['name']: x})\n"
        "print(json.dumps({'shape': list(logits.shape), 'classes': meta['class_names']}))\n"
    )
    env = {"PATH": "/usr/bin:/bin"}  # no PYTHONPATH: the project's package is not importable
    result = subprocess.run(
        [sys.executable, "-I", "-c", script, str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer == {
        "shape": [3, len(exported["model"].class_names)],
        "classes": exported["model"].class_names,
    }


def test_unknown_format_is_named(trained_run: tuple[Path, dict[str, float]], tmp_path: Path) -> None:
    result = run_script(
        "export.py", f"ckpt_path={best_checkpoint(trained_run[0])}", "format=tflite", cwd=tmp_path
    )
    assert result.returncode != 0
    assert "format='tflite': accepted formats are onnx, torchscript" in result.stderr
