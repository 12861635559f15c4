"""Every answer set gives a project that is complete, clean, valid for its tools, and passes its tests."""

import ast
import csv
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from conftest import CYCLED, INTERACTING, TEMPLATE, answer_sets, bake, first_with_suite, run, runs_own_suite
from lock import interpreter

# Not `}}` alone: nested OmegaConf interpolations end with it.
JINJA = re.compile(r"\{\{|\{%|%\}")

COMMON = """
.env.example .gitignore Makefile README.md constraints.txt eval.py export.py predict.py pyproject.toml
train.py {pkg}/__init__.py {pkg}/train.py {pkg}/eval.py {pkg}/predict.py {pkg}/export.py
{pkg}/callbacks/reports.py {pkg}/callbacks/resumable.py {pkg}/data/labelled.py {pkg}/data/csv_table.py
{pkg}/data/image_folder.py {pkg}/models/classifier.py {pkg}/models/nets/mlp.py {pkg}/utils/config.py
{pkg}/utils/multirun.py {pkg}/utils/runs.py {cfg}/__init__.py {cfg}/train.yaml {cfg}/eval.yaml
{cfg}/predict.yaml {cfg}/export.yaml {cfg}/callbacks/default.yaml {cfg}/callbacks/early_stopping.yaml
{cfg}/callbacks/last_checkpoint.yaml {cfg}/callbacks/learning_rate_monitor.yaml
{cfg}/callbacks/model_checkpoint.yaml {cfg}/callbacks/none.yaml {cfg}/callbacks/progress_bar.yaml
{cfg}/callbacks/reports.yaml {cfg}/callbacks/resumable.yaml {cfg}/data/_common.yaml {cfg}/data/csv.yaml
{cfg}/data/image_folder.yaml {cfg}/debug/default.yaml {cfg}/debug/fdr.yaml {cfg}/debug/limit.yaml
{cfg}/debug/overfit.yaml {cfg}/debug/profiler.yaml {cfg}/experiment/example.yaml
{cfg}/experiment/finetune.yaml {cfg}/extras/default.yaml {cfg}/hydra/default.yaml {cfg}/logger/csv.yaml
{cfg}/model/classifier.yaml {cfg}/model/net/mlp.yaml {cfg}/model/scheduler/cosine.yaml
{cfg}/model/scheduler/plateau.yaml {cfg}/model/scheduler/step.yaml {cfg}/paths/default.yaml
{cfg}/strategy/auto.yaml {cfg}/strategy/ddp.yaml {cfg}/strategy/ddp_find_unused_parameters.yaml
{cfg}/strategy/deepspeed.yaml {cfg}/strategy/fsdp.yaml
{cfg}/strategy/single_device.yaml {cfg}/trainer/cpu.yaml {cfg}/trainer/default.yaml
{cfg}/trainer/gpu.yaml {cfg}/trainer/mps.yaml tests/conftest.py tests/signal_helpers.py
tests/test_configs.py tests/test_crossval.py tests/test_data.py tests/test_errors.py tests/test_eval.py
tests/test_export.py tests/test_finetune.py tests/test_gpu.py tests/test_loggers.py tests/test_models.py
tests/own_datamodule.py tests/test_own_data.py tests/test_predict.py tests/test_resume.py
tests/test_runs.py tests/test_scaling.py tests/test_train.py
"""


def features(answers: dict) -> dict[str, bool]:
    sweeps = answers["hparam_search"] in ("wandb", "both")
    return {
        "wandb": answers["logger"] == "wandb" or sweeps,
        "sweeps": sweeps,
        "optuna": answers["hparam_search"] in ("optuna", "both"),
        "tensorboard": answers["logger"] == "tensorboard",
        "mlflow": answers["logger"] == "mlflow",
    }


