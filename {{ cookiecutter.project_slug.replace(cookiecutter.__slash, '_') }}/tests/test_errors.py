"""Bad input gets one short message naming the value and what is accepted, before torch loads."""

import json
import re
import types
import typing
from pathlib import Path

import hydra
import pytest
import torch
from conftest import (
    best_checkpoint,
    compose_config,
    run_dirs,
    run_script,
    type_checked,
    write_image_folder,
    write_table,
)
from hydra.errors import InstantiationException
from omegaconf import OmegaConf


def assert_clear_error(result, *expected: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line and not line.startswith("import time:")]
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]  # 0: it ran
    assert "Error in call to target" not in result.stderr  # Hydra's wrapping of an __init__'s error
    assert len(lines) <= 8, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.max_epochs=abc", "trainer.max_epochs='abc': expected an integer"),
        ("seed=abc", "seed='abc': expected an integer"),
        ("data.batch_size=abc", "data.batch_size='abc': expected an integer"),
        ("model.optimizer.lr=abc", "model.optimizer.lr='abc': expected a number"),
        ("trainer.max_epochs=2.5", "trainer.max_epochs=2.5: expected an integer"),
        ("trainer.max_epochs=0", "trainer.max_epochs=0: accepted: a positive integer"),
        ("trainer.max_epochs=-1", "trainer.max_epochs=-1: accepted: a positive integer"),
        ("trainer.accumulate_grad_batches=0", "accumulate_grad_batches=0: accepted: a positive integer"),
        ("extras.float32_matmul_precision=exact", "precision='exact': accepted: highest, high, medium"),
        ("train=maybe", "train='maybe': expected true or false"),
        ("train=false", "train=false tests the checkpoint at ckpt_path: pass ckpt_path=<a .ckpt file>"),
        ("experiment=finetune", "pretrained: required to fine-tune"),
        # A resume's pretrained= is in its run's config: it was refused as above, before its run was found.
        ("experiment=finetune resume=latest", "resume=latest: no unfinished run in"),
        ("data=image_folder data.root=???", "data.root: required"),  # ???: left out (yours may set it)
        # What the data configs share (--help lists it): it was an AttributeError traceback.
        ("data=_common", "data._target_: required, and no value given"),
        # A group given as a list: its options' values are checked too.
        (
            "callbacks=[default,early_stopping] callbacks.early_stopping.patience=abc",
            "callbacks.early_stopping.patience='abc': expected an integer (the default is 5)",
        ),
    ],
)
def test_a_value_left_out_or_of_the_wrong_type_is_named_before_torch_loads(
    override: str, message: str, tmp_path: Path
) -> None:
    result = run_script("train.py", *override.split(), cwd=tmp_path, PYTHONPROFILEIMPORTTIME="1")
    assert_clear_error(result, message)
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "import time:" in line
    }
    assert "torch" not in imported and "lightning" not in imported
    assert not run_dirs(tmp_path / "logs")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data=image_folder", "data.root=/no/such/folder"], "data.root='/no/such/folder': no such folder."),
        (["data=csv", "data.path=/no/such.csv", "data.target=y"], "data.path='/no/such.csv': no such file."),
        (
            ["data=csv", "data.path={cities}", "data.target=y", "model/net=mlp"],
            "cities.csv:2 does not fit: {'size': '1', 'city': 'paris'}; data.features: numbers, none blank",
        ),
        (
            ["data=image_folder", "data.root={images}", "data.image_size=[8,8,3]"],
            "data.image_size=[8, 8, 3]: accepted: [height, width], a size or null",
        ),
        (["data.fold=7"], "data.fold=7: must be null or 0 to 4 (data.num_folds)."),
        (["data.fold=abc"], "data.fold='abc': must be null or 0 to 4"),  # was: '<=' not supported between ...
        # Found when the data is split (DataModule.setup), still before training: one image in a class
        # (named: sklearn said [0, 1]),
        (["data=image_folder", "data.root={lonely}"], "too few members are: ['class_0', 'class_1']"),
        # and an empty class folder where data.image_size spares reading the first image for its size.
        (["data=image_folder", "data.root={gap}", "data.image_size=16"], ".webp files in ['empty']"),
{%- if cookiecutter.example == 'digits' %}
        # Your images without data=image_folder: the digits' config (8x8 gray) read them, silently.
        (["data=digits", "data.root={images}"], "not the digits: add data=image_folder"),
        (
            ["data=csv", "data.path={table}", "data.target=species", "model/net=cnn"],
            "model/net=cnn takes images (C, H, W), not [4]: use model/net=mlp",
        ),
{%- endif %}
    ],
)
def test_data_a_run_cannot_use_is_one_message(overrides: list, message: str, tmp_path: Path) -> None:
    (cities := tmp_path / "cities.csv").write_text("size,city,y\n1,paris,a\n2,3,b\n")  # a text feature
    data = {"table": write_table(tmp_path / "table.csv"), "images": write_image_folder(tmp_path / "images")}
    data["cities"] = cities
    data["lonely"] = write_image_folder(tmp_path / "lonely", classes=2, per_class=1)
    data["gap"] = write_image_folder(tmp_path / "gap", classes=2, per_class=3)
    (data["gap"] / "empty").mkdir()
    result = run_script("train.py", *[o.format(**data) for o in overrides], cwd=tmp_path)
    assert_clear_error(result, message)
    assert not run_dirs(tmp_path / "logs" / "train" / "runs")


