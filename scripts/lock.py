"""Write the locks from the environment this runs in (the template's .venv, fully installed).

- constraints.txt: every package of the environment, the exact set CI installs.
- the template folder's constraints.txt: the generated project's lock. A package only some
  answers need is wrapped in a Jinja condition, so each project pins just what it uses.
  Where Python 3.10 needs older versions (numpy 2.4 needs 3.11), a project whose answer is
  3.10 pins both, with environment markers; pip resolves those under a Python 3.10 interpreter.

Run after changing a dependency: `make lock` (it needs python3.10 and the package registry). It takes
no arguments. Packages installed from a folder or file (`make demo`'s project, `pip install -e .`) are
left out: the registry has no such pins.
"""

import glob
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from importlib.metadata import Distribution, PackageNotFoundError, distribution, distributions
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT_LOCK = ROOT / "{{ cookiecutter.project_slug.replace(cookiecutter.__slash, '_') }}" / "constraints.txt"

# What the generated project depends on, by answer (keep in step with its pyproject.toml;
# tests/test_lock.py checks every baked project's lock against its declared dependencies).
CORE = [
    "torch",
    "torchdata",
    "lightning",
    "torchmetrics",
    "hydra-core",
    "omegaconf",
    "scikit-learn",
    "rich",
    "pillow",
    "matplotlib",
    "python-dotenv",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "pytest",
    "pytest-xdist",
    "ruff",
]
BY_ANSWER = {
    "cookiecutter.__wandb == 'True'": ["wandb"],
    "cookiecutter.logger == 'tensorboard'": ["tensorboard"],
    "cookiecutter.logger == 'mlflow'": ["mlflow-skinny", "sqlalchemy", "alembic"],
    "cookiecutter.__optuna == 'True'": ["optuna", "sqlalchemy", "alembic"],
    "cookiecutter.slurm": ["hydra-submitit-launcher"],
    "cookiecutter.pre_commit": ["pre-commit"],
}


# The oldest Python a project may choose, whose pins may differ from this environment's.
OLDEST = "3.10"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_requires(name: str) -> list[str]:
    try:
        return distribution(name).requires or []
    except PackageNotFoundError as error:
        raise SystemExit(f"{name} is not installed here: run `make setup` first") from error


def closure(
    names: Iterable[str], requires: Callable[[str], list[str]] = installed_requires, python: str | None = None
) -> set[str]:
    """The named distributions and everything they need on `python`, with the extras they ask for
    (lightning needs fsspec[http], which brings aiohttp)."""
    env = default_environment()
    if python:
        env.update(python_version=python, python_full_version=f"{python}.0")
    seen: set[tuple[str, str]] = set()
    todo = [(canonical(n), "") for n in names]
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        for line in requires(name):
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({**env, "extra": extra}):
                todo += [(canonical(req.name), e) for e in ["", *sorted(req.extras)]]
    return {name for name, _ in seen}


def stand_in_torch(folder: Path) -> Path:
    """A wheel with torch's name, version and pure-Python requirements, and nothing else.

    The registry's Linux torch pulls a dozen CUDA packages, and gigabytes to read their metadata;
    the resolver only needs to know what torch requires besides them.
    """
    version = distribution("torch").version.split("+")[0]
    requires = [r for r in installed_requires("torch") if not r.startswith(("nvidia", "triton", "cuda"))]
    wheel = folder / f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        )
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def interpreter(python: str) -> str:
    """A Python `python` interpreter of this machine (on PATH, or one of pyenv's)."""
    names = [
        shutil.which(f"python{python}"),
        *glob.glob(str(Path.home() / f".pyenv/versions/{python}.*/bin/python{python}")),
    ]
    for name in filter(None, names):
        if subprocess.run([name, "-c", ""], capture_output=True).returncode == 0:
            return name
    raise FileNotFoundError(f"no Python {python} interpreter found (python{python} on PATH, or pyenv's)")


