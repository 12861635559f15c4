"""Each baked project's own test suite passes, run as its README says, in a subprocess."""

from pathlib import Path

import pytest
from conftest import bake, run

pytestmark = pytest.mark.matrix


@pytest.mark.parametrize(
    "answers",
    [{}, {"project_name": "Détection de Chiffres", "package_name": "chiffres"}],
    ids=["default", "awkward-name"],
)
def test_generated_test_suite_passes(answers: dict[str, str], tmp_path: Path) -> None:
    project = bake(tmp_path, **answers)
    result = run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
