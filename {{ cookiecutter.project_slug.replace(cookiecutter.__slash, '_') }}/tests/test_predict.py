"""predict.py: images or table rows in, the model's classes and probabilities out."""

import csv
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import (
    as_command,
    best_checkpoint,
    compose_config,
    run_dirs,
    run_script,
    trainer_stop_at,
    write_image_folder,
)

from {{ cookiecutter.package_name }}.data.csv_table import CSVDataModule
from {{ cookiecutter.package_name }}.data.image_folder import ImageFolderDataModule
from {{ cookiecutter.package_name }}.eval import model_and_data
from {{ cookiecutter.package_name }}.predict import predict, read_inputs
from {{ cookiecutter.package_name }}.utils.runs import ConfigError


@pytest.fixture(scope="module")
def checkpoint(trained_run: tuple[Path, dict[str, float]]) -> Path:
    return best_checkpoint(trained_run[0])


def run_predict(checkpoint: Path, source: Path, run_dir: Path) -> list[dict[str, str]]:
    cfg = compose_config("predict", run_dir, overrides := [f"ckpt_path={checkpoint}", f"input={source}"])
    with as_command("predict", overrides):
        path = predict(cfg)
    with path.open() as file:
        return list(csv.DictReader(file))


def input_dims(checkpoint: Path) -> int:  # predict.py reads 3: images, 1: a table's rows; else yours
    return len(torch.load(checkpoint, weights_only=True)["hyper_parameters"]["input_shape"])


def inputs_for(checkpoint: Path, where: Path) -> Path:
    """120 inputs the checkpoint's model takes, as predict.py reads them: images, or rows of its columns."""
    cfg = compose_config("predict", where / "run", overrides := [f"ckpt_path={checkpoint}"])
    with as_command("predict", overrides):
        _, datamodule = model_and_data(cfg, "predict")
    if isinstance(datamodule, ImageFolderDataModule):
        return write_image_folder(where / "images")  # 3 classes of 40
    if not isinstance(datamodule, CSVDataModule):
        pytest.skip(f"{type(datamodule).__name__}: write its inputs here as predict.py reads them")
    rows = [",".join(str(i % 7) for _ in datamodule.features) for i in range(120)]
    (table := where / "rows.csv").write_text("\n".join([",".join(datamodule.features), *rows]) + "\n")
    return table


def test_predict_signalled_midway_exits_0_only_with_every_prediction(
    checkpoint: Path, tmp_path: Path
) -> None:
    # Lightning ends its test loop on SIGTERM with status 0 (eval.py makes it 75); its predict loop goes on.
    command = [
        f"ckpt_path={checkpoint}",
        f"input={inputs_for(checkpoint, tmp_path)}",  # 120: two batches, the signal after the first
        trainer_stop_at("on_predict_batch_end", tmp_path),
    ]
    result = run_script("predict.py", *command, cwd=tmp_path)
    assert (tmp_path / ".signal-sent").exists()
    assert result.returncode == 0, result.stderr[-3000:]
    predictions = run_dirs(tmp_path / "logs" / "predict")[0] / "predictions.csv"
    assert len(predictions.read_text().splitlines()) == 1 + 120


def test_predictions_are_the_model_s_on_the_data_s_own_inputs(checkpoint: Path, tmp_path: Path) -> None:
    cfg = compose_config("predict", tmp_path, overrides := [f"ckpt_path={checkpoint}"])
    with as_command("predict", overrides):
        model, datamodule = model_and_data(cfg)
    datamodule.setup("test")
    x, _ = next(iter(datamodule.test_dataloader()))
    with torch.no_grad():
        expected = [model.class_names[i] for i in model(x).argmax(1).tolist()]
    # The same inputs, as predict.py reads them (the DataModule's transform runs on them there too): by the
    # kind of the default data (yours too), not by the example's.
    batch = datamodule.splits["test"].indices[: len(x)]
    if isinstance(datamodule, ImageFolderDataModule):  # the same images, as files
        files = [datamodule.splits["test"].dataset.files[i] for i in batch]
        (source := tmp_path / "inputs").mkdir()
        for i, file in enumerate(files):
            (source / f"{i:03d}{file.suffix}").write_bytes(file.read_bytes())
        (source / "._000.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble")  # macOS's, beside copied files
        (hidden := source / ".ipynb_checkpoints").mkdir()  # Jupyter's copies: in a hidden folder, unpredicted
        (hidden / f"000-checkpoint{files[0].suffix}").write_bytes(files[0].read_bytes())
    elif isinstance(datamodule, CSVDataModule):  # the same rows, as a CSV file
        rows_in = [list(datamodule.rows.values())[i] for i in batch]
        with (source := tmp_path / "inputs.csv").open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(rows_in[0]))
            writer.writeheader()
            writer.writerows(rows_in)
    else:
        pytest.skip(f"{type(datamodule).__name__}: write its inputs here as predict.py reads them")
    rows = run_predict(checkpoint, source, tmp_path / "run")
    assert [row["class"] for row in rows] == expected
    assert all(abs(sum(float(row[f"p_{n}"]) for n in model.class_names) - 1) < 1e-4 for row in rows)