def expected_files(answers: dict) -> set[str]:
    """The exact file list a project with these answers must have, written out independently."""
    pkg = "src/my_project"
    cfg = f"{pkg}/configs"
    files = set(COMMON.format(pkg=pkg, cfg=cfg).split())
    has = features(answers)
    if answers["example"] == "digits":
        files |= {
            f"{pkg}/data/digits.py",
            f"{cfg}/data/digits.yaml",
            f"{pkg}/models/nets/cnn.py",
            f"{cfg}/model/net/cnn.yaml",
        }
    else:
        files |= {f"{pkg}/data/blobs.py", f"{cfg}/data/blobs.yaml"}
    if has["wandb"]:
        files.add(f"{cfg}/logger/wandb.yaml")
    if has["tensorboard"]:
        files.add(f"{cfg}/logger/tensorboard.yaml")
    if has["mlflow"]:
        files.add(f"{cfg}/logger/mlflow.yaml")
    if has["sweeps"]:
        files |= {"sweeps/random.yaml", "sweeps/bayes.yaml", "sweeps/grid.yaml", "tests/test_sweeps.py"}
    if has["optuna"]:
        files |= {
            f"{cfg}/hparams_search/optuna.yaml",
            f"{cfg}/hydra/sweeper/optuna.yaml",
            f"{pkg}/utils/optuna_sweeper.py",
            f"{pkg}/utils/optuna_settings.py",
            f"{pkg}/utils/optuna_results.py",
            f"{pkg}/callbacks/optuna_pruning.py",
            "src/hydra_plugins/my_project_optuna.py",
            "tests/test_optuna.py",
        }
    if answers["slurm"]:
        files |= {
            f"{cfg}/hydra/launcher/slurm.yaml",
            f"{pkg}/utils/slurm_launcher.py",
            "scripts/slurm/train.sbatch",
            "tests/test_slurm.py",
            "tests/slurm_cluster.py",
        }
    if answers["docker"]:
        files |= {"Dockerfile", ".dockerignore"}
    if answers["ci"] == "github":
        files.add(".github/workflows/ci.yml")
    if answers["pre_commit"]:
        files.add(".pre-commit-config.yaml")
    if answers["license"] != "none":
        files.add("LICENSE")
    return files


def test_exactly_the_expected_files(project: Path, answers: dict) -> None:
    found = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()}
    assert found == expected_files(answers)
    assert not [p for p in project.rglob("*") if p.is_dir() and not any(p.iterdir())]


def test_no_unrendered_template_syntax(project: Path) -> None:
    leftovers = [
        f"{path.relative_to(project)}: {line.strip()}"
        for path in project.rglob("*")
        if path.is_file()
        for line in path.read_text(encoding="utf-8").splitlines()
        if JINJA.search(line)
    ]
    assert not leftovers


def test_ruff_lint_and_format_pass(project: Path) -> None:
    for command in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        result = run(*command, cwd=project)
        assert result.returncode == 0, result.stdout + result.stderr


def test_code_compiles_on_its_lowest_python(project: Path, answers: dict) -> None:
    """Every module parses under the Python the answer names (3.10 has no `except*`, ...)."""
    try:
        python = interpreter(answers["python_version"])
    except FileNotFoundError as error:
        pytest.skip(str(error))
    parse = "import pathlib\nfor p in pathlib.Path().rglob('*.py'): compile(p.read_bytes(), p, 'exec')"
    result = run(python, "-c", parse, cwd=project)  # writes no bytecode beside the sources
    assert result.returncode == 0, result.stdout + result.stderr


def test_tool_files_are_valid(project: Path) -> None:
    checks = {
        "Dockerfile": ["hadolint", "Dockerfile"],
        ".github/workflows/ci.yml": [
            "check-jsonschema",
            "--builtin-schema",
            "vendor.github-workflows",
            ".github/workflows/ci.yml",
        ],
        ".pre-commit-config.yaml": ["pre-commit", "validate-config", ".pre-commit-config.yaml"],
        "scripts/slurm/train.sbatch": ["bash", "-n", "scripts/slurm/train.sbatch"],
    }
    for path, command in checks.items():
        if (project / path).exists():
            result = run(*command, cwd=project)
            assert result.returncode == 0, f"{path}: {result.stdout}{result.stderr}"