@pytest.mark.parametrize(
    ("script", "overrides", "message"),
    [
        ("eval.py", ["data=image_folder", "data.root=/no/such"], "data.root='/no/such': no such folder"),
        (
            "eval.py",
            ["data=image_folder", "data.root={images}", "data.channels=5"],
            "data.channels=5: accepted are 1 (grayscale) and 3 (RGB).",
        ),
        ("eval.py", ["data=csv", "data.path=/no.csv", "data.target=y"], "data.path='/no.csv': no such file"),
        # Values left out: were OmegaConf's MissingMandatoryValue traceback (now checked as in train.py)
        ("eval.py", ["data=csv", "data.path=???", "data.target=???"], "data.path, data.target: required"),
        ("predict.py", ["input={notes}", "data=image_folder", "data.root=???"], "data.root: required"),
        ("predict.py", ["input={notes}"], "input='{notes}' holds nothing this model takes; {reads}"),
        ("predict.py", ["input={broken}"], "{unreadable}"),
        (  # trained longer (ckpt_path=) on other data: was Lightning's state_dict size mismatch traceback
            "train.py",
            ["data=csv", "data.path={table}", "data.target=species", "model/net=mlp"],
            "was trained on inputs of shape {trained}",
        ),
    ],
)
def test_every_entry_point_names_data_its_checkpoint_cannot_use(
    script: str, overrides: list, message: str, trained_run: tuple, tmp_path: Path
) -> None:
    (notes := tmp_path / "notes.txt").write_text("hello")
    (broken := tmp_path / "broken.png").write_bytes(b"\x89PNG not really")
    data = {"images": write_image_folder(tmp_path / "images"), "notes": notes, "broken": broken}
    data["table"] = write_table(tmp_path / "table.csv")
    trained = torch.load(best := best_checkpoint(trained_run[0]), weights_only=True)["hyper_parameters"]
    data["trained"] = f"{list(trained['input_shape'])} in {len(trained['class_names'])} classes"  # yours too
    images, rows = len(trained["input_shape"]) == 3, len(trained["input_shape"]) == 1  # what predict.py reads
    data["reads"] = "it accepts" if images or rows else "add a reader of its inputs to predict.py"
    data["unreadable"] = f"cannot identify image file '{broken}'" if images else data["reads"]
    result = run_script(script, f"ckpt_path={best}", *[o.format(**data) for o in overrides], cwd=tmp_path)
    assert_clear_error(result, message.format(**data))
    if script == "train.py":  # a new run that failed leaves nothing behind (eval's and predict's, their log)
        assert not run_dirs(tmp_path / "logs" / "train" / "runs")


