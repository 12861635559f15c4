"""Every option of every config group composes, resolves and names real code."""

from importlib.resources import files
from pathlib import Path

import hydra
import pytest
from conftest import CONFIG_MODULE, compose_config, run_script
from omegaconf import OmegaConf

CONFIGS = files(CONFIG_MODULE)
# Groups whose options need a value only the user has (data=image_folder needs data.root=...).
NEEDS = {("data", "image_folder"): ["data.root=x"], ("data", "csv"): ["data.path=x.csv", "data.target=y"]}


def groups(folder=CONFIGS, prefix: str = "") -> list[str]:
    """Every config group below configs/, e.g. data, model/net, hydra/launcher."""
    found = []
    for child in folder.iterdir():
        if child.is_dir() and not child.name.startswith("__"):
            name = f"{prefix}{child.name}"
            if any(p.name.endswith(".yaml") for p in child.iterdir()) and name != "hydra":
                found.append(name)
            found += groups(child, f"{name}/")
    return sorted(found)


def options(group: str) -> list[str]:
    """A group's options; files starting with _ are shared parts, not options."""
    return sorted(
        p.name[:-5]
        for p in CONFIGS.joinpath(group).iterdir()
        if p.name.endswith(".yaml") and p.name[0] != "_"
    )


ALL = [(group, option) for group in groups() for option in options(group)]


def test_the_documented_groups_are_there() -> None:
    expected = {"data", "model", "model/net", "trainer", "strategy", "logger", "callbacks", "paths", "debug"}
    assert expected | {"experiment", "extras"} <= set(groups())


@pytest.mark.parametrize(("group", "option"), ALL, ids=[f"{g}={o}" for g, o in ALL])
def test_option_composes_and_resolves(group: str, option: str, tmp_path: Path) -> None:
    cfg = compose_config("train", tmp_path, [f"{group}={option}", *NEEDS.get((group, option), [])])
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    # Every _target_ must import: a typo in a class path fails here, not after an hour of training.
    for target in targets(container):
        assert hydra.utils.get_object(target) is not None


def test_help_lists_every_group_with_its_options_and_runs_nothing(tmp_path: Path) -> None:
    result = run_script("train.py", "--help", cwd=tmp_path, PYTHONPROFILEIMPORTTIME="1")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    imported = {line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")}
    assert "torch" not in imported and "lightning" not in imported  # Hydra alone answers
    for group in groups():
        if not group.startswith("hydra/"):  # Hydra's own groups are in --hydra-help
            assert f"\n{group}: " in result.stdout
    assert "\ntask_name: train\n" in result.stdout
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("name", ["train", "eval", "predict", "export"])
def test_each_command_shows_its_resolved_config_and_runs_nothing(name: str, tmp_path: Path) -> None:
    result = run_script(f"{name}.py", "--cfg", "job", "--resolve", cwd=tmp_path)  # Hydra's way to look
    assert result.returncode == 0, result.stderr
    assert f"task_name: {name}" in result.stdout.splitlines() and "${" not in result.stdout
    assert not (tmp_path / "logs").exists()


def test_experiment_changes_model_and_optimizer(tmp_path: Path) -> None:
    default = compose_config("train", tmp_path)
    example = compose_config("train", tmp_path, ["experiment=example"])
    assert example.model.net != default.model.net
    assert example.model.optimizer._target_ != default.model.optimizer._target_


def test_the_trainer_flags_lightning_users_reach_for_need_no_plus(tmp_path: Path) -> None:
    # A probe: trainer.gradient_clip_val=1.0 (and the others) failed, Hydra asking for `+`.
    flags = {"gradient_clip_val": 1.0, "val_check_interval": 0.5, "max_time": "00:00:10:00"}
    cfg = compose_config("train", tmp_path, [f"trainer.{key}={value}" for key, value in flags.items()])
    trainer = hydra.utils.instantiate(cfg.trainer, logger=False, enable_checkpointing=False)
    assert (trainer.gradient_clip_val, trainer.val_check_interval) == (1.0, 0.5)
    (timer,) = [c for c in trainer.callbacks if type(c).__name__ == "Timer"]  # Lightning's, for max_time
    assert timer.time_remaining() == 600


def targets(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["_target_"]] if "_target_" in node else []
        return found + [t for value in node.values() for t in targets(value)]
    if isinstance(node, list):
        return [t for value in node for t in targets(value)]
    return []