def test_answers_reach_pyproject(project: Path, answers: dict) -> None:
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~ ]", dep)[0] for dep in meta["dependencies"]}
    has = features(answers)
    assert ("wandb" in names) == has["wandb"]
    assert ("tensorboard" in names) == has["tensorboard"]
    assert ("mlflow-skinny" in names) == has["mlflow"]
    assert ("optuna" in names) == has["optuna"] and "hydra-optuna-sweeper" not in names
    assert ("hydra-submitit-launcher" in names) == answers["slurm"]
    assert (
        any(d.startswith("pre-commit") for d in meta["optional-dependencies"]["dev"]) == answers["pre_commit"]
    )
    assert meta["requires-python"] == f">={answers['python_version']}"
    assert meta.get("license") == (None if answers["license"] == "none" else answers["license"])


def test_readme_mentions_only_what_was_chosen(project: Path, answers: dict) -> None:
    readme = (project / "README.md").read_text()
    has = features(answers)
    assert ("hparams_search=optuna" in readme) == has["optuna"]
    assert ("wandb sweep" in readme) == has["sweeps"]
    assert ("sbatch" in readme) == answers["slurm"]
    assert ("docker build" in readme) == answers["docker"]
    assert ("pre-commit" in readme) == answers["pre_commit"]
    assert (".github/workflows" in readme) == (answers["ci"] == "github")
    # Nor do the files beside it: no W&B key without W&B, no MLflow without it (a new user found both).
    assert ("WANDB_API_KEY" in readme + (project / ".env.example").read_text()) == has["wandb"]
    assert ("mlflow" in (project / "pyproject.toml").read_text().lower()) == has["mlflow"]
    # Every file the README names in its layout exists.
    for name in ("sweeps/", "scripts/slurm/train.sbatch", "Dockerfile", ".pre-commit-config.yaml"):
        if name in readme:
            assert (project / name).exists(), name


def test_what_runs_write_stays_out_of_git_and_code_in(project: Path, answers: dict, tmp_path: Path) -> None:
    # sbatch's <job>-<id>.out files in the project root were left for `git add .` (a walk's).
    pkg = next(p for p in (project / "src").iterdir() if (p / "configs").is_dir()).relative_to(project)
    written = ["logs/train/runs/a/metrics.json", "data/digits/0/0.png", ".env", "wandb/run/x", "mlruns/0/x"]
    written += [f"{pkg}/configs/local/default.yaml", "configs/local/default.yaml", "outputs/x", "multirun/x"]
    written += ["my-project-12.out"] if answers["slurm"] else []
    code = [f"{pkg}/data/labelled.py", f"{pkg}/configs/data/csv.yaml", "configs/data/mine.yaml", "train.py"]
    (tmp_path / ".gitignore").write_text((project / ".gitignore").read_text())
    for name in written + code:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    git = ["git", "status", "--porcelain", "--untracked-files=all"]
    status = subprocess.run(git, cwd=tmp_path, capture_output=True, text=True)
    assert sorted(line[3:] for line in status.stdout.splitlines()) == sorted([".gitignore", *code])


def test_license_matches_the_answer(project: Path, answers: dict) -> None:
    titles = {"MIT": "MIT License", "Apache-2.0": "Apache License", "BSD-3-Clause": "BSD 3-Clause License"}
    if answers["license"] != "none":
        text = (project / "LICENSE").read_text()
        assert titles[answers["license"]] in text.splitlines()[0]  # the first line, as published (centred)
        assert answers["license"] != "Apache-2.0" or text.startswith(" " * 33 + "Apache License\n")
        assert answers["license"] == "Apache-2.0" or "Your Name" in text


