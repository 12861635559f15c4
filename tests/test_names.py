"""Project, folder and package names: derived from the project name, overridable, validated."""

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN, TEMPLATE, bake, run

spec = importlib.util.spec_from_file_location("pre_gen_project", TEMPLATE / "hooks" / "pre_gen_project.py")
hook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hook)

VALID = {
    "project_name": "Digits",
    "project_slug": "digits",
    "package_name": "digits",
    "author_email": "a@b.io",
}


@pytest.mark.parametrize(
    ("name", "slug", "package"),
    [
        ("My Project", "my-project", "my_project"),
        ("Détection de Chiffres", "detection-de-chiffres", "detection_de_chiffres"),
        ("UPPER lower-Dash_under", "upper-lower-dash-under", "upper_lower_dash_under"),
        ("  spaced   out  ", "spaced-out", "spaced_out"),
    ],
)
def test_slug_and_package_derive_from_the_name(name: str, slug: str, package: str, tmp_path: Path) -> None:
    project = bake(tmp_path, project_name=name)
    assert project.name == slug
    assert (project / "src" / package / "train.py").is_file()
    assert f"# {name}" in (project / "README.md").read_text()


@pytest.mark.parametrize("example", ["digits", "minimal"])
def test_a_long_name_s_project_passes_its_own_lint(example: str, tmp_path: Path) -> None:
    """The package name stands in imports, paths and messages: at 41 characters, every line still fits
    ruff's 110 columns (at 32, `make lint` and the generated CI's lint job failed on a fresh bake)."""
    every = {"example": example, "hparam_search": "both", "slurm": True, "docker": True}
    project = bake(tmp_path, project_name="Handwritten Digit Recognition Experiments", **every)
    for command in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        result = run(*command, cwd=project)
        assert result.returncode == 0, result.stdout + result.stderr


def test_slug_and_package_can_be_overridden(tmp_path: Path) -> None:
    project = bake(tmp_path, project_name="Anything", project_slug="vision-lab", package_name="vlab")
    assert project.name == "vision-lab"
    assert (project / "src" / "vlab" / "configs" / "train.yaml").is_file()
    assert 'name = "vision-lab"' in (project / "pyproject.toml").read_text()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("package_name", "class", "'class' is a Python keyword"),
        ("package_name", "match", "'match' is a Python keyword"),
        ("package_name", "2fast", "'2fast' is not a valid Python package name"),
        ("package_name", "my-pkg", "'my-pkg' is not a valid Python package name"),
        ("package_name", "Digits", "'Digits' is not a valid Python package name"),
        ("package_name", "torch", "would shadow the module 'torch'"),
        ("package_name", "lightning", "would shadow the module 'lightning'"),
        ("package_name", "wandb", "would shadow the module 'wandb'"),
        ("package_name", "test", "would shadow the module 'test'"),
        ("package_name", "json", "would shadow the module 'json'"),
        ("project_slug", "hydra", "would shadow the module 'hydra'"),
        ("project_slug", "my project", "'my project' is not a valid distribution"),
        ("project_slug", "-lead", "'-lead' is not a valid distribution"),
        ("project_slug", "bad/slug", "'bad/slug' is not a valid distribution"),
        ("project_name", "   ", "project_name is empty"),
        ("author_email", "nobody", "'nobody' is not an email address"),
    ],
)
def test_hook_rules_name_the_value(field: str, value: str, message: str) -> None:
    errors = hook.problems({**VALID, field: value})
    assert any(message in error for error in errors), errors


def test_every_module_a_project_imports_is_a_name_it_cannot_take(tmp_path: Path) -> None:
    # The list had fallen behind the dependencies: a project named Torchdata or Dotenv was baked, and its
    # first training failed on an import of its own package in place of the library.
    project = bake(tmp_path, hparam_search="both", slurm="true", docker="true")
    local = {path.stem for path in project.rglob("*.py")} | {"my_project", "hydra_plugins"}
    imported = set()
    for path in project.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and not node.level else []
            imported |= {name.split(".")[0] for name in names}
    outside = {name.lower() for name in imported - local - set(sys.stdlib_module_names)}
    assert outside and outside <= hook.RESERVED, outside - hook.RESERVED
    # Its own top-level modules: the root scripts, the tests' (pytest imports them by name), src/'s.
    # A package named train or conftest was baked, and hid them (a new user's).
    tops = [*project.glob("*.py"), *project.glob("tests/*.py"), *(project / "src").iterdir()]
    own = {path.stem for path in tops} - {"my_project"}
    assert {name for name in own if not name.startswith("test_")} <= hook.RESERVED, own - hook.RESERVED
    assert all(hook.problems({**VALID, "package_name": name}) for name in own)


