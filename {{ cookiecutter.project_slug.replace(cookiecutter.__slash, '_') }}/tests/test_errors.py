"""Bad input gets one short paragraph naming the value and what is accepted, no traceback."""

import re
from pathlib import Path

import hydra
import pytest
from conftest import compose_config, run_script
from hydra.errors import InstantiationException


def assert_clear_error(result, *expected: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 15, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


def test_unknown_group_option_lists_the_available_ones(tmp_path: Path) -> None:
    result = run_script("train.py", "model/net=resnet9000", cwd=tmp_path)
    assert_clear_error(result, "model/net/resnet9000", "Available options", "mlp")


def test_misspelled_key_is_named(tmp_path: Path) -> None:
    result = run_script("train.py", "trainer.max_epoch=3", cwd=tmp_path)
    assert_clear_error(result, "trainer.max_epoch")


@pytest.mark.parametrize("script", ["train.py", "eval.py"])
def test_missing_checkpoint_is_named(script: str, tmp_path: Path) -> None:
    result = run_script(script, "ckpt_path=/no/such/model.ckpt", cwd=tmp_path)
    assert_clear_error(result, "ckpt_path='/no/such/model.ckpt'", "no such checkpoint file")


def test_eval_without_checkpoint_says_what_to_pass(tmp_path: Path) -> None:
    result = run_script("eval.py", cwd=tmp_path)
    assert_clear_error(result, "ckpt_path is not set")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.val_fraction=0.85", "data.val_fraction + data.test_fraction = 1.0: must be below 1"),
        ("data.test_fraction=1.5", "data.test_fraction=1.5: must be between 0 and 1"),
        ("data.batch_size=0", "data.batch_size=0: must be a positive integer"),
    ],
)
def test_impossible_data_settings_are_named(override: str, message: str, tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path, [override])
    with pytest.raises(InstantiationException, match=re.escape(message)):
        hydra.utils.instantiate(cfg.data)


def test_non_positive_loss_check_interval_is_named(tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path, ["callbacks.stop_on_non_finite_loss.every_n_steps=0"])
    message = "callbacks.stop_on_non_finite_loss.every_n_steps=0: must be a positive integer"
    with pytest.raises(InstantiationException, match=re.escape(message)):
        hydra.utils.instantiate(cfg.callbacks.stop_on_non_finite_loss)