def test_make_uses_the_projects_venv_activated_or_not(project: Path) -> None:
    """`make test` in a new shell, the venv not activated: its python, not one without the packages."""
    dry = ("make", "--no-print-directory", "-n", "test", "debug")  # under make test too: no "Entering..."
    make = lambda *more: run(*dry, *more, cwd=project, MAKEFLAGS="").stdout  # noqa: E731
    assert make().startswith("python -m pytest")  # no .venv: the python on PATH
    (venv := project / ".venv" / "bin").mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    try:
        assert (
            make().startswith(".venv/bin/python -m pytest")
            and ".venv/bin/python train.py debug=fdr" in make()
        )
        assert make("PYTHON=python3").startswith("python3 -m pytest")  # a choice still wins
    finally:
        shutil.rmtree(project / ".venv")


def test_fast_debug_run(project: Path, tmp_path: Path) -> None:
    result = run(
        "python",
        project / "train.py",
        "debug=fdr",
        cwd=tmp_path,
        PYTHONPATH=str(project / "src"),
        WANDB_MODE="offline",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((tmp_path / "logs" / "debug" / "runs").glob("*/metrics.json"))


# A project's own test suite: quiet, with short tracebacks.
# A test still running after 10 minutes prints every thread's stack (pytest's faulthandler).
PYTEST = (
    "python",
    "-m",
    "pytest",
    "-q",
    "--tb=short",
    "-p",
    "no:cacheprovider",
    "-o",
    "faulthandler_timeout=600",
)


def failures(result: subprocess.CompletedProcess[str]) -> str:
    """A project's pytest output for an assertion message: its failures first, then its end.

    The end alone (captured logs, warnings, the summary) can hide which assertion failed.
    """
    start = result.stdout.find("= FAILURES =")
    first = result.stdout[start : start + 8000] + "\n[...]\n" if start >= 0 else ""
    return first + result.stdout[-3000:] + result.stderr[-3000:]


# Beside its own configs, the logger answer changes the default logger of train.yaml and eval.yaml and the
# code that hands a logger its artifacts and resumes its run: these files' tests check all of it. The search
# answer changes multirun.py's summary (pruned trials): test_optuna.py checks it, where it runs whole.
ANSWER_TESTS = {"test_configs.py", "test_eval.py", "test_loggers.py", "test_train.py"}
ANSWER_CODE = {
    "src/my_project/callbacks/reports.py",
    "src/my_project/train.py",
    "src/my_project/utils/multirun.py",
    "src/my_project/utils/runs.py",
}


def changed_tests(project: Path, reference: Path, other: Path) -> list[str]:
    """The test files of what a project's answers change against `reference`, a project of the same
    example whose suite runs whole: ANSWER_TESTS, and the test files it lacks or holds otherwise (a
    search's, SLURM's). The rest of the code is the same in both, but for the logger's. Left out:
    the test files of code that `reference` lacks and `other`, the other example's whole suite,
    holds byte for byte with its tests (the Optuna search's: its trials are the same tiny MLP)."""
    differs = [
        path.relative_to(project).as_posix()
        for path in sorted(project.rglob("*.py"))
        if not (twin := reference / path.relative_to(project)).is_file()
        or twin.read_bytes() != path.read_bytes()
    ]
    shared = {name for name in differs if (reference / name).is_file() and not name.startswith("tests/")}
    assert shared <= ANSWER_CODE, f"{sorted(shared - ANSWER_CODE)} differ by answer: add their tests here"
    # Code the reference lacks, held byte for byte by `other`: its tests ran whole there.
    added = [name for name in differs if name not in shared and not name.startswith("tests/")]
    ran = bool(added) and all(same(project, other, name) for name in added)
    tests = {
        name.removeprefix("tests/")
        for name in differs
        if name.startswith("tests/test_")
        and not (ran and not (reference / name).is_file() and (other / name).is_file())
    }
    return sorted(ANSWER_TESTS | tests)


def same(project: Path, other: Path, name: str) -> bool:
    return (other / name).is_file() and (other / name).read_bytes() == (project / name).read_bytes()


def test_own_test_suite_passes(project: Path, answers: dict, tmp_path: Path) -> None:
    """The fast suite of the first answer set of each example runs whole (the default's, slow tests
    too, in test_default_project_passes_its_whole_suite), the minimal example's made a user's
    (make_yours); a later one's runs the tests of what its answers change: its other tests, of the
    same code, ran in the first (changed_tests)."""
    defaults = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    if answers == {key: v[0] if isinstance(v := defaults[key], list) else v for key in answers}:
        pytest.skip("the default answers: test_default_project_passes_its_whole_suite runs this suite")
    if not runs_own_suite(answers):
        pytest.skip("the other half of the matrix runs the suites (conftest.runs_own_suite)")
    first = first_with_suite(answers["example"])
    if answers != first:
        other = first_with_suite(next(e for e in INTERACTING["example"] if e != answers["example"]))
        files = changed_tests(project, bake(tmp_path / "first", **first), bake(tmp_path / "other", **other))
    else:
        files = []
        if answers["example"] == "minimal":
            make_yours(project)
    result = run(*PYTEST, "-m", "not slow", *(f"tests/{name}" for name in files), cwd=project, timeout=1800)
    assert result.returncode == 0, failures(result)
    assert " passed" in result.stdout


def make_yours(project: Path) -> None:
    """The minimal example, made to be replaced, made a user's as a walk made it (their data the default,
    the best checkpoint by val/f1): 7 of its tests went by the example's data (its columns, its files, its
    class count) and failed with no bug to find. Here a table of a user's: text labels in a column named
    otherwise, features on other scales (the digits' suite runs the tests' image branches), in data/ as
    the blobs are (a walk's there broke 63 tests: their runs read data/ in a folder of their own)."""
    rng, table = np.random.default_rng(0), project / "data" / "trees.csv"
    table.parent.mkdir()
    with table.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["length", "width", "weight", "depth", "species"])
        for row in range(450):  # 4 batches of 64 in a training epoch, as the suite's stops need
            kind = row % 3
            values = (rng.normal(0, 1, 4) + 3 * np.eye(3, 4)[kind]) * [1, 10, 100, 0.1]
            writer.writerow([*(f"{v:.5g}" for v in values), ["oak", "elm", "ash"][kind]])
    configs = project / "src" / "my_project" / "configs"
    for path, old, new in [
        ("train.yaml", "  - data: blobs\n", "  - data: csv\n"),
        ("data/csv.yaml", "path: ???", "path: ${paths.data_dir}/trees.csv"),
        ("data/csv.yaml", "target: ???", "target: species"),
        ("callbacks/model_checkpoint.yaml", "val_acc_{val/acc:.4f}", "val_f1_{val/f1:.4f}"),
        ("callbacks/model_checkpoint.yaml", "monitor: val/acc\n", "monitor: val/f1\n"),
    ]:
        assert (text := (configs / path).read_text()).count(old) == 1, (path, old)
        (configs / path).write_text(text.replace(old, new))