def resolve(python: str, requirements: list[str], constraints: list[str]) -> dict[str, dict]:
    """What pip would install on this platform under Python `python`: {name: metadata}.

    pip runs under that interpreter, so environment markers (tomli on 3.10) are its own; it
    installs nothing.
    """
    pins = {canonical(Requirement(c).name): c for c in constraints}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        torch = stand_in_torch(folder)
        (folder / "requirements.txt").write_text(
            "".join(f"{r}\n" for r in requirements if canonical(Requirement(r).name) != "torch")
            + f"torch @ {torch.as_uri()}\n"
        )
        (folder / "constraints.txt").write_text("".join(f"{c}\n" for n, c in pins.items() if n != "torch"))
        result = subprocess.run(
            [interpreter(python), "-m", "pip", "--disable-pip-version-check", "install", "--dry-run"]
            + ["--ignore-installed", "--prefer-binary", "-q", "--report", folder / "report.json"]
            + ["-r", folder / "requirements.txt", "-c", folder / "constraints.txt"],
            capture_output=True,
            text=True,
        )
        if result.returncode:
            raise RuntimeError(f"pip cannot resolve these pins for Python {python}:\n{result.stderr[-3000:]}")
        report = json.loads((folder / "report.json").read_text())
    return {canonical(item["metadata"]["name"]): item["metadata"] for item in report["install"]}


def pin(name: str) -> str:
    version = distribution(name).version.split("+")[0]  # torch 2.13.0+cpu pins as 2.13.0
    return f"{name}=={version}"


def needs(requires: Callable[[str], list[str]], python: str | None = None) -> dict[str, str | None]:
    """{package: the Jinja condition on the answers under which a project needs it (None: always)}."""
    core = closure(CORE, requires, python)
    needed_by: dict[str, list[str]] = {}
    for condition, names in BY_ANSWER.items():
        for name in closure(names, requires, python) - core:
            needed_by.setdefault(name, []).append(condition)
    return {name: None for name in core} | {name: " or ".join(c) for name, c in needed_by.items()}


def lock_line(text: str, *conditions: str | None) -> str:
    """One line of the project lock, rendered only when every given condition holds."""
    wanted = [c for c in conditions if c]
    if len(wanted) > 1:
        wanted = [f"({c})" if " or " in c else c for c in wanted]
    return f"{{% if {' and '.join(wanted)} %}}{text}\n{{% endif %}}" if wanted else f"{text}\n"


def project_lock() -> str:
    here = needs(installed_requires)
    upper = [pin(name).replace("==", "<=") for name in here]  # the newest that 3.10 takes
    every = sorted({n for ns in [CORE, *BY_ANSWER.values()] for n in ns})
    oldest = resolve(OLDEST, every, upper)
    there = needs(lambda name: oldest[name].get("requires_dist", []), OLDEST)
    on_oldest, not_oldest = (f"cookiecutter.python_version {op} '{OLDEST}'" for op in ("==", "!="))
    lines = []
    for name in sorted(here | there):
        pinned = pin(name) if name in here else None
        old = f"{name}=={oldest[name]['version']}" if name in there else None
        if pinned == old and here[name] == there[name]:  # the same on every Python
            lines.append(lock_line(pinned, here[name]))
            continue
        if pinned:
            lines.append(lock_line(pinned, here[name], not_oldest))
            lines.append(lock_line(f'{pinned}; python_version > "{OLDEST}"', here[name], on_oldest))
        if old:
            lines.append(lock_line(f'{old}; python_version <= "{OLDEST}"', there[name], on_oldest))
    return (
        "# The exact versions this project's tests ran with (Python 3.11, Linux x86-64).\n"
        "# Install with: pip install -c constraints.txt -e '.[dev]'   (pyproject.toml keeps the ranges).\n"
        "# torch is pinned without a build label: the CPU and the CUDA wheels both match.\n"
        "{% if cookiecutter.python_version == '" + OLDEST + "' %}"
        f"# Lines marked python_version <= {OLDEST}: the newest versions that support {OLDEST} (numpy 2.4,\n"
        f"# scipy 1.17 and others need 3.11), resolved by pip under Python {OLDEST}; the tests ran on 3.11.\n"
        "{% endif %}" + "".join(lines)
    )


def from_the_registry(dist: Distribution) -> bool:
    """Not pip or setuptools, nor installed from a folder or file (PEP 610's direct_url.json)."""
    name = canonical(dist.metadata["Name"])
    return name not in {"pip", "setuptools"} and dist.read_text("direct_url.json") is None


def main() -> None:
    if arguments := sys.argv[1:]:  # `--help` once wrote both locks
        print(__doc__)
        raise SystemExit(
            0 if arguments[0] in ("-h", "--help") else f"lock.py takes no arguments: {arguments}"
        )
    installed = {canonical(d.metadata["Name"]): d for d in distributions() if from_the_registry(d)}
    (ROOT / "constraints.txt").write_text(
        "# Every package of the template's environment: the exact set `make setup` and CI install.\n"
        "# Written by scripts/lock.py.\n" + "".join(f"{pin(n)}\n" for n in sorted(installed))
    )
    PROJECT_LOCK.write_text(project_lock())


if __name__ == "__main__":
    main()
