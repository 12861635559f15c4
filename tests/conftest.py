"""Baking projects from this template the way users do, and running tools on them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def bake(output_dir: Path, **answers: str) -> Path:
    """Generate a project with `answers` (defaults for the rest); return its directory."""
    return Path(cookiecutter(str(TEMPLATE), no_input=True, extra_context=answers, output_dir=str(output_dir)))


def run(
    *command: str | Path, cwd: Path, timeout: float = 900, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run a command with this environment's tools first on PATH; output captured as text."""
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **env}
    full_env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [str(c) for c in command], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="session")
def default_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project baked with every default answer, shared by the tests that only read it."""
    return bake(tmp_path_factory.mktemp("default"))
