"""Each baked project's lock pins exactly its declared dependencies and all they need."""

import re
import tomllib
from importlib.metadata import PathDistribution
from pathlib import Path

import lock
import pytest
from conftest import bake
from lock import OLDEST, canonical, closure, from_the_registry, interpreter, resolve
from packaging.requirements import Requirement


def declared(project: Path) -> list[str]:
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    return meta["dependencies"] + meta["optional-dependencies"]["dev"]


def pins_for(project: Path, python: str) -> dict[str, str]:
    """{name: version} of the lock's lines that pip applies on `python`."""
    pins = {}
    for line in (project / "constraints.txt").read_text().splitlines():
        if line and line[0] != "#":
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"python_version": python}):
                assert canonical(req.name) not in pins, f"{req.name} pinned twice for Python {python}"
                pins[canonical(req.name)] = str(req.specifier).removeprefix("==")
    return pins


def test_lock_is_the_closure_of_the_declared_dependencies(project: Path, answers: dict) -> None:
    lines = [
        line for line in (project / "constraints.txt").read_text().splitlines() if line and line[0] != "#"
    ]
    markers = "" if answers["python_version"] != OLDEST else rf'(; python_version (>|<=) "{OLDEST}")?'
    assert all(re.fullmatch(rf"[A-Za-z0-9._-]+==[A-Za-z0-9.]+{markers}", line) for line in lines), lines
    here = pins_for(project, "3.11")
    assert here.keys() == closure(re.split(r"[<>=!~ \[]", d)[0] for d in declared(project))
    assert here["torch"] == "2.13.0"


# Every optional package is in one of these two projects (the logger is the only exclusive answer).
ALL_OPTIONS = [
    {"logger": "mlflow", "hparam_search": "both", "slurm": True, "pre_commit": True},
    {"logger": "tensorboard"},
]


@pytest.mark.parametrize("python", [OLDEST, "3.12"])
def test_lock_resolves_on_the_other_pythons(python: str, tmp_path: Path) -> None:
    """pip, under that Python, installs exactly the lock's versions for it (torch stood in for)."""
    try:
        interpreter(python)
    except FileNotFoundError as error:
        pytest.skip(str(error))
    requirements, pins = [], {}
    for i, answers in enumerate(ALL_OPTIONS):
        project = bake(tmp_path / str(i), python_version=python, **answers)
        requirements += declared(project)
        for name, version in pins_for(project, python).items():
            assert pins.setdefault(name, version) == version, f"{name} pinned differently by answer"
    installed = resolve(python, requirements, [f"{n}=={v}" for n, v in pins.items()])
    assert {name: meta["version"] for name, meta in installed.items()} == pins


def test_lock_takes_no_arguments_and_pins_only_what_the_registry_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A maintainer's `lock.py --help` rewrote both locks; after `make demo` (its project installed into
    .venv from build/), `make lock` would have pinned my-project==0.1.0, which no registry has."""
    monkeypatch.setattr(lock, "ROOT", tmp_path)  # were the arguments taken, the locks written go here
    monkeypatch.setattr(lock, "PROJECT_LOCK", tmp_path / "project-constraints.txt")
    monkeypatch.setattr(lock, "project_lock", lambda: "")
    for argument, code in (("--help", 0), ("--check", "lock.py takes no arguments: ['--check']")):
        monkeypatch.setattr("sys.argv", ["lock.py", argument])
        with pytest.raises(SystemExit) as stop:
            lock.main()
        assert stop.value.code == code and not list(tmp_path.iterdir())
    for name, direct_url in (("mine", '{"url": "file:///p", "dir_info": {"editable": true}}'), ("numpy", "")):
        (info := tmp_path / f"{name}-1.0.dist-info").mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        if direct_url:  # as pip records a package installed from a folder or a file (PEP 610)
            (info / "direct_url.json").write_text(direct_url)
    found = [from_the_registry(PathDistribution(tmp_path / f"{n}-1.0.dist-info")) for n in ("mine", "numpy")]
    assert found == [False, True]