def test_inputs_the_model_cannot_take_are_refused(checkpoint: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    reads = "it accepts" if input_dims(checkpoint) in (1, 3) else "add a reader of its inputs"
    cases = [(tmp_path / "notes.txt", f"holds nothing this model takes; {reads}")]
    cases.append((tmp_path / "none", "no such file or folder"))
    if input_dims(checkpoint) == 3:
        (tmp_path / "broken.png").write_bytes(b"\x89PNG not really")
        whole = (write_image_folder(tmp_path / "images", per_class=1) / "class_0" / "000.png").read_bytes()
        (tmp_path / "cut.png").write_bytes(whole[: len(whole) // 2])  # a copy cut short
        (tmp_path / "empty" / "sub").mkdir(parents=True)
        cases += [
            (tmp_path / "broken.png", "cannot identify image file .*broken.png"),
            (tmp_path / "cut.png", "cut.png: image file is truncated"),
            (tmp_path / "empty", "no images or rows to predict there"),
        ]
    for source, message in cases:
        with pytest.raises(ConfigError, match=message):
            run_predict(checkpoint, source, tmp_path / "run")


def test_inputs_of_a_shape_no_reader_makes_ask_for_one(tmp_path: Path) -> None:
    (table := tmp_path / "table.csv").write_text("a,b,label\n1,2,x\n")
    shape = SimpleNamespace(input_shape=(2, 32))  # a DataModule of a user's: neither images nor table rows
    with pytest.raises(ValueError, match="this model takes; add a reader of its inputs to predict.py.$"):
        read_inputs(table, shape)  # was: "it accepts a .csv file"


def test_a_table_s_rows_are_named_by_their_lines_in_the_file(tmp_path: Path) -> None:
    # csv skips blank lines: rows were named by their count (here table.csv:3 for the row on line 4).
    (table := tmp_path / "table.csv").write_text("a,b,label\n1,2,x\n\n3,4,y\n")
    datamodule = CSVDataModule(str(table), "label", features=["a", "b"])
    assert {name: x.tolist() for name, x in read_inputs(table, datamodule).items()} == {
        "table.csv:2": [1.0, 2.0],
        "table.csv:4": [3.0, 4.0],
    }


def test_checkpoints_record_the_data_s_null_values_as_read_where_the_data_has_them(tmp_path: Path) -> None:
    from {{ cookiecutter.package_name }}.callbacks.resumable import Resumable

    resumable = Resumable(str(tmp_path), data={"features": None, "image_size": None, "root": "x"})
    data = SimpleNamespace(size=(12, 16), features=None)  # a DataModule of a user's may hold features=None
    resumable.setup(SimpleNamespace(world_size=1, datamodule=data), None, "fit")
    assert resumable.data == {"features": None, "image_size": [12, 16], "root": "x"}  # predict.py's size


def test_a_limit_on_predict_batches_predicts_the_first_inputs(checkpoint: Path, tmp_path: Path) -> None:
    # Was a zip() traceback, with a predictions.csv cut short.
    cfg = compose_config("predict", tmp_path, overrides := [f"ckpt_path={checkpoint}"])
    with as_command("predict", overrides):
        _, datamodule = model_and_data(cfg, "predict")
    if not isinstance(datamodule, ImageFolderDataModule | CSVDataModule):
        pytest.skip(f"{type(datamodule).__name__}: predict its own data here, as predict.py reads it")
    source = getattr(datamodule, "root", getattr(datamodule, "path", None))
    first = next(iter(read_inputs(source, datamodule)))  # the data's own images or rows, in predict's order
    limit = ("+trainer.limit_predict_batches=1", "+data.batch_size=4")
    result = run_script("predict.py", f"ckpt_path={checkpoint}", f"input={source}", *limit, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs" / "predict")
    with (run / "predictions.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 4 and "4 predictions" in result.stdout  # one batch (data.batch_size)
    assert rows[0]["input"] == first


def test_predict_on_more_than_one_device_is_refused(checkpoint: Path, tmp_path: Path) -> None:
    # Each rank predicted a share of the inputs into one file: half the rows, under other inputs' names.
    # Refused before any input is read (any existing path will do: the checkpoint's).
    devices = ("trainer.accelerator=cpu", "trainer.devices=2", f"input={checkpoint}")
    result = run_script("predict.py", f"ckpt_path={checkpoint}", *devices, cwd=tmp_path)
    assert result.returncode == 1 and "trainer.devices x num_nodes = 2: predict.py uses 1." in result.stderr
    assert not list(tmp_path.glob("logs/predict/runs/*/predictions.csv"))
