"""The default project stays a project a researcher reads in one sitting (issue 19's budget)."""

from pathlib import Path

from conftest import bake, run


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_at_most_1300_lines_of_python_outside_the_tests(default_project: Path) -> None:
    code = [p.relative_to(default_project) for p in default_project.rglob("*.py")]
    code = [p for p in code if "tests" not in p.parts]
    assert sum(lines(default_project / p) for p in code) <= 1300, sorted(
        (lines(default_project / p), str(p)) for p in code
    )


def test_the_model_file_and_the_readme_fit_their_budget(default_project: Path) -> None:
    assert lines(default_project / "src" / "my_project" / "models" / "classifier.py") <= 110
    assert lines(default_project / "README.md") <= 200


def test_the_readme_of_every_option_at_once_fits_200_lines(tmp_path: Path) -> None:
    """The longest README: W&B sweeps and Optuna, SLURM, Docker (the matrix pairs them otherwise)."""
    project = bake(tmp_path, hparam_search="both", slurm=True, docker=True)
    assert lines(project / "README.md") <= 200


# A training run's project modules, from sys.modules at exit: `-X importtime` misses those that
# Hydra's instantiate imports (the model, the nets, the callbacks, the data).
IMPORTED = """import atexit, runpy, sys
names = lambda: [m for m in sys.modules if m.split(".")[0] == "my_project"]
atexit.register(lambda: print("IMPORTED", *names(), file=sys.stderr))
sys.argv = [sys.argv[1], "debug=fdr"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_run_imports_at_most_15_modules_of_1100_lines(default_project: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(default_project / "src"), "WANDB_MODE": "offline"}
    result = run("python", "-c", IMPORTED, default_project / "train.py", cwd=tmp_path, **env)
    assert result.returncode == 0, result.stderr[-3000:]
    names = result.stderr.rsplit("IMPORTED", 1)[1].split()
    files = [default_project / "src" / (name.replace(".", "/") + ".py") for name in names]
    files += [default_project / "src" / name.replace(".", "/") / "__init__.py" for name in names]
    imported = [default_project / "train.py", *(f for f in files if f.is_file())]
    assert any(f.name == "classifier.py" for f in imported), imported  # what importtime missed
    assert len(imported) <= 15, imported
    assert sum(map(lines, imported)) <= 1100, [(lines(f), f.name) for f in imported]
