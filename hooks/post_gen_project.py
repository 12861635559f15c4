"""Remove what the unchosen options left, so the project mentions only what was chosen.

Every optional file lives in the template; this hook deletes the ones the answers did not
ask for. Dependencies, README sections and configs are switched in the files themselves.
"""

import json
import shutil
import sys
from pathlib import Path


def unwanted(answers: dict) -> list[str]:
    """Paths, relative to the project, that the answers did not ask for."""
    pkg = f"src/{answers['package_name']}"
    configs = f"{pkg}/configs"
    wandb, optuna, sweeps = (answers[key] == "True" for key in ("__wandb", "__optuna", "__sweeps"))
    drop = {
        # The digits example, or the minimal one.
        f"{pkg}/data/digits.py": answers["example"] != "digits",
        f"{configs}/data/digits.yaml": answers["example"] != "digits",
        f"{pkg}/models/nets/cnn.py": answers["example"] != "digits",
        f"{configs}/model/net/cnn.yaml": answers["example"] != "digits",
        f"{pkg}/data/blobs.py": answers["example"] != "minimal",
        f"{configs}/data/blobs.yaml": answers["example"] != "minimal",
        # Loggers: csv always; the others only where their package is a dependency.
        f"{configs}/logger/wandb.yaml": not wandb,
        f"{configs}/logger/tensorboard.yaml": answers["logger"] != "tensorboard",
        f"{configs}/logger/mlflow.yaml": answers["logger"] != "mlflow",
        # Hyperparameter search.
        "sweeps": not sweeps,
        "tests/test_sweeps.py": not sweeps,
        f"{configs}/hparams_search": not optuna,
        f"{configs}/hydra/sweeper": not optuna,
        f"{pkg}/utils/optuna_sweeper.py": not optuna,
        f"{pkg}/utils/optuna_settings.py": not optuna,
        f"{pkg}/utils/optuna_results.py": not optuna,
        f"{pkg}/callbacks/optuna_pruning.py": not optuna,
        "src/hydra_plugins": not optuna,
        "tests/test_optuna.py": not optuna,
        # Infrastructure.
        f"{configs}/hydra/launcher": not answers["slurm"],
        f"{pkg}/utils/slurm_launcher.py": not answers["slurm"],
        "scripts/slurm": not answers["slurm"],
        "tests/test_slurm.py": not answers["slurm"],
        "tests/slurm_cluster.py": not answers["slurm"],
        "Dockerfile": not answers["docker"],
        ".dockerignore": not answers["docker"],
        ".github": answers["ci"] != "github",
        ".pre-commit-config.yaml": not answers["pre_commit"],
        "LICENSE": answers["license"] == "none",
    }
    return [path for path, remove in drop.items() if remove]


def remove(project: Path, paths: list[str]) -> None:
    for relative in paths:
        path = project / relative
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    # Folders the removals emptied (scripts/ without slurm, say) go too.
    for folder in sorted((p for p in project.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(folder.iterdir()):
            folder.rmdir()


if __name__ == "__main__":
    # The answers as JSON in a raw string: valid Python before rendering too.
    answers = json.loads(r"""{{ cookiecutter | tojson }}""")
    try:
        remove(Path.cwd(), unwanted(answers))
    except OSError as error:
        print(f"Could not remove an unselected file: {error}", file=sys.stderr)
        sys.exit(1)
