"""Write the locks from the environment this runs in (the template's .venv, fully installed).

- constraints.txt: every package of the environment, the exact set CI installs.
- the template folder's constraints.txt: the generated project's lock. A package only some
  answers need is wrapped in a Jinja condition, so each project pins just what it uses.

Run after changing a dependency: `make lock`.
"""

import re
from importlib.metadata import PackageNotFoundError, distribution, distributions
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT_LOCK = ROOT / "{{ cookiecutter.project_slug.replace(cookiecutter.__slash, '_') }}" / "constraints.txt"

# What the generated project depends on, by answer (keep in step with its pyproject.toml;
# tests/test_lock.py checks every baked project's lock against its declared dependencies).
CORE = [
    "torch",
    "lightning",
    "torchmetrics",
    "hydra-core",
    "omegaconf",
    "scikit-learn",
    "rich",
    "matplotlib",
    "python-dotenv",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "pytest",
    "ruff",
]
BY_ANSWER = {
    "cookiecutter.example == 'digits'": ["pillow"],
    "cookiecutter.__wandb == 'True'": ["wandb"],
    "cookiecutter.logger == 'tensorboard'": ["tensorboard"],
    "cookiecutter.logger == 'mlflow'": ["mlflow-skinny", "sqlalchemy", "alembic"],
    "cookiecutter.__optuna == 'True'": ["hydra-optuna-sweeper", "optuna", "sqlalchemy", "alembic"],
    "cookiecutter.slurm": ["hydra-submitit-launcher"],
    "cookiecutter.pre_commit": ["pre-commit"],
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(names: list[str]) -> set[str]:
    """The named distributions and everything they need here (extras not included)."""
    seen: set[str] = set()
    todo = [canonical(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError as error:
            raise SystemExit(f"{name} is not installed here: run `make setup` first") from error
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonical(req.name))
    return seen


def pin(name: str) -> str:
    version = distribution(name).version.split("+")[0]  # torch 2.13.0+cpu pins as 2.13.0
    return f"{name}=={version}"


def main() -> None:
    installed = {canonical(d.metadata["Name"]): d for d in distributions()}
    (ROOT / "constraints.txt").write_text(
        "# Every package of the template's environment: the exact set `make setup` and CI install.\n"
        "# Written by scripts/lock.py.\n"
        + "".join(f"{pin(n)}\n" for n in sorted(installed) if n not in {"pip", "setuptools"})
    )
    core = closure(CORE)
    needed_by: dict[str, list[str]] = {}
    for condition, names in BY_ANSWER.items():
        for name in closure(names) - core:
            needed_by.setdefault(name, []).append(condition)
    lines = []
    for name in sorted(core | needed_by.keys()):
        if name in core:
            lines.append(f"{pin(name)}\n")
        else:
            lines.append(f"{{% if {' or '.join(needed_by[name])} %}}{pin(name)}\n{{% endif %}}")
    PROJECT_LOCK.write_text(
        "# The exact versions this project's tests ran with (Python 3.11, Linux x86-64).\n"
        "# Install with: pip install -c constraints.txt -e '.[dev]'   (pyproject.toml keeps the ranges).\n"
        "# torch is pinned without a build label: the CPU and the CUDA wheels both match.\n" + "".join(lines)
    )


if __name__ == "__main__":
    main()
