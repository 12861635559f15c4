"""Your own data with configuration alone: a folder of images, a CSV table; then eval and predict on them."""

import csv
import json
import re
import shlex
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from conftest import (
    CONFIGS,
    NOISE,
    QUICK,
    assert_same_run,
    best_checkpoint,
    metrics,
    run_dirs,
    run_script,
    stop_at,
    write_image_folder,
    write_table,
)

from {{ cookiecutter.package_name }}.utils.runs import EXIT_CODE

EPOCHS = ("trainer.max_epochs=8", "data.batch_size=16", "logger=csv")


def trained(tmp_path: Path, *data: str) -> Path:
    result = run_script("train.py", *data, *EPOCHS, "model/net=mlp", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs" / "train")
    return run


def predictions(tmp_path: Path, checkpoint: Path, source: Path) -> list[dict[str, str]]:
    result = run_script("predict.py", f"ckpt_path={checkpoint}", f"input={source}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not [word for word in NOISE if word in result.stdout + result.stderr], result.stderr
    (run,) = run_dirs(tmp_path / "logs" / "predict")
    with (run / "predictions.csv").open() as file:
        return list(csv.DictReader(file))


@pytest.mark.slow
def test_a_folder_of_images_unlike_the_digits_trains_evaluates_and_predicts(tmp_path: Path) -> None:
    images = write_image_folder(tmp_path / "images", classes=3, size=16)  # RGB, 16x16, 3 classes
    run = trained(tmp_path, "data=image_folder", f"data.root={images}")  # image_size null: the first's
    assert metrics(run)["test/acc"] > 0.8  # chance is 1/3
    checkpoint = run / "checkpoints" / "last.ckpt"
    evaluated = run_script("eval.py", f"ckpt_path={checkpoint}", "logger=csv", cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    (eval_run,) = run_dirs(tmp_path / "logs" / "eval")
    assert metrics(eval_run)["test/acc"] > 0.8
    # Another folder of the kind (+data.root: the rest of the data config as trained, with the size it
    # read, so its 32x32 images are made 16x16), its class_0 and class_1 swapped: the model gets those wrong.
    other = write_image_folder(tmp_path / "other", classes=3, size=32)
    for old, new in (("class_0", "swap"), ("class_1", "class_0"), ("swap", "class_1")):
        (other / old).rename(other / new)
    evaluated = run_script(
        "eval.py", f"ckpt_path={checkpoint}", f"+data.root={other}", "logger=csv", cwd=tmp_path
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert metrics(run_dirs(tmp_path / "logs" / "eval")[-1])["test/acc"] < 0.5
    served = images.rename(tmp_path / "served")  # predict.py reads no training data: it may be gone
    rows = predictions(tmp_path, checkpoint, served)  # the folder of class folders: every image in it
    assert len(rows) == 120 and sum(row["class"] == row["input"].split("/")[0] for row in rows) > 100
    assert set(rows[0]) == {"input", "class", "probability", "p_class_0", "p_class_1", "p_class_2"}


@pytest.mark.slow
def test_a_run_stopped_and_resumed_after_its_images_moved_ends_as_one_never_stopped(tmp_path: Path) -> None:
    images, short = write_image_folder(tmp_path / "images"), ("trainer.max_epochs=2", *QUICK[1:])
    reference = run_script("train.py", "data=image_folder", f"data.root={images}", *short, cwd=tmp_path / "a")
    assert reference.returncode == 0, reference.stderr[-3000:]
    stop = stop_at("on_train_batch_start", step=3)  # mid second epoch
    stopped = run_script(
        "train.py", "data=image_folder", f"data.root={images}", *short, *stop, cwd=tmp_path / "b"
    )
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "b" / "logs")
    moved = images.rename(tmp_path / "moved")  # the data's place may change; no other setting may
    # Nor may other data come in its place: it trained on, its labels permuted (a walk's), with exit 0.
    other = write_image_folder(tmp_path / "other")
    (other / "class_2").rename(other / "class_x")
    refused = run_script("train.py", f"resume={run}", f"++data.root={other}", cwd=tmp_path / "b")
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert "classes ['class_0', 'class_1', 'class_x']: it does not fit" in refused.stderr
    resumed = run_script("train.py", f"resume={run}", f"++data.root={moved}", cwd=tmp_path / "b")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_run(run, run_dirs(tmp_path / "a" / "logs")[0])


def test_a_csv_table_trains_evaluates_and_predicts(tmp_path: Path) -> None:
    table = write_table(tmp_path / "table.CSV", features=4, classes=3)  # suffixes in any case
    run = trained(tmp_path, "data=csv", f"data.path={table}", "data.target=species")
    assert metrics(run)["test/acc"] > 0.8
    # The log says what the data gave the model, names as read (without spaces around them).
    assert "inputs [4], 3 classes ['kind_0', 'kind_1', 'kind_2']" in (run / "train.log").read_text()
    checkpoint = run / "checkpoints" / "last.ckpt"
    evaluated = run_script("eval.py", f"ckpt_path={checkpoint}", "logger=csv", cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    # The same table, its columns in another order: read by name, as trained.
    with table.open() as file:
        (reordered := tmp_path / "reordered.csv").write_text(
            "".join(",".join(reversed(r)) + "\n" for r in csv.reader(file))
        )
    again = run_script(
        "eval.py", f"ckpt_path={checkpoint}", f"+data.path={reordered}", "logger=csv", cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr[-3000:]
    # data=csv too: what it leaves null (features) is the checkpoint's (was: the file's order, silently).
    table_again = ("data=csv", f"data.path={reordered}", "data.target=species", "logger=csv")
    chosen = run_script("eval.py", f"ckpt_path={checkpoint}", *table_again, cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr[-3000:]
    first, second, third = run_dirs(tmp_path / "logs" / "eval")
    assert metrics(second) == metrics(first) and metrics(third) == pytest.approx(metrics(first))  # batch 64
    away = table.rename(tmp_path / "away.csv")  # predict.py reads no training data: it may be gone
    rows = predictions(tmp_path, checkpoint, away)  # the label column is there too: ignored
    away.rename(table)
    with table.open() as file:
        truth = [row["species"] for row in csv.DictReader(file)]
    assert sum(row["class"] == label for row, label in zip(rows, truth, strict=True)) > 0.8 * len(truth)
    # Exported, it takes the columns in the order model.json gives: the file's (a sequence stays one).
    assert run_script("export.py", f"ckpt_path={checkpoint}", cwd=tmp_path).returncode == 0
    (exported,) = run_dirs(tmp_path / "logs" / "export")
    served = json.loads((exported / "model.json").read_text())
    assert (features := served["data"]["features"]) == ["width", "height", "depth", "mass"]
    with table.open() as file:
        x = np.array([[float(row[name]) for name in features] for row in csv.DictReader(file)], np.float32)
    (logits,) = onnxruntime.InferenceSession(str(exported / "model.onnx")).run(None, {"inputs": x})
    assert [served["class_names"][i] for i in logits.argmax(1)] == [row["class"] for row in rows]
    # Data that does not fit the model: refused, naming both.
    # (With features null, it reads the 4 columns the checkpoint names; these 5 are given.)
    other = write_table(tmp_path / "other.csv", features=5, classes=3)
    refused = run_script(
        "eval.py",
        f"ckpt_path={checkpoint}",
        "data=csv",
        f"data.path={other}",
        "data.target=species",
        "data.features=[width,height,depth,mass,age]",
        cwd=tmp_path,
    )
    assert refused.returncode == 1
    assert (
        "inputs of shape [5] in 3 classes" in refused.stderr
        and "inputs of shape [4] in 3 classes" in refused.stderr
    )
    # The same columns with its classes named otherwise: refused, naming both (it tested at chance).
    (renamed := tmp_path / "renamed.csv").write_text(table.read_text().replace("kind_", "type_"))
    refused = run_script("eval.py", f"ckpt_path={checkpoint}", f"+data.path={renamed}", cwd=tmp_path)
    assert refused.returncode == 1 and "classes ['kind_0', 'kind_1', 'kind_2']; this data" in refused.stderr
    assert "classes ['type_0', 'type_1', 'type_2']: it does not fit" in refused.stderr
    nan = tmp_path / "nan.csv"
    nan.write_text("width,height,depth,mass\n1,2,3,4\nnan,2,3,4\n")
    refused = run_script("predict.py", f"ckpt_path={checkpoint}", f"input={nan}", cwd=tmp_path)
    assert refused.returncode == 1 and "nan.csv:3 hold NaN or infinite values" in refused.stderr
    (other_columns := tmp_path / "columns.csv").write_text("width,height,depth,weight\n1,2,3,4\n")
    refused = run_script("predict.py", f"ckpt_path={checkpoint}", f"input={other_columns}", cwd=tmp_path)
    assert refused.returncode == 1 and "'mass': '<no such column>'" in refused.stderr
    # Once finished, the run says how to train on from its weights: its command, its data and net included.
    finished = run_script("train.py", f"resume={run}", cwd=tmp_path)
    command = re.search(r"Train on: python \S+ (.*)", finished.stderr)[1]
    longer = run_script("train.py", *shlex.split(command), "trainer.max_epochs=9", cwd=tmp_path)
    assert longer.returncode == 0, longer.stderr[-3000:]
    assert metrics(run_dirs(tmp_path / "logs" / "train")[-1])["test/acc"] > 0.8


@pytest.mark.slow
def test_a_datamodule_of_your_own_that_knows_its_data_only_after_setup(tmp_path: Path) -> None:
    """tests/own_datamodule.py, with its config in a folder of the user's (hydra.searchpath), as
    configs/data/<name>.yaml: every debug config, a training stopped and resumed, eval (from the
    checkpoint's data config) and predict."""
    table = write_table(tmp_path / "table.csv", features=4, classes=3)
    (configs := tmp_path / "configs" / "data").mkdir(parents=True)
    own = f"_target_: own_datamodule.TableReadInSetup\npath: {table}\ntarget: species\nbatch_size: 16\n"
    (configs / "own.yaml").write_text(own)
    searchpath = f"hydra.searchpath=[file://{configs.parent}]"  # with value overrides (trained's)
    ours = ("data=own", "model/net=mlp", searchpath)
    for debug in sorted(p.stem for p in (CONFIGS / "debug").glob("*.yaml") if p.stem != "default"):
        result = run_script("train.py", *ours, f"debug={debug}", cwd=tmp_path)
        assert result.returncode == 0, f"debug={debug}: {result.stderr[-3000:]}"  # was: no data.num_workers
    stop = stop_at("on_train_batch_start", step=20)  # in the second epoch
    stopped = run_script("train.py", *ours, *EPOCHS, *stop, cwd=tmp_path)
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    (run,) = run_dirs(tmp_path / "logs" / "train")
    resumed = run_script("train.py", f"resume={run}", cwd=tmp_path)  # its config (searchpath too) again
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # Lightning says a DataLoader that keeps no state resumes mid-epoch inexactly (the project's own do).
    assert "your dataloader is not resumable" in resumed.stderr
    assert metrics(run)["test/acc"] > 0.8
    evaluated = run_script("eval.py", f"ckpt_path={best_checkpoint(run)}", "logger=csv", cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    (eval_run,) = run_dirs(tmp_path / "logs" / "eval")
    assert metrics(eval_run)["test/acc"] == pytest.approx(metrics(run)["test/acc"])
    rows = predictions(tmp_path, best_checkpoint(run), table)
    with table.open() as file:
        truth = [row["species"] for row in csv.DictReader(file)]
    assert sum(row["class"] == label for row, label in zip(rows, truth, strict=True)) > 0.8 * len(truth)


@pytest.mark.slow
def test_a_table_whose_last_training_batch_would_hold_one_row_trains(tmp_path: Path) -> None:
    # BatchNorm (the MLP's first layer) cannot train on one sample: 210 training rows in batches of 19 left
    # one row for the epoch's last batch, and training failed with "Expected more than 1 value per channel".
    data = ["data=csv", f"data.path={write_table(tmp_path / 'table.csv')}", "data.target=species"]
    result = run_script("train.py", *data, "model/net=mlp", "data.batch_size=19", *QUICK[:1], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert metrics(run_dirs(tmp_path / "logs" / "train")[0])["test/acc"] > 0.5