@pytest.mark.parametrize(
    ("override", "message"),
    [  # Lightning restores the optimizer's state and settings: another net or optimizer was its traceback,
{%- if cookiecutter.example == 'digits' %}
        ("model/net=mlp", "model.net {'_target_': '<net>'"),
{%- else %}
        ("model.net.hidden=[8]", "not {'_target_': '<net>', 'hidden': [8]"),
{%- endif %}
        ("model.optimizer._target_=torch.optim.SGD", "not {'_target_': 'torch.optim.SGD', 'lr': <lr>"),
        # and another learning rate was silently the checkpoint's (its config.yaml said otherwise).
        ("model.optimizer.lr=0.0001", "not {'_target_': 'torch.optim.AdamW', 'lr': 0.0001"),
    ],
)
def test_a_checkpoint_continues_with_its_own_net_and_optimizer(
    override: str, message: str, trained_run: tuple, tmp_path: Path
) -> None:
    checkpoint = best_checkpoint(trained_run[0])
    trained = OmegaConf.load(trained_run[0] / "config.yaml").model  # the default net and rate: yours too
    message = message.replace("<net>", trained.net._target_).replace("<lr>", str(trained.optimizer.lr))
    result = run_script("train.py", f"ckpt_path={checkpoint}", override, "trainer.max_epochs=5", cwd=tmp_path)
    assert_clear_error(result, f"ckpt_path='{checkpoint}' was trained with", message)
    assert f"start anew from its weights: pretrained={checkpoint} (eval.py tests it as is)" in result.stderr
    assert not run_dirs(tmp_path / "logs" / "train" / "runs")


def test_a_finished_run_s_checkpoint_trains_on_with_more_epochs_only(
    trained_run: tuple, tmp_path: Path
) -> None:
    # It trained nothing, tested the other run's best checkpoint and wrote that as its own metrics.json.
    last = trained_run[0] / "checkpoints" / "last.ckpt"
    result = run_script("train.py", f"ckpt_path={last}", "trainer.max_epochs=4", cwd=tmp_path)
    assert_clear_error(result, f"trainer.max_epochs=4: {last} has begun 4 epochs, ended 4: pass more.")
    assert not run_dirs(tmp_path / "logs" / "train" / "runs")


def test_a_new_run_that_fails_in_training_leaves_nothing_behind(tmp_path: Path) -> None:
    # With the project's default logger started: W&B's run wrote into the deleted run again at exit.
    result = run_script("train.py", "model.optimizer._target_=torch.optim.SGDD", cwd=tmp_path)
    assert_clear_error(result, "Error locating target 'torch.optim.SGDD'")
    assert not [*(tmp_path / "logs" / "train" / "runs").iterdir()]


def test_lightning_s_values_of_several_types_pass_the_type_check(tmp_path: Path) -> None:
    overrides = ["trainer.devices=auto", "trainer.deterministic=warn", "debug=fdr", "logger=[]"]
    result = run_script("train.py", *overrides, cwd=tmp_path)  # refused as not integers, not true or false
    assert result.returncode == 0, result.stderr[-3000:]
    listed = run_script("train.py", "trainer=cpu", "trainer.devices=[0]", *overrides[2:], cwd=tmp_path)
    assert "expected an integer" not in listed.stderr  # on a GPU a list picks devices; on the CPU, Lightning:
    assert "`devices` selected with `CPUAccelerator` should be an int > 0" in listed.stderr