# Records, as each process ends, the top-level modules it loaded (one name a line, appended).
RECORD_MODULES = """import atexit, os, sys


def record():
    with open(os.environ["MODULES_OUT"], "a") as out:
        out.write("\\n".join({name.split(".")[0] for name in sys.modules}) + "\\n")


atexit.register(record)
"""


def test_no_module_a_project_s_commands_load_is_a_name_it_can_take(tmp_path: Path) -> None:
    # Its dependencies' own imports count as much as its own: projects named tqdm, sympy, fsspec,
    # packaging or antlr4 were baked, and their first command failed on an import (a new user's).
    project = bake(tmp_path, logger="mlflow", hparam_search="both", slurm="true", docker="true")
    (site := tmp_path / "site").mkdir()
    (site / "sitecustomize.py").write_text(RECORD_MODULES)
    env = {
        "PYTHONPATH": f"{site}{os.pathsep}src",
        "MODULES_OUT": str(tmp_path / "modules"),
        "WANDB_MODE": "offline",
    }
    checkpoint = "ckpt_path=logs/train/runs/one/checkpoints/last.ckpt"
    tensorboard = [
        "+logger.tb._target_=lightning.pytorch.loggers.TensorBoardLogger",
        "+logger.tb.save_dir=logs",
    ]
    for command in (
        [
            "train.py",
            "logger=[wandb,mlflow,csv]",
            *tensorboard,
            "trainer.max_epochs=1",
            "hydra.run.dir=logs/train/runs/one",
        ],
        ["eval.py", checkpoint],
        ["predict.py", checkpoint, "input=data/digits/3"],
        ["export.py", checkpoint],
        [
            "train.py",
            "-m",
            "hparams_search=optuna",
            "hydra.sweeper.n_trials=1",
            "debug=limit",
            "trainer.max_epochs=1",
        ],
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "tests/test_configs.py", "-k", "help"],
    ):
        result = run(sys.executable, *command, cwd=project, **env)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    loaded = set((tmp_path / "modules").read_text().split()) - {"my_project", "sitecustomize"}
    outside = {name.lower() for name in loaded - set(sys.stdlib_module_names) if not name.startswith("_")}
    assert (
        outside and {name for name in outside if not hook.problems({**VALID, "package_name": name})} == set()
    )


def test_valid_answers_pass_the_hook() -> None:
    assert hook.problems(VALID) == []


@pytest.mark.parametrize(
    "bad_answers",
    [
        {"package_name": "torch"},
        {"package_name": "import"},
        {"project_name": "3D Vision"},  # derives the package name 3d_vision
        {"project_slug": "bad/slug"},  # a path separator: still no folder left behind
        {"project_name": ""},  # the slug falls back to no-project-name; the hook names the empty answer
    ],
    ids=lambda a: "-".join(f"{k}={v}" for k, v in a.items()),
)
def test_generation_stops_and_leaves_nothing(bad_answers: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    args = [f"{key}={value}" for key, value in bad_answers.items()]
    result = run(
        "cookiecutter", "--no-input", "--output-dir", out, TEMPLATE, *args, cwd=tmp_path, TMPDIR=str(tmp_path)
    )
    assert result.returncode != 0
    assert "Cannot generate the project:" in result.stderr
    named = [value or "project_name is empty" for value in bad_answers.values()]
    assert any(value in result.stderr for value in named) or "3d_vision" in result.stderr
    assert list(out.iterdir()) == []


def test_interactive_prompts_are_readable_and_answered(tmp_path: Path) -> None:
    answers = "Digit Recognition\n" + "\n" * 20  # a name, then Enter for every other default
    result = subprocess.run(
        [str(BIN / "cookiecutter"), "--output-dir", str(tmp_path), str(TEMPLATE)],
        input=answers,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # where cookiecutter leaves its hook copies
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for prompt in ("Project name", "Python package name", "Default experiment logger", "Weights & Biases"):
        assert prompt in result.stdout
    assert (tmp_path / "digit-recognition" / "src" / "digit_recognition").is_dir()
