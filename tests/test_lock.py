"""Each baked project's lock pins exactly its declared dependencies and all they need."""

import re
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import bake

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from lock import canonical, closure  # noqa: E402


@pytest.fixture(scope="module")
def project(answers: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bake(tmp_path_factory.mktemp("locked"), **answers)


def test_lock_is_the_closure_of_the_declared_dependencies(project: Path) -> None:
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    declared = [
        re.split(r"[<>=!~ \[]", d)[0] for d in meta["dependencies"] + meta["optional-dependencies"]["dev"]
    ]
    lines = [
        line for line in (project / "constraints.txt").read_text().splitlines() if line and line[0] != "#"
    ]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.]+", line) for line in lines), lines
    pinned = {canonical(line.split("==")[0]) for line in lines}
    assert pinned == closure(declared)
    assert "torch==2.13.0" in lines
