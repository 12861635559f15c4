"""Every logger config logs, offline, the metrics of metrics.json under the same names."""

from pathlib import Path

import pytest
from conftest import CONFIGS, compose_config

from {{ cookiecutter.package_name }}.train import train

LOGGERS = sorted(p.stem for p in (CONFIGS / "logger").glob("*.yaml"))
SHORT = ["debug=limit", "trainer.max_epochs=1"]


def wandb_records(path: Path) -> list:
    """The records of a W&B offline run file, as W&B's own messages (it has no reader in Python).

    The file is a LevelDB-style log: a 7-byte file header, then 32 KiB blocks of chunks, each
    behind a 7-byte header (checksum, length, type); a record that does not fit in a block's
    rest continues in the next block.
    """
    from wandb.proto.wandb_internal_pb2 import Record

    block, data, records, record, at = 32768, path.read_bytes(), [], bytearray(), 7
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    while at + 7 <= len(data):
        if (room := block - at % block) < 7:  # no room for a chunk header: zero padding
            at += room
            continue
        length, kind = int.from_bytes(data[at + 4 : at + 6], "little"), data[at + 6]
        assert kind in (1, 2, 3, 4), f"{path}: no chunk at byte {at}"  # full, first, middle, last
        record += data[at + 7 : at + 7 + length]
        at += 7 + length
        if kind in (1, 4):  # a record's whole
            records.append(Record.FromString(bytes(record)))
            record = bytearray()
    return records


