"""The project installs as a normal wheel and runs from any directory: its configs ship inside."""

import zipfile
from pathlib import Path

import pytest
from conftest import run


@pytest.fixture(scope="module")
def wheel(default_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    result = run(
        "python",
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        dist,
        ".",
        cwd=default_project,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = dist.glob("*.whl")
    return built


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
    elsewhere.mkdir()
    for command in (["python", "-m", "my_project.train"], ["python", site / "bin" / "my-project-train"]):
        result = run(*command, "debug=fdr", cwd=elsewhere, PYTHONPATH=str(site))
        assert result.returncode == 0, result.stderr[-3000:]
    assert len(list((elsewhere / "logs" / "debug" / "runs").glob("*/metrics.json"))) == 2


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
