"""The data path through the DataModule's public API: a DataModule of yours passes these too."""

import itertools
import multiprocessing
import re
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import hydra
import numpy as np
import pytest
import torch
from conftest import compose_config, write_image_folder, write_table
from PIL import Image

from {{ cookiecutter.package_name }}.utils.runs import catch_signals

# The DataModules these tests check, by the name made() knows them by: add yours to both.
KINDS = ["default", "image_folder", "csv"]


def made(tmp_path: Path, data: str, *more: str) -> object:
    """A DataModule as train.py makes it: the project's default, or one of yours (`more`: overrides)."""
    overrides = []
    if data == "image_folder":
        root = write_image_folder(tmp_path / "images")
        overrides = ["data=image_folder", f"data.root={root}", "data.image_size=[12,10]"]
    elif data == "csv":
        overrides = ["data=csv", f"data.path={write_table(tmp_path / 'table.csv')}", "data.target=species"]
    datamodule = hydra.utils.instantiate(
        compose_config("train", tmp_path, [*overrides, "data.batch_size=16", *more]).data
    )
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule


def labels(loader: object) -> list[int]:
    return [int(y) for _, batch in loader for y in batch]


@pytest.fixture(params=KINDS)
def datamodule(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    return made(tmp_path, request.param)


def test_batches_fit_the_model_s_input_shape_and_classes(datamodule: object) -> None:
    x, y = next(iter(datamodule.train_dataloader()))
    assert tuple(x.shape[1:]) == tuple(datamodule.input_shape) and x.dtype == torch.float32
    assert len(datamodule.class_names) >= 2
    assert int(y.min()) >= 0 and int(y.max()) < len(datamodule.class_names)


def test_one_image_size_makes_square_inputs(tmp_path: Path) -> None:
    images = write_image_folder(tmp_path / "images")
    square = ["data=image_folder", f"data.root={images}", "data.image_size=12"]
    cfg = compose_config("train", tmp_path, square)
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    x, _ = next(iter(datamodule.train_dataloader()))
    assert datamodule.input_shape == (3, 12, 12) and tuple(x.shape[1:]) == (3, 12, 12)


def test_images_in_sub_folders_of_a_class_folder_belong_to_it_hidden_ones_not(tmp_path: Path) -> None:
    images = write_image_folder(tmp_path / "images")  # 3 classes of 40
    (part := images / "class_0" / "part_1").mkdir()
    for path in sorted((images / "class_0").glob("*.png"))[:25]:
        path.rename(part / path.name)
    for hidden in (images / "class_1" / "._000.png", part / ".thumb.png"):  # macOS's, an app's: not images
        hidden.write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    (jupyter := images / "class_2" / ".ipynb_checkpoints").mkdir()  # a copy, in a hidden folder: not data
    shutil.copy(images / "class_2" / "000.png", jupyter / "000-checkpoint.png")
    cfg = compose_config("train", tmp_path, ["data=image_folder", f"data.root={images}"])
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    datamodule.setup("test")
    loaders = datamodule.train_dataloader(), datamodule.val_dataloader(), datamodule.test_dataloader()
    served = [label for loader in loaders for label in labels(loader)]
    assert len(served) == 120 and served.count(0) == 40


def test_what_checkpoints_keep_of_a_datamodule_is_plain_data(datamodule: object, tmp_path: Path) -> None:
    # Lightning saves its arguments in every checkpoint; eval.py, predict.py, resume= load with weights_only.
    torch.save(dict(datamodule.hparams), tmp_path / "hparams.pt")
    assert torch.load(tmp_path / "hparams.pt", weights_only=True) == dict(datamodule.hparams)


def test_every_class_is_in_every_split(datamodule: object) -> None:
    splits = [datamodule.train_dataloader(), datamodule.val_dataloader(), datamodule.test_dataloader()]
    counts = [len(labels(loader)) for loader in splits]
    assert counts[0] > counts[1] > 0 and counts[2] > 0
    assert all(set(labels(loader)) == set(range(len(datamodule.class_names))) for loader in splits)


def samples(loader: object, epoch: int) -> list[tuple[float, ...]]:
    if hasattr(loader.sampler, "set_epoch"):
        loader.sampler.set_epoch(epoch)  # as Lightning does at each epoch's start
    return [tuple(x.flatten().tolist()) for batch, _ in loader for x in batch]


def test_each_epoch_serves_every_training_sample_once_in_a_new_order(datamodule: object) -> None:
    loader = datamodule.train_dataloader()
    first, second = samples(loader, 1), samples(loader, 2)
    assert first != second and sorted(first) == sorted(second)
    dataset = (loader.dataset[i] for i in range(len(loader.dataset)))
    every = Counter(tuple(x.flatten().tolist()) for x, _ in dataset)
    assert not Counter(first) - every  # none twice
    # All, but one where the last batch would hold it alone (BatchNorm trains on 2 or more).
    assert every.total() - len(first) == (every.total() % loader.batch_size if loader.drop_last else 0)


def test_a_loader_restored_in_the_middle_of_an_epoch_serves_the_rest_of_it(datamodule: object) -> None:
    loader = datamodule.train_dataloader()
    epoch = samples(loader, 1)
    stream = iter(loader)
    head = [tuple(x.flatten().tolist()) for _ in range(2) for x in next(stream)[0]]
    restored = datamodule.train_dataloader()
    assert hasattr(restored, "load_state_dict"), "a plain DataLoader cannot; torchdata's StatefulDataLoader"
    restored.load_state_dict(loader.state_dict())  # what a checkpoint holds
    assert head + samples(restored, 1) == epoch


@pytest.mark.parametrize("data", KINDS)
def test_loader_workers_signalled_with_the_whole_run_keep_serving(data: str, tmp_path: Path) -> None:
    # `timeout`, a terminal and SLURM signal every process of a run: torch's workers died of SIGTERM, and
    # the run failed before it could stop at a safe point (the main process stops them; a probe's find).
    loader = made(tmp_path, data, "data.num_workers=2").train_dataloader()
    catch_signals()  # as train.py does first: the workers, started now, are a run's
    stream = iter(loader)
    try:
        next(stream)
        workers = [str(child.pid) for child in multiprocessing.active_children()]
        assert len(workers) == 2
        for name in ("TERM", "INT", "USR1"):  # from another process, as from outside
            subprocess.run(["kill", f"-{name}", *workers], check=True)
        time.sleep(0.5)
        assert len(list(stream)) == len(loader) - 1
    finally:
        catch_signals(note=False)
        stream._shutdown_workers()  # as Lightning does at the end of a stage


@pytest.mark.parametrize("suffix", [".png", ".jpg"])  # cut: Pillow fails decoding a PNG, opening a JPEG
def test_a_damaged_image_is_named_when_it_is_read(suffix: str, tmp_path: Path) -> None:
    images = write_image_folder(tmp_path / "images")
    with Image.open(original := images / "class_1" / "007.png") as image:
        image.convert("RGB").save(damaged := original.with_suffix(suffix))  # as PNG or JPEG
    whole = damaged.read_bytes()
    damaged.write_bytes(whole[: len(whole) // 2])  # a copy cut short (the JPEG: "Truncated File Read")
    cfg = compose_config("train", tmp_path, ["data=image_folder", f"data.root={images}"])
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    loaders = [datamodule.train_dataloader(), datamodule.val_dataloader(), datamodule.test_dataloader()]
    named = re.escape(f"{damaged}: ") + "(image file is truncated|Truncated File Read)"  # Pillow's words
    with pytest.raises(OSError, match=named):
        for loader in loaders:
            list(loader)


def test_16_bit_images_keep_their_contrast(tmp_path: Path) -> None:
    pixels = np.linspace(0, 65535, 64).astype(np.uint16).reshape(8, 8)  # microscopes, scanners: 16-bit gray
    for label in ("a", "b"):
        (tmp_path / "deep" / label).mkdir(parents=True)
        for i in range(10):
            Image.fromarray(pixels).save(tmp_path / "deep" / label / f"{i}.png")
    cfg = compose_config(
        "train", tmp_path, ["data=image_folder", f"data.root={tmp_path / 'deep'}", "data.channels=1"]
    )
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    x, _ = next(iter(datamodule.train_dataloader()))
    assert torch.allclose(x[0, 0], torch.from_numpy(pixels / 65535).float(), atol=1 / 255)


def test_a_photo_is_read_as_shown_turned_by_its_exif_orientation(tmp_path: Path) -> None:
    stored = np.zeros((20, 40, 3), np.uint8)  # 20 high, 40 wide, as a camera writes it; the left half white
    stored[:, :20] = 255
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: shown turned a quarter clockwise, 40 high, 20 wide, white on top
    for label in ("a", "b"):
        (tmp_path / "photos" / label).mkdir(parents=True)
        for i in range(10):
            Image.fromarray(stored).save(tmp_path / "photos" / label / f"{i}.jpg", exif=exif)
    cfg = compose_config("train", tmp_path, ["data=image_folder", f"data.root={tmp_path / 'photos'}"])
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    x, _ = next(iter(datamodule.train_dataloader()))
    assert datamodule.input_shape == (3, 40, 20) and tuple(x.shape[1:]) == (3, 40, 20)
    assert x[:, :, :20].mean() > 0.9 and x[:, :, 20:].mean() < 0.1  # was: sideways, white on the left


def test_a_csv_with_a_byte_order_mark_is_read_in_training_and_predict(tmp_path: Path) -> None:
    from {{ cookiecutter.package_name }}.predict import read_inputs

    excel = tmp_path / "excel.csv"  # Excel's "CSV UTF-8" begins with one
    excel.write_bytes(b"\xef\xbb\xbf" + write_table(tmp_path / "table.csv").read_bytes())
    cfg = compose_config("train", tmp_path, ["data=csv", f"data.path={excel}", "data.target=species"])
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    assert datamodule.features == ["width", "height", "depth", "mass"]  # was: "\\ufeffwidth", ...
    assert datamodule.class_names == ["kind_0", "kind_1", "kind_2"]
    assert len(read_inputs(excel, datamodule)) == 300


def test_labels_are_read_without_spaces_around_them(tmp_path: Path) -> None:
    # " barolo " and "barolo" were two classes (a walk's: 6 classes of wine's 3, trained, exit 0).
    (table := tmp_path / "t.csv").write_text("a,y\n1, x\n2,x \n3,w\n4,w\n5,x\n")
    datamodule = hydra.utils.instantiate(
        compose_config("train", tmp_path, ["data=csv", f"data.path={table}", "data.target=y"]).data
    )
    assert datamodule.class_names == ["w", "x"] and datamodule.load()[1] == [1, 1, 0, 0, 1]


def test_a_value_past_the_header_s_columns_is_no_feature(tmp_path: Path) -> None:
    # A trailing comma on the first row made a feature named None ("a row does not fit: {..., None: ['']}").
    (table := tmp_path / "t.csv").write_text("a,y\n1,x,\n2,x\n3,w\n4,w\n")
    datamodule = hydra.utils.instantiate(
        compose_config("train", tmp_path, ["data=csv", f"data.path={table}", "data.target=y"]).data
    )
    assert datamodule.features == ["a"] and datamodule.load()[0].tensors[0].flatten().tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "pixels", [np.linspace(0, 1, 64, dtype=np.float32), np.arange(64, dtype=np.int32) << 20]
)
def test_32_bit_images_are_refused_by_name(tmp_path: Path, pixels: np.ndarray) -> None:
    # Float or 32-bit TIFFs (Pillow modes F, I) carry no range to scale from: 8 bits by clipping were
    # all black (floats in [0, 1]) or all white, silently.
    for label in ("a", "b"):
        (tmp_path / "wide" / label).mkdir(parents=True)
        for i in range(10):
            Image.fromarray(pixels.reshape(8, 8)).save(tmp_path / "wide" / label / f"{i}.tiff")
    cfg = compose_config("train", tmp_path, ["data=image_folder", f"data.root={tmp_path / 'wide'}"])
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    with pytest.raises(
        ValueError, match=rf"{tmp_path / 'wide'}/\w/\d\.tiff: 32-bit pixels .*accepted: 8 or 16"
    ):
        next(iter(datamodule.train_dataloader()))


def test_test_set_is_the_same_whatever_the_training_seed(tmp_path: Path) -> None:
    sets = []
    for seed in (1, 2):
        cfg = compose_config("train", tmp_path, [f"seed={seed}"])
        datamodule = hydra.utils.instantiate(cfg.data)
        datamodule.prepare_data()
        datamodule.setup("fit")
        sets.append(torch.cat([x for x, _ in datamodule.test_dataloader()]))
    assert torch.equal(*sets)


def test_folds_are_disjoint_cover_the_data_outside_the_test_set_and_keep_it(tmp_path: Path) -> None:
    folds = [made(tmp_path, "default", f"data.fold={k}") for k in range(5)]
    vals = [set(f.splits["val"].indices) for f in folds]
    assert all(a.isdisjoint(b) for a, b in itertools.combinations(vals, 2))
    rest = set(folds[0].splits["train"].indices) | vals[0]
    assert set().union(*vals) == rest
    assert all(f.splits["test"].indices == folds[0].splits["test"].indices for f in folds)


@pytest.mark.parametrize(
    ("files", "overrides", "message"),
    [
        ({}, ["data=image_folder", "data.root={tmp}/none"], "no such folder"),
        (
            {"one/a.png": b""},
            ["data=image_folder", "data.root={tmp}"],
            "has 1 class folders: it needs 2 or more",
        ),
        ({"a/x.txt": b"", "b/y.txt": b""}, ["data=image_folder", "data.root={tmp}"], "files in ['a', 'b']"),
        (
            {"a/x.png": b"", "b/y.png": b"", "c/notes.txt": b""},  # an empty class would be one no sample has
            ["data=image_folder", "data.root={tmp}"],
            "webp files in ['c']",
        ),
        (
            {"a/x.png": b"", "b/y.png": b""},
            ["data=image_folder", "data.root={tmp}", "data.image_size=0"],
            "data.image_size=0: accepted: [height, width], a size or null",
        ),
        ({}, ["data=csv", "data.path={tmp}/none.csv", "data.target=y"], "no such file"),
        (
            {"t.csv": b"a,b\\n1,2\\n"},
            ["data=csv", "data.path={tmp}/t.csv", "data.target=y"],
            "no column 'y': it has ['a', 'b']",
        ),
        (  # lines as numbered in the file: a blank one (csv skips it) counts
            {"t.csv": b"a,y\\n1,x\\n\\nnan,w\\n2,x\\ninf,w\\n"},
            ["data=csv", "data.path={tmp}/t.csv", "data.target=y"],
            "NaN or infinite values on lines [4, 6]",
        ),
        ({"t.csv": b"a,y\\n"}, ["data=csv", "data.path={tmp}/t.csv", "data.target=y"], "header and no rows"),
        (  # a column renamed by hand as another: it held the other's values (a walk's, silently)
            {"t.csv": b"a,b,a,y\\n1,2,3,x\\n"},
            ["data=csv", "data.path={tmp}/t.csv", "data.target=y"],
            "its header names ['a'] more than once: rename all but one",
        ),
        (
            {"t.csv": b"a,y\\n1,x\\n\\nz,w\\n"},
            ["data=csv", "data.path={tmp}/t.csv", "data.target=y"],
            "t.csv:4 does not fit: {'a': 'z'}; data.features: numbers, none blank",
        ),
        (
            {"t.csv": b"a,y\\n1,x\\n,w\\n"},
            ["data=csv", "data.path={tmp}/t.csv", "data.target=y"],
            "{'a': ''}; data.features: numbers, none blank",  # a blank: the message says they are refused
        ),
        (
            {"t.csv": b"a,y\\n1,x\\n2,\\n3, \\n\\n4\\n"},  # no label: blank, or a row cut short
            ["data=csv", "data.path={tmp}/t.csv", "data.target=y"],
            "no y on lines [3, 4, 6]",
        ),
        (  # a comma in a value, unquoted: the values after it were read as the next columns' (silently)
            {"t.csv": b"a,b,y\n1,2,x\n1,5,2,x\n3,4,w,\n"},  # a trailing comma: an empty value, no more
            ["data=csv", "data.path={tmp}/t.csv", "data.target=y"],
            "more values than columns on lines [3]",
        ),
    ],
)
def test_unusable_data_is_named(files: dict, overrides: list, message: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    for name, content in files.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_bytes(content.replace(b"\\n", b"\n"))
    cfg = compose_config("train", tmp_path / "run", [o.format(tmp=data) for o in overrides])
    datamodule = hydra.utils.instantiate(cfg.data)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        datamodule.prepare_data()
        datamodule.setup("fit")
        assert datamodule.input_shape