def test_slurm_project_runs_its_jobs_on_a_real_cluster(tmp_path: Path) -> None:
    """The first answer set with SLURM, baked once more: its cluster tests (`-m slurm`) submit jobs
    to a one-node SLURM cluster that they start. They need root, slurm-wlm and munge (.ci/run
    installs them), skip without them, and fail instead where the variable CI is set."""
    project = bake(tmp_path, **next(answers for answers in answer_sets() if answers["slurm"]))
    result = run(*PYTEST, "-m", "slurm", "-rs", cwd=project, timeout=1800)
    assert result.returncode == 0, failures(result)
    if " passed" not in result.stdout:
        skipped = [line.split(": ", 1)[-1] for line in result.stdout.splitlines() if "SKIPPED" in line]
        pytest.skip("; ".join(sorted(set(skipped))) or result.stdout[-500:])


def test_default_project_passes_its_whole_suite(default_project: Path) -> None:
    """The default answers, with the slow tests too (the full training to 0.97 accuracy).

    On two workers, as the project's `make test-all` runs it on 2 cores (about 10 min alone):
    the longest test here, so it leaves no long tail on one core.
    """
    result = run(*PYTEST, "-n", "2", cwd=default_project, timeout=2400)
    assert result.returncode == 0, failures(result)
    assert " passed" in result.stdout and "deselected" not in result.stdout