def logged_names(name: str, run_dir: Path) -> set[str]:
    """The metric names one logger wrote, read back from its files."""
    if name == "csv":
        return set((run_dir / "csv" / "version_0" / "metrics.csv").read_text().splitlines()[0].split(","))
    if name == "tensorboard":
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        events = EventAccumulator(str(run_dir / "tensorboard")).Reload()
        assert "test/confusion_matrix" in events.Tags()["images"]
        return set(events.Tags()["scalars"])
    if name == "wandb":
        import wandb

        # W&B's own process writes the run's file, and may still be writing it after the run
        # has finished (seen under load: none of the keys there yet); a command's exit waits
        # for it, and so does teardown here.
        wandb.teardown()
        # An offline run keeps its records in one binary file: the metrics in its history records.
        (records,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
        history = [r.history for r in wandb_records(records) if r.WhichOneof("record_type") == "history"]
        media = run_dir.glob("wandb/offline-run-*/files/media")
        assert [p for folder in media for p in folder.rglob("confusion_matrix*.png")]
        return {item.key or item.nested_key[0] for step in history for item in step.item}  # top-level names
    if name == "mlflow":
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=f"sqlite:///{run_dir / 'logs' / 'mlflow.db'}")
        (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
        assert "confusion_matrix.png" in [file.path for file in client.list_artifacts(run.info.run_id)]
        return set(run.data.metrics)
    raise AssertionError(f"no check for logger {name}")


def test_every_logger_at_once_logs_the_metrics_json_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = compose_config("train", tmp_path, [f"logger=[{','.join(LOGGERS)}]", *SHORT])
    assert set(cfg.logger) == set(LOGGERS)
    metrics = train(cfg)
    for name in LOGGERS:
        missing = metrics.keys() - logged_names(name, tmp_path)
        assert not missing, f"{name} did not log {sorted(missing)}"
    # The full resolved config, once, as hyperparameters.
    hparams = (tmp_path / "csv" / "version_0" / "hparams.yaml").read_text()
    for key in ("trainer:", "data:", "seed: 42", "tags:"):
        assert key in hparams
{%- if cookiecutter.logger == 'tensorboard' %}


def test_tensorboard_s_hparams_view_has_the_config_and_the_final_metrics(tmp_path: Path) -> None:
    # Lightning writes TensorBoard's hyperparameters only with metrics: its view was empty (a walk's).
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    metrics = train(compose_config("train", tmp_path, ["logger=tensorboard", "seed=7", *SHORT]))
    saved = EventAccumulator(str(tmp_path / "tensorboard")).Reload().PluginTagToContent("hparams")
    start = HParamsPluginData.FromString(saved["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["seed"].number_value == 7 and start.hparams["data/batch_size"].number_value == 64
    experiment = HParamsPluginData.FromString(saved["_hparams_/experiment"]).experiment
    assert {info.name.tag for info in experiment.metric_infos} == set(metrics)
{%- endif %}
{%- if cookiecutter.__wandb == 'True' %}


# Fast, not slow: the first command of a new user without a W&B account.
def test_without_credentials_wandb_logs_offline_and_a_resumed_run_continues_its_wandb_run_moved_too(
    tmp_path: Path,
) -> None:
    from conftest import QUICK, run_script, stop_at

    no_account = {"WANDB_MODE": "", "WANDB_API_KEY": "", "HOME": str(tmp_path)}  # no ~/.netrc either
    stop = stop_at("on_train_batch_end", step=2)
    result = run_script(
        "train.py", *QUICK, "logger=wandb", *stop, cwd=tmp_path, RUN_NAME="no-account", **no_account
    )
    assert result.returncode == 75, result.stderr[-3000:]
    moved = (tmp_path / "logs" / "train" / "runs" / "no-account").rename(tmp_path / "moved")  # or not
    result = run_script("train.py", f"resume={moved}", cwd=tmp_path, **no_account)
    assert result.returncode == 0, result.stderr[-3000:]
    starts = list(moved.glob("wandb/offline-run-*"))
    assert len(starts) == 2 and len({start.name.rsplit("-", 1)[1] for start in starts}) == 1  # one W&B run id


def test_a_train_or_eval_call_that_fails_ends_its_wandb_run_and_the_next_call_logs_to_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import wandb
    from conftest import as_command

    from {{ cookiecutter.package_name }}.eval import evaluate

    monkeypatch.setenv("WANDB_MODE", "offline")
    failing = ["logger=wandb", *SHORT, "model.optimizer.lr=-1"]  # torch refuses it as training starts
    with pytest.raises(Exception, match="Invalid learning rate"):
        train(compose_config("train", tmp_path / "failed", failing))
    assert wandb.run is None  # ended: a notebook's next call logged into the failed one's run (a probe)
    train(compose_config("train", tmp_path / "next", ["logger=wandb", *SHORT]))
    assert len(list((tmp_path / "next").glob("wandb/offline-run-*"))) == 1
    checkpoint = f"ckpt_path={tmp_path / 'next' / 'checkpoints' / 'last.ckpt'}"
    fail = "++trainer.callbacks=[{_target_:signal_helpers.Fail,hook:on_test_start}]"  # once its loggers run
    failing = [checkpoint, "logger=wandb", fail]
    cfg = compose_config("eval", tmp_path / "eval", failing)
    with as_command("eval", failing), pytest.raises(RuntimeError, match="failed on purpose"):
        evaluate(cfg)
    assert wandb.run is None


@pytest.mark.slow
def test_multiruns_of_train_and_eval_give_each_job_its_own_wandb_run_grouped(tmp_path: Path) -> None:
    from conftest import run_script

    # debug=limit, not fdr: a fast dev run replaces the loggers with a dummy.
    jobs = (
        "-m",
        "seed=0,1",
        "debug=limit",
        "trainer.max_epochs=1",
        "logger=wandb",
        "callbacks.progress_bar=null",
    )
    result = run_script("train.py", *jobs, cwd=tmp_path, RUN_NAME="grouped")
    assert result.returncode == 0, result.stderr[-3000:]
    sweep = tmp_path / "logs" / "debug" / "multiruns" / "grouped"
    runs = [list((sweep / str(job)).glob("wandb/offline-run-*")) for job in (0, 1)]
    assert [len(found) for found in runs] == [1, 1]
    # Each job ended its run before the next began, or the second would have continued the first.
    assert runs[0][0].name.rsplit("-", 1)[1] != runs[1][0].name.rsplit("-", 1)[1]
    for (found,) in runs:
        records = wandb_records(next(found.glob("run-*.wandb")))
        assert {r.run.run_group for r in records if r.WhichOneof("record_type") == "run"} == {"grouped"}
    # eval.py's too, a checkpoint each: its second job logged into the first's W&B run (a probe).
    checkpoints = "ckpt_path=" + ",".join(str(sweep / job / "checkpoints" / "last.ckpt") for job in "01")
    evals = run_script("eval.py", "-m", checkpoints, "logger=wandb", cwd=tmp_path, RUN_NAME="evals")
    assert evals.returncode == 0, evals.stderr[-3000:]
    evaluated = tmp_path / "logs" / "eval" / "multiruns" / "evals"
    ids = [{run.name.rsplit("-")[-1] for run in (evaluated / j).glob("wandb/offline-run-*")} for j in "01"]
    assert len(ids[0]) == len(ids[1]) == 1 and ids[0] != ids[1], ids
{%- endif %}
{%- if cookiecutter.logger == 'mlflow' %}


def test_a_resumed_run_logs_to_its_first_start_s_mlflow_run(tmp_path: Path) -> None:
    # Was a second MLflow run (the first left FAILED): the curves of one run in two.
    from conftest import QUICK, run_script, stop_at
    from mlflow.tracking import MlflowClient

    quick = [o for o in QUICK if not o.startswith("logger=")]
    stop = stop_at("on_train_batch_end", step=6)  # in the second epoch
    started = run_script("train.py", *quick, "logger=mlflow", *stop, cwd=tmp_path, RUN_NAME="run")
    assert started.returncode == 75, started.stderr[-3000:]
    assert "database tables" not in started.stdout + started.stderr  # MLflow's, making logs/mlflow.db
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'logs' / 'mlflow.db'}")
    (stopped,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert stopped.info.status == "KILLED"  # stopped to resume (was FAILED, as a crash)
    resumed = run_script("train.py", "resume=run", "trainer.max_epochs=3", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FINISHED" and {"test/acc", "val/acc"} <= run.data.metrics.keys()
    history = client.get_metric_history(run.info.run_id, "train/loss")
    assert sorted(m.step for m in history) == [3, 7, 11]  # each epoch's once: the first start's, the resume's
    # The first start's params (MLflow's cannot change); the tag says what the resume changed (it said not).
    assert run.data.params["resume"] == "None" and run.data.params["trainer/max_epochs"] == "2"
    assert "trainer.max_epochs=3" in run.data.tags["overrides"].split()
    # Named as its directory (was task_name: every run "train"), tagged with its task.
    assert run.info.run_name == "run" and run.data.tags["task_name"] == "train"


def test_a_run_copied_from_another_mlflow_store_resumes_into_a_new_mlflow_run(tmp_path: Path) -> None:
    # Its noted MLflow run is in the store it came from: "Run with id=... not found", a traceback.
    import shutil

    from conftest import QUICK, run_script, stop_at
    from mlflow.tracking import MlflowClient

    quick = [o for o in QUICK if not o.startswith("logger=")]
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    stop = stop_at("on_train_batch_end", step=6)
    started = run_script("train.py", *quick, "logger=mlflow", *stop, cwd=tmp_path / "a", RUN_NAME="run")
    assert started.returncode == 75, started.stderr[-3000:]
    shutil.copytree(tmp_path / "a" / "logs" / "train" / "runs" / "run", copy := tmp_path / "b" / "run")
    resumed = run_script("train.py", f"resume={copy}", cwd=tmp_path / "b")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "its MLflow run is not in sqlite:///" in resumed.stdout + resumed.stderr
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'b' / 'logs' / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FINISHED" and "test/acc" in run.data.metrics


def test_the_jobs_of_a_multirun_are_mlflow_runs_named_by_it(tmp_path: Path) -> None:
    from conftest import QUICK, run_script
    from mlflow.tracking import MlflowClient

    quick = [o for o in QUICK if not o.startswith("logger=")]
    sweep = f"hydra.sweep.dir={tmp_path / 'logs' / 'train' / 'multiruns' / 'grid'}"
    result = run_script("train.py", "-m", *quick, "logger=mlflow", "seed=1,2", sweep, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'logs' / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert sorted(run.info.run_name for run in runs) == ["grid/0", "grid/1"]
{%- endif %}
