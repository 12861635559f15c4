"""W&B sweeps, offline: each sweep file is valid, and the agent's exact command trains with its values.

The command is built by the installed wandb package's own code (the agent's macros and its
`args_no_hyphens` formatting); parameters are sampled from the sweep's distributions, as the
agent's random and grid searches do (a Bayesian search starts the same way).
"""

import json
import math
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import METRIC_KEYS, ROOT, run_script, type_checked, write_table
from wandb.sdk.launch.sweeps import utils as sweep_utils

SWEEPS = sorted((ROOT / "sweeps").glob("*.yaml"))
DISTRIBUTIONS = {"uniform", "int_uniform", "log_uniform_values", "categorical", "constant"}


def sweep(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def problems(config: dict[str, Any]) -> list[str]:
    """What W&B's sweep config validation would reject, for the features these files use."""
    found = []
    if config.get("method") not in ("random", "grid", "bayes"):
        found.append(f"method {config.get('method')!r}")
    metric = config.get("metric", {})
    if not metric.get("name") or metric.get("goal") not in ("minimize", "maximize"):
        found.append(f"metric {metric!r}: needs a name and goal minimize or maximize")
    for name, spec in config.get("parameters", {}).items():
        if "values" in spec or "value" in spec:
            continue
        if spec.get("distribution") not in DISTRIBUTIONS or not {"min", "max"} <= spec.keys():
            found.append(f"parameter {name}: {spec!r}")
        elif config["method"] == "grid":
            found.append(f"parameter {name}: a grid search needs values, not a distribution")
        elif spec["min"] >= spec["max"]:
            found.append(f"parameter {name}: min must be below max")
    if (stop := config.get("early_terminate")) and (
        stop.get("type") != "hyperband" or not ({"min_iter", "max_iter"} & stop.keys())
    ):
        found.append(f"early_terminate {stop!r}: hyperband needs min_iter or max_iter")
    command = config.get("command", [])
    if "${args_no_hyphens}" not in command or "${args}" in command:
        found.append("command: Hydra needs ${args_no_hyphens} (key=value), not ${args} (--key=value)")
    return found


def sample(parameters: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    values = {}
    for name, spec in parameters.items():
        if "value" in spec:
            values[name] = spec["value"]
        elif "values" in spec:
            values[name] = rng.choice(spec["values"])
        elif spec["distribution"] == "log_uniform_values":
            values[name] = math.exp(rng.uniform(math.log(spec["min"]), math.log(spec["max"])))
        elif spec["distribution"] == "int_uniform":
            values[name] = rng.randint(spec["min"], spec["max"])
        else:
            values[name] = rng.uniform(spec["min"], spec["max"])
    return values


def agent_command(config: dict[str, Any], values: dict[str, Any]) -> list[str]:
    """The command line the W&B agent runs for these values, built by wandb's own functions."""
    template = sweep_utils.create_sweep_command(list(config["command"]))
    macros = sweep_utils.create_sweep_command_args({"args": {k: {"value": v} for k, v in values.items()}})
    macros |= {"env": [], "interpreter": [sys.executable], "program": [str(ROOT / config["program"])]}
    command: list[str] = []
    for chunk in template:  # the agent's own substitution: ${name} expands to a list of arguments
        command += macros.get(chunk[2:-1], []) if chunk.startswith("${") and chunk.endswith("}") else [chunk]
    return command


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_sweep_file_is_valid_and_its_parameters_are_config_keys(path: Path, tmp_path: Path) -> None:
    config = sweep(path)
    assert not problems(config)
    assert config["metric"]["name"] in METRIC_KEYS
    assert (ROOT / config["program"]).is_file()
    overrides = agent_command(config, sample(config["parameters"], random.Random(0)))[2:]
    type_checked(tmp_path, overrides)  # every key exists and every value fits


{%- if cookiecutter.__optuna == 'True' %}


def optuna_search() -> tuple[dict[str, Any], dict[str, Any]]:
    """The Optuna search's sweeper settings, and what its space varies, as Optuna distributions."""
    from conftest import CONFIGS

    from {{ cookiecutter.package_name }}.utils.optuna_settings import search_space

    config = yaml.safe_load((CONFIGS / "hparams_search" / "optuna.yaml").read_text())
    sweeper = {**config["hydra"]["sweeper"], "optimized_metric": config["optimized_metric"]}
    space = search_space([f"{key}={value}" for key, value in sweeper["params"].items()])[0]
    return sweeper, {key: d for key, d in space.items() if len(getattr(d, "choices", "ab")) > 1}


def as_optuna(spec: dict[str, Any]) -> Any:
    """A W&B sweep parameter as the Optuna distribution it stands for."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if "values" in spec:
        return CategoricalDistribution(spec["values"])
    low, high = spec["min"], spec["max"]
    if spec["distribution"] == "int_uniform":
        return IntDistribution(low, high)
    return FloatDistribution(low, high, log=spec["distribution"] == "log_uniform_values")


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_sweep_searches_the_space_and_metric_of_the_optuna_search(path: Path) -> None:
    config, (sweeper, space) = sweep(path), optuna_search()
    assert config["metric"] == {"name": sweeper["optimized_metric"], "goal": sweeper["direction"]}
    # What varies: a single value (W&B's run group in random.yaml, the only net) is a setting.
    varied = {name: spec for name, spec in config["parameters"].items() if len(spec.get("values", "ab")) > 1}
    if config["method"] != "grid":
        assert {name: as_optuna(spec) for name, spec in varied.items()} == space
    else:  # points of the same space
        for name, spec in varied.items():
            known = space[name]
            inside = [
                v in known.choices if hasattr(known, "choices") else known.low <= v <= known.high
                for v in spec["values"]
            ]
            assert all(inside), name
    if stop := config.get("early_terminate"):  # W&B's counterpart of the Optuna pruner, on the same metric
        assert stop["type"] == "hyperband" and sweeper["pruner"]
{%- endif %}


@pytest.mark.slow
@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_agent_command_trains_with_the_sampled_values(path: Path, tmp_path: Path) -> None:
    config = sweep(path)
    values = sample(config["parameters"], random.Random(1))
    command = agent_command(config, values)
    result = run_script(command[1], *command[2:], "debug=fdr", cwd=tmp_path, RUN_NAME="agent")
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "logs" / "debug" / "runs" / "agent"
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    choices = yaml.safe_load((run / ".hydra" / "hydra.yaml").read_text())["hydra"]["runtime"]["choices"]
    for key, value in values.items():
        if "/" in key:  # a config group
            assert choices[key] == value
            continue
        node = resolved
        for part in key.split("."):
            node = node[part]
        assert node == pytest.approx(value) if isinstance(value, float) else node == value, key
    assert config["metric"]["name"] in json.loads((run / "metrics.json").read_text())


@pytest.mark.slow
def test_a_sweep_on_your_own_data_as_the_readme_says(tmp_path: Path) -> None:
    # The data's overrides in `command:` before the agent's values; a table: parameters that fit it.
    config = sweep(ROOT / "sweeps" / "bayes.yaml")
    at = config["command"].index("${args_no_hyphens}")
    config["command"][at:at] = ["data=csv", "data.path=table.csv", "data.target=species"]
    config["parameters"]["model/net"] = {"values": ["mlp"]}
    write_table(tmp_path / "table.csv")  # where the agent runs
    command = agent_command(config, sample(config["parameters"], random.Random(2)))
    result = run_script(command[1], *command[2:], "debug=fdr", cwd=tmp_path, RUN_NAME="own")
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "logs" / "debug" / "runs" / "own"
    assert yaml.safe_load((run / "config.yaml").read_text())["data"]["path"] == "table.csv"
    classes = [row.split(",")[0] for row in (run / "test_per_class.csv").read_text().splitlines()[1:]]
    assert classes == ["kind_0", "kind_1", "kind_2"]  # the table's, tested
    assert config["metric"]["name"] in json.loads((run / "metrics.json").read_text())


@pytest.mark.slow
def test_an_agent_s_trials_in_one_slurm_job_each_train_and_a_trial_it_stops_ends(tmp_path: Path) -> None:
    # In one SLURM job, every trial was the job's run (slurm-<id>): the next one was refused as a resume
    # with other overrides. A trial the agent stopped (Hyperband: SIGTERM) exited 75, failed to the agent
    # and to W&B, and `resume=latest` later trained it on, past the sweep's stop (a read-through's).
    from conftest import stop_at
    from test_loggers import wandb_records

    config = sweep(ROOT / "sweeps" / "bayes.yaml")
    job = {"SLURM_JOB_ID": "555", "SLURM_JOB_NAME": "agents", "WANDB_SWEEP_ID": "sweep"}
    short = ["trainer.max_epochs=2", "+trainer.limit_train_batches=4", "+trainer.limit_val_batches=2"]
    for trial in ("t1", "t2"):
        command = agent_command(config, sample(config["parameters"], random.Random(trial)))
        stop = stop_at("on_train_batch_end", step=5) if trial == "t2" else []  # in its second epoch
        result = run_script(command[1], *command[2:], *short, *stop, cwd=tmp_path, WANDB_RUN_ID=trial, **job)
        assert result.returncode == 0, result.stderr[-3000:]  # the agent's: not a failed run
    runs = tmp_path / "logs" / "train" / "runs"
    assert sorted(p.name for p in runs.iterdir()) == ["wandb-t1", "wandb-t2"]
    ended = json.loads((runs / "wandb-t2" / "metrics.json").read_text())  # as a finished run: not resumed
    assert config["metric"]["name"] in ended and "test/acc" not in ended  # its first epoch's; untested
    (records,) = (runs / "wandb-t2").glob("wandb/offline-run-*/run-*.wandb")
    assert [r.exit.exit_code for r in wandb_records(records) if r.WhichOneof("record_type") == "exit"] == [0]
    again = run_script("train.py", "resume=latest", cwd=tmp_path)
    assert again.returncode == 1 and "resume=latest: no unfinished run" in again.stderr
