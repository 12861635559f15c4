"""Baking projects from this template the way users do, and running tools on them."""

import itertools
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(TEMPLATE / "scripts"))  # scripts/lock.py: the lock's rules, for the tests

# Options whose values change each other's files (the example decides which nets, configs and
# tests exist; the logger decides configs, dependencies and what the tests log): every pair.
INTERACTING = {"example": ["digits", "minimal"], "logger": ["wandb", "tensorboard", "csv", "mlflow"]}
# Options that add or remove their own files only: cycled through, so each value appears.
CYCLED = {
    "hparam_search": ["wandb", "optuna", "both", "none"],
    "slurm": [False, True],
    "docker": [False, True],
    "ci": ["github", "none"],
    "pre_commit": [True, False],
    "license": ["MIT", "Apache-2.0", "BSD-3-Clause", "none"],
    "python_version": ["3.11", "3.12", "3.10"],
}


def answer_sets() -> list[dict]:
    """The product of the interacting options, with the others cycled through it.

    Every list starts with the default answer, so the first set is the default project.
    """
    sets = []
    for i, values in enumerate(itertools.product(*INTERACTING.values())):
        answers = dict(zip(INTERACTING, values, strict=True))
        answers.update({key: options[i % len(options)] for key, options in CYCLED.items()})
        sets.append(answers)
    return sets


def runs_own_suite(answers: dict) -> bool:
    """Half the sets run their project's own suite: those whose example and logger sit at
    positions of equal parity, a checkerboard (digits-wandb, digits-csv, minimal-tensorboard,
    minimal-mlflow) in which every value of every option still appears once at least. The
    other half is checked file by file and trains once (`debug=fdr`)."""
    example, logger = (INTERACTING[key].index(answers[key]) for key in INTERACTING)
    return (example + logger) % 2 == 0


def answer_id(answers: dict) -> str:
    """A readable test id: minimal-tensorboard-hps_optuna-slurm-docker-ci_none-no_precommit-Apache-2.0-py3.10
    for the sixth answer set (slurm and docker appear only where chosen)."""
    parts = [answers["example"], answers["logger"], f"hps_{answers['hparam_search']}"]
    parts += [name for name in ("slurm", "docker") if answers[name]]
    parts += [f"ci_{answers['ci']}", "precommit" if answers["pre_commit"] else "no_precommit"]
    return "-".join([*parts, answers["license"], f"py{answers['python_version']}"])


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fast", action="store_true", help="the first answer set only, not the matrix")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "answers" in metafunc.fixturenames:
        sets = answer_sets()[:1] if metafunc.config.getoption("--fast") else answer_sets()
        metafunc.parametrize("answers", sets, ids=[answer_id(a) for a in sets], scope="module")


@pytest.fixture(scope="module")
def project(answers: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The answer set's project, baked once for each test file that takes it."""
    return bake(tmp_path_factory.mktemp("baked"), **answers)


def first_with_suite(example: str) -> dict:
    """The first answer set of `example` that runs its own suite."""
    return next(a for a in answer_sets() if a["example"] == example and runs_own_suite(a))


# The longest tests first. `make test` runs two workers with `--maxschedchunk 1`: xdist hands each worker
# two tests at the start (the first two to one, the next two to the other) and then one at a time to
# whichever is free. So the cluster's and the minimal fast suite run on one worker while the default's
# and the minimal slow suite, each on two workers of its own, run one after the other on the other (side
# by side, 4 processes on 2 cores took 8 % longer); the short tests fill in. xdist's default chunks (an
# eighth of the tests each) queued the three long ones behind each other on one worker, and with them
# short ones the other had to wait for at the end (measured).
def longest() -> tuple[str, ...]:
    return (
        "test_slurm_project_runs_its_jobs_on_a_real_cluster",
        f"test_own_test_suite_passes[{answer_id(first_with_suite('minimal'))}]",
        "test_default_project_passes_its_whole_suite",
        "test_minimal_project_passes_its_slow_tests",
    )


# Tests that bake answer sets of their own, not the first: `--fast` skips them.
OTHER_SETS = (
    "test_slurm_project_runs_its_jobs_on_a_real_cluster",
    "test_minimal_project_passes_its_slow_tests",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    first = longest()
    items.sort(key=lambda item: first.index(item.name) if item.name in first else len(first))
    if config.getoption("--fast"):
        for item in items:
            if item.name in OTHER_SETS:
                item.add_marker(pytest.mark.skip(reason="--fast: the first answer set only"))


@pytest.fixture(scope="session", autouse=True)
def hook_copies_under_pytest_temp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """cookiecutter runs each hook from a temporary copy that it never deletes (cookiecutter#886):
    the bakes here keep those copies in pytest's temporary directory, which pytest prunes."""
    with mock.patch.object(tempfile, "tempdir", str(tmp_path_factory.mktemp("hook-copies"))):
        yield


def bake(output_dir: Path, **answers: object) -> Path:
    """Generate a project with `answers` (defaults for the rest); return its directory."""
    return Path(cookiecutter(str(TEMPLATE), no_input=True, extra_context=answers, output_dir=str(output_dir)))


def run(
    *command: str | Path, cwd: Path, timeout: float = 900, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run a command with this environment's tools first on PATH; output captured as text."""
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **env}
    full_env.pop("HYDRA_FULL_ERROR", None)
    if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
        # Under `make test` the workers share the cores: torch in what each runs gets its share
        # (one pool per core in each oversubscribes them, and ran the projects' suites slower).
        full_env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    try:
        return subprocess.run(
            [str(c) for c in command], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as error:  # what it printed says where it stopped
        printed = "".join(
            text if isinstance(text, str) else text.decode() for text in (error.stdout, error.stderr) if text
        )
        pytest.fail(
            f"{' '.join(map(str, command))} still running after {timeout} s; it printed:\n{printed[-6000:]}"
        )


@pytest.fixture(scope="session")
def default_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project baked with every default answer, shared by the tests that only read it."""
    return bake(tmp_path_factory.mktemp("default"))