def test_the_type_check_takes_every_type_each_target_takes(tmp_path: Path) -> None:
    """The check knows each key's default alone: an argument of several types was refused in all but its
    default's (`trainer.devices=auto`, `check_val_every_n_epoch=null`, `limit_train_batches=0.1` under
    debug=limit). For every `_target_` in the config (the Trainer, callbacks, data, net, optimizer, ...), a
    value of each type its annotation allows passes (null too), but trainer.max_epochs=null: no schedule."""
    from collections.abc import Sequence

    examples = {int: 2, float: 0.5, bool: True, str: "auto", list[int]: [0, 1], Sequence[int]: [8, 8]}
    examples[type(None)] = None
    cfg, tried = compose_config("train", tmp_path, ["debug=limit", "logger=csv"]), {}
    targets = [(key, node) for key, node in cfg.items_ex(resolve=False) if OmegaConf.is_dict(node)]
    targets += [
        (f"{key}.{name}", child)
        for key, node in targets
        for name, child in node.items_ex(resolve=False)
        if OmegaConf.is_dict(child) and key in ("model", "callbacks", "logger")
    ]
    for key, node in [(key, node) for key, node in targets if "_target_" in node]:
        target, hints = hydra.utils.get_object(node._target_), {}
        for cls in reversed(getattr(target, "__mro__", [target])):  # **options: a base class's arguments
            hints.update(typing.get_type_hints(cls.__init__ if isinstance(cls, type) else cls))
        plain = [
            name for name in node if name in hints and not OmegaConf.is_dict(node[name])
        ]  # not net=, ...
        for name in (name for name in plain if f"{key}.{name}" != "trainer.max_epochs"):
            union = typing.get_origin(hints[name]) in (typing.Union, types.UnionType)
            for kind in typing.get_args(hints[name]) if union else [hints[name]]:
                literal = typing.get_origin(kind) is typing.Literal  # precision's 16, "16-mixed", ...
                for value in typing.get_args(kind) if literal else [examples.get(kind, ...)]:
                    if value is not ...:
                        tried.setdefault(f"{key}.{name}", []).append(json.dumps(value, separators=(",", ":")))
    assert {"trainer.devices", "callbacks.last_checkpoint.every_n_epochs", "data.fold"} <= set(tried)
    for round in range(max(map(len, tried.values()))):  # one value of each key at a time
        overrides = [
            "debug=limit",
            "logger=csv",
            *(f"{k}={values[round]}" for k, values in tried.items() if round < len(values)),
        ]
        type_checked(tmp_path, overrides)


def test_values_of_the_right_type_pass(tmp_path: Path) -> None:
    # An int for a float (lr), null for any value (no seed), and one of Lightning's several types.
    type_checked(tmp_path, ["model.optimizer.lr=1", "seed=null", "trainer.devices=2"])


def test_unknown_group_option_lists_the_available_ones(tmp_path: Path) -> None:
    result = run_script("train.py", "model/net=resnet9000", cwd=tmp_path)
    assert "Traceback" not in result.stderr and result.returncode == 1
    assert "model/net/resnet9000" in result.stderr and "Available options" in result.stderr


def test_misspelled_key_is_named(tmp_path: Path) -> None:
    result = run_script("train.py", "trainer.max_epoch=3", cwd=tmp_path)
    assert "trainer.max_epoch" in result.stderr and result.returncode == 1


def test_a_missing_checkpoint_is_one_message_without_a_traceback(tmp_path: Path) -> None:
    result = run_script("eval.py", "ckpt_path=/no/such/model.ckpt", cwd=tmp_path)
    assert_clear_error(result, "ckpt_path='/no/such/model.ckpt': no such checkpoint file")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.val_fraction=0.85", "data.val_fraction=0.85, data.test_fraction=0.15: each"),
        ("data.test_fraction=1.5", "data.test_fraction=1.5: each must be between 0 and 1, their sum below 1"),
        ("data.batch_size=0", "data.batch_size=0: accepted: an integer, at least 1."),
        ("data.num_workers=-2", "data.num_workers=-2: accepted: an integer, at least 0."),  # was a traceback
        ("data.num_folds=1", "data.num_folds=1: accepted: an integer, at least 2."),  # was sklearn's words
        ("data.fold=7", "data.fold=7: must be null or 0 to 4"),
    ],
)
def test_impossible_data_settings_are_named(override: str, message: str, tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path, [override])
    with pytest.raises(InstantiationException, match=re.escape(message)):
        hydra.utils.instantiate(cfg.data)
