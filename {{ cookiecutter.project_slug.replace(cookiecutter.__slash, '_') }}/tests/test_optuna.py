"""Optuna searches (utils/optuna_sweeper.py) of tiny trials: pruning, the best trial as an experiment
config, a killed search continued by two workers at once, and each bad setting named before any trial."""

import json
import multiprocessing
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from conftest import ROOT, compose_config, continue_command, metrics, run_script, script_env

from {{ cookiecutter.package_name }}.utils.optuna_settings import make, open_storage, search_space
from {{ cookiecutter.package_name }}.utils.optuna_sweeper import here, tell
from {{ cookiecutter.package_name }}.utils.runs import EXIT_CODE, ConfigError

# Tiny trials: 2 epochs of 3 batches, validated on 2, nothing drawn (and no test: the search's config).
TINY = [
    "debug=limit",
    "trainer.max_epochs=2",
    "logger=csv",
    "data.batch_size=64",
    "model/net=mlp",
]
TINY += ["callbacks.progress_bar=null", "callbacks.test_report=null"]


def search(study: str, trials: int, *overrides: str) -> list[str]:
    """The arguments of `python train.py` for a search of `trials` tiny trials."""
    study_settings = [f"hydra.sweeper.study_name={study}", f"hydra.sweeper.n_trials={trials}"]
    return ["-m", "hparams_search=optuna", *study_settings, *TINY, *overrides]


def start(cwd: Path, arguments: list[str], log: Path) -> subprocess.Popen:
    """`python train.py <arguments>` in the background, as another terminal would start it."""
    env = script_env(cwd)
    with log.open("w") as out:
        command = [sys.executable, str(ROOT / "train.py"), *arguments]
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=out)


def sweep_dir(cwd: Path, study: str) -> Path:
    return cwd / "logs" / "debug" / "multiruns" / study


def load(cwd: Path, study: str) -> optuna.Study:
    """The study from its default storage, the journal file in its sweep directory."""
    return optuna.load_study(
        study_name=study, storage=open_storage(str(sweep_dir(cwd, study) / "optuna.journal"))
    )


