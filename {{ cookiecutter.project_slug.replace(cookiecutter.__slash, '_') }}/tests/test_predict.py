"""predict.py: files in, the model's classes and probabilities out; bad inputs get clear errors."""

import csv
from pathlib import Path

import hydra
import numpy as np
import pytest
import torch
from conftest import compose_config, run_script
from test_eval import best_checkpoint

from {{ cookiecutter.package_name }}.predict import predict
from {{ cookiecutter.package_name }}.utils.checkpoints import load_model
from {{ cookiecutter.package_name }}.utils.errors import ConfigError

MODEL_CLASS = "{{ cookiecutter.package_name }}.models.classifier.Classifier"


@pytest.fixture(scope="module")
def checkpoint(trained_run: tuple[Path, dict[str, float]]) -> Path:
    return best_checkpoint(trained_run[0])


def raw_test_inputs(tmp_path: Path, count: int = 6) -> np.ndarray:
    """A few inputs as they are stored on disk (before the DataModule's transform)."""
{%- if cookiecutter.example == 'digits' %}
    from sklearn.datasets import load_digits

    return load_digits().images[:count]
{%- else %}
    datamodule = hydra.utils.instantiate(compose_config("train", tmp_path).data)
    return datamodule.load()[0][:count].numpy()
{%- endif %}


def in_process_classes(checkpoint: Path, inputs: torch.Tensor) -> list[str]:
    model = load_model(MODEL_CLASS, str(checkpoint)).eval()
    with torch.no_grad():
        return [model.class_names[i] for i in model(inputs).argmax(dim=1).tolist()]


def predicted(path: Path) -> list[dict[str, str]]:
    with path.open() as file:
        return list(csv.DictReader(file))


def run_predict(checkpoint: Path, source: Path, run_dir: Path) -> list[dict[str, str]]:
    cfg = compose_config("predict", run_dir, [f"ckpt_path={checkpoint}", f"input={source}"])
    return predicted(predict(cfg))


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
def test_array_files_give_the_in_process_predictions(checkpoint: Path, suffix: str, tmp_path: Path) -> None:
    raw = raw_test_inputs(tmp_path)
    source = tmp_path / f"inputs{suffix}"
    if suffix == ".npy":
        np.save(source, raw)
    else:
        np.savetxt(source, raw.reshape(len(raw), -1), delimiter=",")
    rows = run_predict(checkpoint, source, tmp_path / "run")
    datamodule = hydra.utils.instantiate(compose_config("train", tmp_path).data)
    assert [row["class"] for row in rows] == in_process_classes(checkpoint, datamodule.prepare(raw))
    for row in rows:
        probabilities = [float(v) for k, v in row.items() if k.startswith("p_")]
        assert sum(probabilities) == pytest.approx(1.0, abs=1e-4)
        assert float(row["probability"]) == pytest.approx(max(probabilities), abs=1e-6)
{%- if cookiecutter.example == 'digits' %}


def test_png_images_give_the_in_process_predictions(checkpoint: Path, tmp_path: Path) -> None:
    from PIL import Image

    from {{ cookiecutter.package_name }}.data.digits import read_png

    folder = tmp_path / "images"
    folder.mkdir()
    for i, image in enumerate(raw_test_inputs(tmp_path)):
        # 32x32, as a scanned digit might be: the DataModule resizes it to 8x8.
        pixels = np.kron(image * (255 / 16), np.ones((4, 4))).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"digit_{i}.png")
    rows = run_predict(checkpoint, folder, tmp_path / "run")
    files = sorted(folder.glob("*.png"))
    assert [row["input"] for row in rows] == [f.name for f in files]
    datamodule = hydra.utils.instantiate(compose_config("train", tmp_path).data)
    expected = in_process_classes(checkpoint, datamodule.prepare(np.stack([read_png(f) for f in files])))
    assert [row["class"] for row in rows] == expected
{%- endif %}


def test_wrong_shape_names_the_expected_one(checkpoint: Path, tmp_path: Path) -> None:
    source = tmp_path / "wrong.npy"
    np.save(source, np.zeros((3, 5)))
    with pytest.raises(ConfigError, match=r"shape \(3, 5\) do not fit: expected"):
        run_predict(checkpoint, source, tmp_path / "run")


def test_wrong_file_type_lists_the_accepted_ones(checkpoint: Path, tmp_path: Path) -> None:
    source = tmp_path / "inputs.txt"
    source.write_text("1 2 3")
    with pytest.raises(ConfigError, match=r"inputs.txt is not an accepted input: expected .*\.npy"):
        run_predict(checkpoint, source, tmp_path / "run")


@pytest.mark.slow
def test_predict_command_writes_predictions_in_its_run_directory(checkpoint: Path, tmp_path: Path) -> None:
    source = tmp_path / "inputs.npy"
    np.save(source, raw_test_inputs(tmp_path))
    result = run_script("predict.py", f"ckpt_path={checkpoint}", f"input={source}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = (tmp_path / "logs" / "predict" / "runs").iterdir()
    assert len(predicted(run / "predictions.csv")) == 6
    missing = run_script("predict.py", f"ckpt_path={checkpoint}", "input=/no/such/inputs.npy", cwd=tmp_path)
    assert missing.returncode != 0 and "input='/no/such/inputs.npy': no such file" in missing.stderr
