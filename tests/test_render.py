"""A baked project is fully rendered, lint-clean, and has the files the design promises."""

import re
from pathlib import Path

import pytest
from conftest import bake, run

AWKWARD = {"project_name": 'Détection "de" Chiffres — v2', "author_name": "Zoë O'Brien"}
JINJA = re.compile(r"\{\{|\}\}|\{%|%\}")


@pytest.fixture(scope="module", params=["default", "awkward"])
def project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    answers = AWKWARD if request.param == "awkward" else {}
    return bake(tmp_path_factory.mktemp(request.param), **answers)


def test_no_unrendered_template_syntax(project: Path) -> None:
    leftovers = [
        f"{path.relative_to(project)}: {line.strip()}"
        for path in project.rglob("*")
        if path.is_file()
        for line in path.read_text(encoding="utf-8").splitlines()
        if JINJA.search(line)
    ]
    assert not leftovers
    assert not [p for p in project.rglob("*") if JINJA.search(p.name)]


def test_ruff_lint_and_format_pass(project: Path) -> None:
    for command in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        result = run(*command, cwd=project)
        assert result.returncode == 0, result.stdout + result.stderr


def test_layout_of_the_default_project(default_project: Path) -> None:
    package = default_project / "src" / "my_project"
    expected = [
        "train.py",
        "eval.py",
        "pyproject.toml",
        "README.md",
        "Makefile",
        "constraints.txt",
        ".gitignore",
        ".env.example",
        "tests/conftest.py",
        "src/my_project/train.py",
        "src/my_project/eval.py",
        "src/my_project/data/digits.py",
        "src/my_project/models/classifier.py",
        "src/my_project/models/nets/cnn.py",
        "src/my_project/models/nets/mlp.py",
    ]
    assert [p for p in expected if not (default_project / p).is_file()] == []
    groups = {p.name for p in (package / "configs").iterdir() if p.is_dir()}
    assert {
        "data",
        "model",
        "trainer",
        "strategy",
        "logger",
        "callbacks",
        "paths",
        "experiment",
        "debug",
        "hydra",
        "extras",
    } <= groups
    assert {p.stem for p in (package / "configs" / "trainer").glob("*.yaml")} == {
        "default",
        "cpu",
        "gpu",
        "mps",
    }


def test_lock_pins_torch_and_every_dependency(default_project: Path) -> None:
    lines = [
        line
        for line in (default_project / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert "torch==2.13.0" in lines
    assert all("==" in line for line in lines), lines
    pinned = {line.split("==")[0].lower() for line in lines}
    assert {"lightning", "hydra-core", "torchmetrics", "scikit-learn", "rich", "pytest", "ruff"} <= pinned