# The minimal example's slow tests of what its data path and defaults shape: training to its target,
# evaluation, your own data, k-fold, fine-tuning and overfitting its net, and the stops where the loader's
# state must resume (mid-epoch with each loop option, killed after an epoch). Its other slow tests, of the
# loop and the run around it (the other phases of a stop, schedules, early stopping, DDP, torchrun, the
# run folder's rules), run the same code the default's suite runs on the digits (measured alone on
# two workers: 297 s for all 50, 130 s for these 22).
DATA_PATH_SLOW = (
    *(f"tests/test_{name}.py" for name in ("train", "eval", "own_data", "crossval", "finetune", "models")),
    "tests/test_resume.py::test_a_run_stopped_mid_epoch_resumes_to_the_same_end_with_each_loop_option",
    "tests/test_resume.py::test_a_run_killed_after_an_epoch_resumes_from_its_end_to_the_same_end",
)


def test_minimal_project_passes_its_slow_tests(tmp_path: Path) -> None:
    """The minimal example's full trainings of its data path (its fast tests run above): its own data
    path and defaults differ from the digits' (blobs as a table, no `data.root`), and a slow test that
    passed with the digits failed here unseen (a resume pointing at moved images)."""
    project = bake(tmp_path, **first_with_suite("minimal"))
    result = run(*PYTEST, "-n", "2", "-m", "slow and not slurm", *DATA_PATH_SLOW, cwd=project, timeout=2400)
    assert result.returncode == 0, failures(result)
    assert " passed" in result.stdout


def test_the_matrix_bakes_every_answer_and_runs_suites_of_each() -> None:
    """The matrix lists cookiecutter.json's choices, defaults first (a value added there alone was never
    baked: a maintainer's walk got a 1-byte LICENSE that every test passed), and the sets that run their
    own suite hold every value of every option, as the README says (one more license re-paired them)."""
    choices = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    questions = {key: value for key, value in choices.items() if isinstance(value, list | bool)}
    asked = {
        key: value if isinstance(value, list) else [value, not value] for key, value in questions.items()
    }
    assert asked == {**INTERACTING, **CYCLED}
    suites = [answers for answers in answer_sets() if runs_own_suite(answers)]
    assert {key: sorted({str(a[key]) for a in suites}) for key in asked} == {
        key: sorted(map(str, values)) for key, values in asked.items()
    }


def test_the_tests_conftest_orders_and_skips_by_name_exist() -> None:
    """conftest names the longest tests (run first) and those `--fast` skips: a test renamed would
    drop out of both silently, and `make test` would queue a long one last."""
    import conftest

    trees = [ast.parse(path.read_text()) for path in Path(__file__).parent.glob("test_*.py")]
    defined = {node.name for tree in trees for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert [n for n in (*conftest.longest(), *conftest.OTHER_SETS) if n.split("[")[0] not in defined] == []


def test_template_readme_documents_every_option() -> None:
    readme = (TEMPLATE / "README.md").read_text()
    options = [k for k in json.loads((TEMPLATE / "cookiecutter.json").read_text()) if not k.startswith("_")]
    assert [option for option in options if f"`{option}`" not in readme] == []
    assert re.findall(r"\S*://\S*", readme) == []  # it links nothing outside the repository