def test_search_prunes_a_bad_region_and_its_best_config_trains_to_the_best_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Half the learning rates are far too small to learn: the median pruner stops those trials before their
    # last epoch (of 4: on data of yours, the first epoch's 3 steps may leave every trial at chance), and may
    # stop a good one below the median of those before it.
    space = ("model.optimizer.lr=choice(0.03, 0.0000001)", "model.net.dropout=interval(0.0, 0.2)")
    pruner = ("hydra.sweeper.pruner.n_startup_trials=2", "hydra.sweeper.pruner.n_warmup_steps=0")
    settings = (*space, *pruner, "hydra.sweeper.sampler.seed=0", "trainer.max_epochs=4")
    result = run_script("train.py", *search("lr", 8, *settings), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "n_startup_trials=" not in result.stdout + result.stderr  # 5 and 2 of 8 trials: no warning
    study, sweep = load(tmp_path, "lr"), sweep_dir(tmp_path, "lr")
    states = {t.number: t.state.name for t in study.trials}
    assert sorted(states) == list(range(8)) and set(states.values()) == {"COMPLETE", "PRUNED"}, states
    for trial in study.trials:  # each trial is a finished run, untested; a pruned one says so, stopped early
        assert not [key for key in metrics(sweep / str(trial.number)) if key.startswith("test/")]
        marker = sweep / str(trial.number) / "pruned.json"
        assert marker.is_file() == (trial.state.name == "PRUNED")
        if marker.is_file():
            assert json.loads(marker.read_text())["epoch"] == trial.last_step
    # summary.json's means are of the complete trials (pruned ones, stopped early, were averaged in).
    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["metrics"]["val/acc_best"]["n"] == list(states.values()).count("COMPLETE")
    assert [job["dir"] for job in summary["jobs"] if "pruned" in job] == [
        str(number) for number, state in sorted(states.items()) if state == "PRUNED"
    ]
    bad = [t for t in study.trials if t.params["model.optimizer.lr"] == 1e-7]
    assert any(t.state.name == "PRUNED" and t.last_step < 3 for t in bad)  # before its last epoch
    assert study.best_params["model.optimizer.lr"] == 0.03
    for plot in ("optimization_history", "param_importances", "intermediate_values"):
        assert (sweep / f"{plot}.png").stat().st_size > 0
    assert "python train.py experiment=lr_best" in result.stderr + result.stdout

    from {{ cookiecutter.package_name }}.train import train

    # The search wrote configs/experiment/lr_best.yaml into the project root.
    monkeypatch.setenv("PROJECT_ROOT", str(tmp_path))
    best = train(compose_config("train", tmp_path / "best", ["experiment=lr_best"]))  # the test set's turn
    assert best["val/acc_best"] == pytest.approx(study.best_value, abs=1e-6) and "test/acc" in best


def trials_run_by(log: Path) -> list[int]:
    """The trials a worker ran to their end, from its log."""
    return [int(n) for n in re.findall(r"Trial (\d+) (?:complete|pruned)", log.read_text())]


def test_killed_search_is_continued_by_two_workers_sharing_the_study(tmp_path: Path) -> None:
    space = "model.optimizer.lr=interval(0.001, 0.03)"
    arguments = search("shared", 3, "hydra.sweeper.heartbeat_interval=1", space)
    killed = start(tmp_path, arguments, tmp_path / "killed.log")
    while not (sweep_dir(tmp_path, "shared") / "1" / ".hydra").exists() and killed.poll() is None:
        time.sleep(0.1)  # until trial 0 is done and trial 1 has started
    killed.kill()  # SIGKILL: the worker cannot mark its trial failed itself
    killed.wait()
    logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    workers = [start(tmp_path, arguments, log) for log in logs]  # the same command, twice at once
    assert [worker.wait(timeout=300) for worker in workers] == [0, 0], logs[0].read_text()[-3000:]
    first, second = trials_run_by(logs[0]), trials_run_by(logs[1])
    assert first and second and not set(first) & set(second), (first, second)  # no trial run twice
    states = {t.number: t.state.name for t in load(tmp_path, "shared").trials}
    assert states[1] == "FAIL" and list(states.values()).count("COMPLETE") == 3, states
    assert sorted(first + second) == [n for n in states if n > 1]


def test_stopped_search_is_continued_by_the_same_command(tmp_path: Path) -> None:
    arguments = search("stop", 3, "model.optimizer.lr=interval(0.001, 0.03)")
    stopped = start(tmp_path, arguments, log := tmp_path / "stopped.log")
    while not (sweep_dir(tmp_path, "stop") / "1" / ".hydra").exists() and stopped.poll() is None:
        time.sleep(0.1)  # trial 1 has started
    stopped.send_signal(signal.SIGTERM)  # a stop signal: the trial stops at its next safe point
    assert stopped.wait(timeout=120) == EXIT_CODE, log.read_text()[-3000:]
    assert "Search stopped: the same command continues the study" in log.read_text().splitlines()[-1]
    said = continue_command(log.read_text())  # the trial's: the search's command
    assert sorted(said[2:]) == sorted([*arguments[1:], f'hydra.sweep.dir="{sweep_dir(tmp_path, "stop")}"'])
    failed = [t.number for t in load(tmp_path, "stop").trials if t.state.name == "FAIL"]
    assert failed and not (sweep_dir(tmp_path, "stop") / str(failed[0]) / "metrics.json").exists()
    result = run_script(*said[1:], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    states = [t.state.name for t in load(tmp_path, "stop").trials]
    assert states.count("FAIL") == len(failed) and states.count("COMPLETE") == 3, states
    again = run_script(*said[1:], cwd=tmp_path)  # the study has its 3 trials: it said nothing of it
    assert "It has 3 ended trials: none to run (raise hydra.sweeper.n_trials" in again.stdout + again.stderr
    assert [t.state.name for t in load(tmp_path, "stop").trials] == states


def ended_pid() -> int:
    """The process id of a process that has ended."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(ended.stdout)


def running_trial(cwd: Path, study: str, worker: list, beat: float = 0) -> None:
    """A study whose trial 0 runs in `worker` ([host, pid, heartbeat interval]), its heartbeat sent `beat`
    seconds ago."""
    (folder := sweep_dir(cwd, study)).mkdir(parents=True)
    storage = open_storage(str(folder / "optuna.journal"))
    trial = optuna.create_study(storage=storage, study_name=study, direction="maximize").ask()
    trial.set_user_attr("heartbeat", time.time() - beat)
    trial.set_user_attr("worker", worker)


def test_a_trial_of_a_killed_worker_of_this_machine_fails_at_once(tmp_path: Path) -> None:
    # A search killed (kill -9) and started again waited two heartbeat intervals (2 minutes) for its own
    # trial, as for one of another machine's worker (a probe's).
    running_trial(tmp_path, "dead", [here(), ended_pid(), 60])
    result = run_script("train.py", *search("dead", 1), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Trial 0: its worker has ended: failed." in (said := result.stdout + result.stderr)
    # 1 trial of 5 random ones first, and 5 before any is pruned: said, not left to guess.
    for kind, does in (("sampler", "draws all at random"), ("pruner", "prunes none")):
        assert f"hydra.sweeper.{kind}.n_startup_trials=5, n_trials=1: it {does}" in said
    assert [trial.state.name for trial in load(tmp_path, "dead").trials] == ["FAIL", "COMPLETE"]


def test_a_search_waiting_for_another_worker_s_trial_stops_on_a_signal(tmp_path: Path) -> None:
    # It went on waiting after SIGTERM; a second Ctrl+C ended it with a traceback (a probe's). The trial's
    # worker: a container's, with the host's name (docker --network=host), whose process ids are its own.
    # It beats every 60 s, and beat 5 s ago: a search beating every second waits for it all the same (it
    # failed the trial, as silent for more than two of its own intervals).
    running_trial(tmp_path, "wait", [f"{socket.gethostname()} 0", ended_pid(), 60], beat=5)
    arguments = search("wait", 1, "hydra.sweeper.heartbeat_interval=1")
    waiting = start(tmp_path, arguments, log := tmp_path / "wait.log")
    while "Waiting for the 1 trials" not in log.read_text() and waiting.poll() is None:
        time.sleep(0.1)
    waiting.send_signal(signal.SIGTERM)
    assert waiting.wait(timeout=60) == EXIT_CODE, log.read_text()[-3000:]
    assert "Search stopped: the same command continues the study." in log.read_text()
    assert [trial.state.name for trial in load(tmp_path, "wait").trials] == ["RUNNING"]  # not this one's


def test_a_study_of_failed_trials_alone_continues_for_another_metric(tmp_path: Path) -> None:
    # A typo in optimized_metric: its trial trains, then fails; the study was then bound to the typo.
    typo = run_script("train.py", *search("typo", 1, "optimized_metric=val/accc"), cwd=tmp_path)
    assert typo.returncode == 1 and "Trial 0 returned None" in typo.stderr, typo.stderr[-3000:]
    assert "val/accc is not among the validation's metrics" in typo.stdout + typo.stderr  # at its first
    # Not its direction: Optuna keeps a study's, failed trials' too (it maximized the loss, silently).
    minimize = ("optimized_metric=val/loss", "hydra.sweeper.direction=minimize")
    other = run_script("train.py", *search("typo", 1, *minimize), cwd=tmp_path)
    assert other.returncode == 1 and "is to maximize val/loss, not to minimize val/loss" in other.stderr
    fixed = run_script("train.py", *search("typo", 1), cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert [trial.state.name for trial in load(tmp_path, "typo").trials] == ["FAIL", "COMPLETE"]


def test_a_study_of_failed_trials_alone_keeps_a_parameter_s_kind_and_choices(tmp_path: Path) -> None:
    # Optuna's storage binds them in failed trials too: a walk's choice, fixed after its only trial failed,
    # ended in Optuna's own words ("does not support dynamic value space"), a trial left running each time.
    bad = run_script("train.py", *search("c", 1, "model.net.dropout=choice(2.0, 3.0)"), cwd=tmp_path)
    assert bad.returncode == 1 and [trial.state.name for trial in load(tmp_path, "c").trials] == ["FAIL"]
    for other in "choice(0.1, 0.2)", "interval(0.0, 0.2)":
        result = run_script("train.py", *search("c", 1, f"model.net.dropout={other}"), cwd=tmp_path)
        message = "its trial 0 searched model.net.dropout as CategoricalDistribution(choices=(2.0, 3.0)), now"
        assert result.returncode == 1 and message in result.stderr, result.stderr[-3000:]
        assert "hydra.sweeper.study_name=<new name>" in result.stderr
    assert [trial.state.name for trial in load(tmp_path, "c").trials] == ["FAIL"]
    fixed = search("c", 1, "model.net.dropout=0.1")  # not searched: the study continues
    assert run_script("train.py", *fixed, cwd=tmp_path).returncode == 0


def test_a_search_of_ddp_trials_is_one_search(tmp_path: Path) -> None:
    # Lightning starts a trial's second rank as `python train.py <its overrides>`, hparams_search=optuna
    # among them: that rank ran a search of its own, and was left running when the command ended.
    result = run_script("train.py", *search("ddp", 1, "trainer.devices=2", "strategy=ddp"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (result.stdout + result.stderr).count("Study ddp in") == 1
    assert [trial.state.name for trial in load(tmp_path, "ddp").trials] == ["COMPLETE"]


def test_a_study_continued_for_another_metric_direction_config_or_space_is_refused(tmp_path: Path) -> None:
    # Optuna loads a study with its own direction, whatever the sweeper's: the best trial mixed both.
    minimize = ("optimized_metric=val/loss", "hydra.sweeper.direction=minimize")
    assert run_script("train.py", *search("s", 1, *minimize), cwd=tmp_path).returncode == 0
    for other in [], ["optimized_metric=val/loss"]:  # the defaults: maximize val/acc_best
        result = run_script("train.py", *search("s", 2, *other), cwd=tmp_path)
        assert result.returncode == 1 and "is to minimize val/loss, not to maximize" in result.stderr
    # Another data or net: its trials would join the study's, its best trial and summary mixed both.
    result = run_script("train.py", *search("s", 2, *minimize, "data.val_fraction=0.3"), cwd=tmp_path)
    assert result.returncode == 1 and "adds data.val_fraction=0.3 and leaves out nothing" in result.stderr
    data = compose_config("train", tmp_path / "default").data  # the default's (yours too): its files' place
    for other in [f"data.{key}=elsewhere" for key in ("root", "path") if key in data]:  # its trials joined
        result = run_script("train.py", *search("s", 2, *minimize, other), cwd=tmp_path)
        assert result.returncode == 1 and f"adds {other} and leaves out nothing" in result.stderr
    # Another space: the sampler's next points would come from trials of both (a probe's, unnoticed).
    narrower = "model.net.dropout=interval(0.0, 0.2)"
    result = run_script("train.py", *search("s", 2, *minimize, narrower), cwd=tmp_path)
    assert result.returncode == 1 and "another space (model.net.dropout: FloatDistribution" in result.stderr
    assert len(load(tmp_path, "s").trials) == 1
    hardware = ["trainer.accelerator=cpu", "logger=[]", "extras.print_config=false"]  # may differ
    assert run_script("train.py", *search("s", 2, *minimize, *hardware), cwd=tmp_path).returncode == 0
    assert [trial.state.name for trial in load(tmp_path, "s").trials] == ["COMPLETE"] * 2


def test_a_trial_ended_by_another_worker_between_read_and_write_is_left_as_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both workers above find the dead trial silent; one marks it failed after the other read it as
    # running and before it wrote (seen once in CI): Optuna refuses that second write.
    journal = str(tmp_path / "optuna.journal")
    here = optuna.create_study(storage=open_storage(journal), study_name="race")
    trial = here.ask()
    read = here._storage.get_trial(trial._trial_id)  # running, as this worker read it
    there = optuna.load_study(storage=open_storage(journal), study_name="race")
    there.tell(trial.number, state=optuna.trial.TrialState.FAIL)
    monkeypatch.setattr(here._storage, "get_trial", lambda trial_id: read)
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):  # what the sweeper met
        here.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
    tell(here, trial.number, optuna.trial.TrialState.FAIL)
    assert [t.state.name for t in there.trials] == ["FAIL"]


{%- if cookiecutter.slurm %}


def test_submitit_launcher_runs_a_batch_of_trials_at_once(tmp_path: Path) -> None:
    # submitit's local executor starts the jobs hydra/launcher=slurm submits to a cluster.
    arguments = search("batch", 2, "hydra/launcher=submitit_local", "hydra.sweeper.n_jobs=2")
    result = run_script("train.py", *arguments, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = [sweep_dir(tmp_path, "batch") / str(number) for number in range(2)]
    started = [(run / ".hydra" / "config.yaml").stat().st_mtime for run in runs]
    ended = [(run / "metrics.json").stat().st_mtime for run in runs]
    assert max(started) < min(ended)  # each trial in a job of its own, both at once
    assert [t.state.name for t in load(tmp_path, "batch").trials] == ["COMPLETE", "COMPLETE"]
{%- endif %}


def test_a_trial_failed_by_another_worker_while_it_trains_trains_on(tmp_path: Path) -> None:
    # Its next report raised Optuna's UpdateFinishedTrialError: a traceback, the run lost.
    from types import SimpleNamespace

    import torch

    from {{ cookiecutter.package_name }}.callbacks.optuna_pruning import OptunaPruning

    running_trial(tmp_path, "late", [here(), 1])
    journal = str(sweep_dir(tmp_path, "late") / "optuna.journal")
    pruning = OptunaPruning("val/acc", str(tmp_path), journal, "late", 0)
    trainer = SimpleNamespace(is_global_zero=True, sanity_checking=False, current_epoch=1, should_stop=False)
    trainer.strategy, trainer.callback_metrics = SimpleNamespace(broadcast=bool), {"val/acc": torch.ones(())}
    pruning.on_fit_start(trainer, None)
    tell(load(tmp_path, "late"), 0, optuna.trial.TrialState.FAIL)  # its heartbeat was late, say
    pruning.on_validation_end(trainer, None)
    assert pruning.trial is None and not trainer.should_stop


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "hydra.sweeper.storage=sqlite:////no/such/optuna.db",
            "storage=sqlite:////no/such/optuna.db cannot be",
        ),
        ("hydra.sweeper.pruner=medain", "hydra.sweeper.pruner=medain: no such pruner. Accepted: median,"),
        ("hydra.sweeper.sampler=tpee", "hydra.sweeper.sampler=tpee: no such sampler. Accepted: tpe,"),
        (
            "model.net.dropot=interval(0.0, 0.5)",
            "does not fit the config: Could not override 'model.net.dropot'",
        ),
        ("model.net.dropot=interval(0.0, 0.5)", "Search the keys this config has: edit the space"),
        ("model/net=choice(mlp, resnet)", "Could not find 'model/net/resnet'"),
        ("hydra.sweeper.n_trials=0", "hydra.sweeper.n_trials=0: accepted: a positive integer."),
        ("hydra.sweeper.n_trials=abc", "hydra.sweeper.n_trials='abc': accepted: a positive integer."),
        ("hydra.sweeper.n_jobs=0", "hydra.sweeper.n_jobs=0: accepted: a positive integer."),
    ],
    ids=["storage", "pruner", "sampler", "key", "key_hint", "option", "trials", "trials_text", "jobs"],
)
def test_bad_setting_is_named_before_any_trial_starts(override: str, message: str, tmp_path: Path) -> None:
    result = run_script("train.py", *search("bad", 2, override), cwd=tmp_path)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "logs").exists()  # no trial, not even a study


def opened(url: str) -> str:
    try:
        open_storage(url)
        return "opened"
    except ConfigError as error:
        return str(error)


def test_workers_creating_a_new_database_at_once_all_open_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"  # each creates its tables: without retrying, some fail
    # spawn: a fork of this process, whose earlier tests left threads running, can deadlock.
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert pool.map_async(opened, [url] * 4).get(timeout=120) == ["opened"] * 4


def test_the_best_trial_s_config_composes_with_a_group_after_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # debug=limit among a trial's overrides came between override entries: Hydra refused the file
    # ("Overrides must be at the end of the defaults list").
    from conftest import CONFIG_MODULE
    from hydra import compose, initialize_config_module

    from {{ cookiecutter.package_name }}.utils.optuna_results import experiment

    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        choices = list(compose("train", return_hydra_config=True).hydra.runtime.choices)
    text = experiment(["logger=csv", "debug=limit", "model/net=mlp", "seed=3"], choices)
    (folder := tmp_path / "configs" / "experiment").mkdir(parents=True)
    (folder / "t_best.yaml").write_text(f"# @package _global_\n{text}")
    monkeypatch.setenv("PROJECT_ROOT", str(tmp_path))
    cfg = compose_config("train", tmp_path / "run", ["experiment=t_best"])
    net = cfg.model.net._target_.rsplit(".", 1)[-1]
    assert (cfg.seed, cfg.trainer.limit_train_batches, net) == (3, 3, "MLP")


def test_search_space_takes_hydras_sweep_grammar_and_names_what_it_cannot_search() -> None:
    sweeps = [
        "a=tag(log, interval(0.001, 0.1))",
        "b=int(interval(1, 5))",
        "c=range(0, 10, 5)",
        "d=choice(x, y)",
    ]
    space, fixed = search_space([*sweeps, "e=1"])
    assert space == {
        "a": optuna.distributions.FloatDistribution(0.001, 0.1, log=True),
        "b": optuna.distributions.IntDistribution(1, 5),
        "c": optuna.distributions.IntDistribution(0, 5, step=5),
        "d": optuna.distributions.CategoricalDistribution(["x", "y"]),
    }
    assert fixed == ["e=1"]
    assert search_space(["a=interval(0, 1)", "a=0.5"]) == ({}, ["a=0.5"])  # a later value fixes a key
    with pytest.raises(ConfigError, match=r"a=tag\(log, interval\(0.0, 1.0\)\) cannot be searched"):
        search_space(["a=tag(log, interval(0.0, 1.0))"])
    with pytest.raises(ConfigError, match="sampler: ModuleNotFoundError: No module named 'optuna.sampl"):
        make("sampler", {"_target_": "optuna.samplers.TPE"})
    # Hydra's first line ("Error in call to target") named no key; the sampler's own error does.
    with pytest.raises(ConfigError, match="unexpected keyword argument 'n_startup_trial'"):
        make("sampler", {"_target_": "optuna.samplers.TPESampler", "n_startup_trial": 3})
    # No _target_: the config itself came back, and failed in the first trial's callback.
    with pytest.raises(ConfigError, match=r"pruner=\{'n_warmup_steps': 3\}: no Optuna pruner \(_target_\?\)"):
        make("pruner", {"n_warmup_steps": 3})
    # A float range's last value, as Hydra adds it up (0.8999...), was dropped by Optuna's step check.
    assert search_space(["a=range(0, 1, 0.3)"])[0]["a"].high == 0.9
    assert isinstance(make("pruner", None), optuna.pruners.NopPruner)
