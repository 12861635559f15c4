"""Reject answers that would produce a broken project, before anything is written.

Cookiecutter deletes the half-made project directory when this hook exits non-zero,
so a rejected answer leaves nothing behind. The hook never reads standard input.
"""

import json
import keyword
import re
import sys

# Names a project must not take: what it and its dependencies import while its commands and tests run
# (tests/test_names.py runs them in a project with every option and checks each module loaded is here),
# its own top-level files (train.py, tests/conftest.py, src/hydra_plugins, ...; and tests/test_*.py: any
# test_ name), and the names Python or pytest resolve first. A package named like one of them shadows
# it on import ("pil" too: macOS's file system ignores case).
NAMES = """
absl alembic annotated_doc annotated_types antlr4 anyio attr attrs cachetools certifi charset_normalizer
click cloudpickle colorlog conftest cookiecutter cryptography cycler cython_runtime databricks dateutil
dotenv eval execnet export fastapi filelock fonttools fsspec git gitdb google hydra hydra_plugins idna
importlib_metadata iniconfig joblib kiwisolver lightning lightning_utilities mako markupsafe matplotlib
ml_dtypes mlflow mpl_toolkits mpmath narwhals networkx numpy omegaconf onnx onnx_ir onnxruntime onnxscript
opentelemetry optuna own_datamodule packaging pil platformdirs pluggy predict py pydantic pydantic_core
pygments pyparsing pytest pytorch_lightning requests rich scikit_learn scipy signal_helpers sklearn
slurm_cluster smmap sniffio sqlalchemy sqlparse src starlette submitit sympy tensorboard test tests
threadpoolctl torch torchdata torchgen torchmetrics torchvision tqdm train typing_extensions
typing_inspection urllib3 wandb xdist xxhash yaml zipp
"""
RESERVED = set(NAMES.split())

SLUG_RULE = re.compile(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")
PACKAGE_RULE = re.compile(r"^[a-z_][a-z0-9_]*$")
EMAIL_RULE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def problems(answers: dict[str, str]) -> list[str]:
    """Every rule the answers break, each naming the value and what is accepted."""
    found = []
    name, slug, package = answers["project_name"], answers["project_slug"], answers["package_name"]
    if not name.strip():
        found.append("project_name is empty: give the project a name, e.g. 'Digit Recognition'.")
    if not SLUG_RULE.match(slug):
        found.append(
            f"project_slug {slug!r} is not a valid distribution and folder name: use lowercase "
            "ASCII letters, digits, '-', '_' and '.', starting and ending with a letter or digit."
        )
    if not PACKAGE_RULE.match(package):
        found.append(
            f"package_name {package!r} is not a valid Python package name: use lowercase ASCII "
            "letters, digits and '_', not starting with a digit (set package_name=... to choose one)."
        )
    elif keyword.iskeyword(package) or keyword.issoftkeyword(package):
        found.append(f"package_name {package!r} is a Python keyword; choose another name.")
    for field, value in (
        ("project_slug", slug.replace("-", "_").replace(".", "_")),
        ("package_name", package),
    ):
        if value in RESERVED or value in sys.stdlib_module_names or value.startswith("test_"):
            found.append(
                f"{field} {answers[field]!r} would shadow the module {value!r} "
                "(a dependency, the standard library, or one of the project's files); choose another name."
            )
    if not EMAIL_RULE.match(answers["author_email"]):
        found.append(f"author_email {answers['author_email']!r} is not an email address (name@host.domain).")
    return found


if __name__ == "__main__":
    # The answers as JSON in a raw string: valid Python before rendering too, so the hook
    # can be linted and its rules tested directly.
    errors = problems(json.loads(r"""{{ cookiecutter | tojson }}"""))
    if errors:
        print("Cannot generate the project:", *(f"  - {e}" for e in errors), sep="\n", file=sys.stderr)
        sys.exit(1)
