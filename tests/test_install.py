"""The project installs as a normal wheel and runs from any directory: its configs ship inside."""

import shutil
import zipfile
from pathlib import Path

import pytest
from conftest import bake, run


def build_wheel(project: Path, dist: Path) -> Path:
    command = ("python", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", dist, ".")
    result = run(*command, cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(default_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(default_project, tmp_path_factory.mktemp("dist"))


def test_every_config_file_is_in_the_wheel(default_project: Path, wheel: Path) -> None:
    source = default_project / "src"
    configs = {p.relative_to(source).as_posix() for p in (source / "my_project" / "configs").rglob("*.yaml")}
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    assert configs and configs <= shipped, sorted(configs - shipped)
    assert not [name for name in shipped if name.startswith(("tests/", "my_project/configs/local/"))]


def test_installed_project_trains_from_another_directory(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = run("python", "-m", "pip", "install", "--no-deps", "--target", site, wheel, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "configs" / "experiment").mkdir(parents=True)  # configs of the user's, found there
    (elsewhere / "configs" / "experiment" / "mine.yaml").write_text("# @package _global_\nseed: 4321\n")
    for command in (["python", "-m", "my_project.train"], ["python", site / "bin" / "my-project-train"]):
        result = run(*command, "debug=fdr", "experiment=mine", cwd=elsewhere, PYTHONPATH=str(site))
        assert result.returncode == 0, result.stderr[-3000:]
    finished = list((elsewhere / "logs" / "debug" / "runs").glob("*/metrics.json"))
    assert len(finished) == 2
    assert all("seed: 4321" in (path.parent / "config.yaml").read_text() for path in finished)


def test_editable_install_runs_the_console_script(default_project: Path, tmp_path: Path) -> None:
    install = ["python", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    result = run(*install, "-e", default_project, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    try:
        result = run("my-project-train", "debug=fdr", cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        assert list((tmp_path / "logs" / "debug" / "runs").glob("*/metrics.json"))
    finally:
        run("python", "-m", "pip", "uninstall", "-q", "-y", "my-project", cwd=tmp_path)


def test_installed_optuna_project_finds_its_sweeper(tmp_path: Path) -> None:
    """Hydra takes sweepers only from the hydra_plugins namespace: the wheel ships the project's there."""
    wheel = build_wheel(bake(tmp_path / "baked", hparam_search="optuna"), tmp_path / "dist")
    with zipfile.ZipFile(wheel) as archive:
        assert "hydra_plugins/my_project_optuna.py" in archive.namelist()
    site = tmp_path / "site"
    result = run("python", "-m", "pip", "install", "--no-deps", "--target", site, wheel, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # The sweeper itself answers (a wrong pruner), from another directory, before any trial.
    command = ("python", "-m", "my_project.train", "-m", "hparams_search=optuna", "hydra.sweeper.pruner=x")
    result = run(*command, cwd=tmp_path, PYTHONPATH=str(site))
    assert result.returncode == 1 and "hydra.sweeper.pruner=x: no such pruner" in result.stderr, result.stderr


def test_docker_train_image_copies_all_its_wheel_needs(tmp_path: Path) -> None:
    """The train stage installs the project from the files its COPY lines name: the same wheel as the
    whole project's (a walk's had no LICENSE: pyproject.toml's license-files, quietly left out)."""
    project = bake(tmp_path / "baked", docker=True)
    dockerfile = (project / "Dockerfile").read_text().split("FROM base AS dev")[0]
    context = tmp_path / "context"
    for line in [line.split()[1:] for line in dockerfile.splitlines() if line.startswith("COPY ")]:
        for source in line[:-1]:  # a folder: its contents, as Docker copies it
            if (project / source).is_dir():
                shutil.copytree(project / source, context / line[-1], dirs_exist_ok=True)
            else:
                (context / line[-1]).mkdir(parents=True, exist_ok=True)
                shutil.copy(project / source, context / line[-1])
    names = []
    for built in (build_wheel(context, tmp_path / "image"), build_wheel(project, tmp_path / "project")):
        with zipfile.ZipFile(built) as archive:
            names.append(sorted(archive.namelist()))
    assert names[0] == names[1]
    assert any(name.endswith("licenses/LICENSE") for name in names[0])
