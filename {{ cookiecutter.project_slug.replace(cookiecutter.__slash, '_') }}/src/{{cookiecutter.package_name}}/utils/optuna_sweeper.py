"""Optuna (>= 4) searches for `python train.py -m hparams_search=optuna`: hydra-optuna-sweeper pins optuna<3.

Each trial is one job of the multirun, in <sweep dir>/<trial number>/, launched n_jobs at a time
through the configured launcher (SLURM's runs a batch in parallel). The study lives in `storage`:
workers started with the same storage and study_name share it, and a stopped search continues with
the same command, running only the trials still missing. Workers beat a heartbeat into their running
trials, and a trial silent for two of its worker's intervals (the worker died) is marked failed: Optuna's
own heartbeat covers database storages only, not journal files. Hydra takes sweepers only from the
hydra_plugins namespace: src/hydra_plugins/ names this one there.
"""

import contextlib
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

from {{ cookiecutter.package_name }}.utils.optuna_results import report
from {{ cookiecutter.package_name }}.utils.optuna_settings import make, open_storage, search_space
from {{ cookiecutter.package_name }}.utils.runs import EXIT_CODE, MAY_CHANGE, ConfigError, received

log = logging.getLogger(__name__)
# The callback through which a trial reports its metric (hparams_search/optuna.yaml).
PRUNING = "callbacks.optuna_pruning"
# What a study's workers and continuations may set differently: what a resume may (the logger too), but not
# the length (it changes the trials) nor data.root or data.path (other data's trials joined the study).
MAY_DIFFER = tuple(key for key in MAY_CHANGE if not key.startswith(("trainer.max_", "data.")))


@dataclass
class OptunaSweeper(Sweeper):
    """Hydra's Sweeper over an Optuna study, by ask-and-tell; the keys: configs/hydra/sweeper/optuna.yaml."""

    storage: str | None
    study_name: str
    direction: str
    n_trials: int
    n_jobs: int
    sampler: Any
    pruner: Any
    heartbeat_interval: float
    params: DictConfig | None

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self.config, self.loader = config, hydra_context.config_loader
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> None:
        import optuna
        from optuna.trial import TrialState

        if self.direction not in ("maximize", "minimize"):
            raise ConfigError(f"hydra.sweeper.direction={self.direction}: use maximize or minimize.")
        for key, kinds in (("n_trials", (int,)), ("n_jobs", (int,)), ("heartbeat_interval", (int, float))):
            if type(value := getattr(self, key)) not in kinds or value <= 0:  # 0 jobs: it waited forever
                number = "number" if float in kinds else "integer"
                raise ConfigError(f"hydra.sweeper.{key}={value!r}: accepted: a positive {number}.")
        space, fixed = search_space([*(f"{k}={v}" for k, v in (self.params or {}).items()), *arguments])
        sampler, pruner = make("sampler", self.sampler), make("pruner", self.pruner)
        self._check(space, fixed)
        url = self.storage or str(Path(self.config.hydra.sweep.dir) / "optuna.journal")
        url = url if "://" in url else str(Path(url).absolute())  # a journal file, for jobs started elsewhere
        study = optuna.create_study(
            storage=open_storage(url),
            sampler=sampler,
            pruner=pruner,
            study_name=self.study_name,
            direction=self.direction,
            load_if_exists=True,
        )
        metric = OmegaConf.select(self.config, "optimized_metric", default=None)
        kept = sorted(o for o in fixed if not o.split("=", 1)[0].lstrip("+~").startswith(MAY_DIFFER))
        searched = {key: repr(distribution) for key, distribution in sorted(space.items())}
        if known := study.get_trials(deepcopy=False):
            sampler.reseed_rng()  # seeded, it would draw the study's first points again
        for trial in known:  # failed ones too: Optuna's storage keeps a parameter's kind, a choice's options
            for key, old in [(key, old) for key, old in trial.distributions.items() if key in space]:
                try:  # the storage's own rule (else its ValueError, and a trial left running each time)
                    optuna.distributions.check_distribution_compatibility(old, space[key])
                except ValueError as error:
                    raise ConfigError(
                        f"Study {study.study_name} in {url}: its trial {trial.number} searched {key} as "
                        f"{old}, now {space[key]}: Optuna refuses it ({error}). Search {key} as before, or "
                        "start another study (hydra.sweeper.study_name=<new name>)."
                    ) from None
        binding = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)  # not failed ones: a typo's
        bound = any(trial.state in binding for trial in known)  # failed trials alone: another metric may do
        was = (study.user_attrs.get("metric", metric) if bound else metric, study.direction.name.lower())
        if was != (metric, self.direction):  # Optuna keeps a study's direction, silently (failed trials' too)
            raise ConfigError(
                f"Study {study.study_name} in {url} is to {was[1]} {was[0]}, not to {self.direction} "
                f"{metric}: continue it with optimized_metric={was[0]} hydra.sweeper.direction={was[1]}, "
                "or start another (hydra.sweeper.study_name=<new name>)."
            )
        if bound:
            if (before := study.user_attrs.get("fixed", kept)) != kept:  # trials of two configs: no search
                new, gone = [o for o in kept if o not in before], [o for o in before if o not in kept]
                raise ConfigError(
                    f"Study {study.study_name} in {url} searches another config: this command adds "
                    f"{' '.join(new) or 'nothing'} and leaves out {' '.join(gone) or 'nothing'}. Continue it "
                    "with its overrides (hardware, logger and paths.data_dir may differ), or start another "
                    "study (hydra.sweeper.study_name=<new name>)."
                )
            if (before := study.user_attrs.get("space", searched)) != searched:  # the sampler would mix both
                changes = [
                    f"{key}: {before.get(key, 'not searched')}, now {searched.get(key, 'not searched')}"
                    for key in sorted({*before, *searched})
                    if before.get(key) != searched.get(key)
                ]
                raise ConfigError(
                    f"Study {study.study_name} in {url} searches another space ({'; '.join(changes)}). "
                    "Continue it with its space, or start another (hydra.sweeper.study_name=<new name>)."
                )
        study.set_user_attr("metric", metric)
        study.set_user_attr("fixed", kept)
        study.set_user_attr("space", searched)
        # Storages keep no pruner: the trials' callbacks take the sweeper's from here.
        spec = OmegaConf.to_container(self.pruner) if OmegaConf.is_config(self.pruner) else self.pruner
        study.set_user_attr("pruner", spec)
        log.info(f"Study {study.study_name} in {url}: {self.n_trials} trials over {', '.join(space)}.")
        if (done := sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in known)) >= self.n_trials:
            log.warning(f"It has {done} ended trials: none to run (raise hydra.sweeper.n_trials to go on).")
        for kind, does in (("sampler", "draws all at random"), ("pruner", "prunes none")):  # silently
            n = OmegaConf.select(self.config, f"hydra.sweeper.{kind}.n_startup_trials") or 0
            if n >= self.n_trials:
                log.warning(f"hydra.sweeper.{kind}.n_startup_trials={n}, n_trials={self.n_trials}: it {does}")
        (sweep := Path(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)  # as Hydra's sweeper:
        OmegaConf.save(self.config, sweep / "multirun.yaml")  # the command, for a stopped trial's message
        while trials := self._ask(study, space):
            self._run(study, trials, fixed, url)
        report(study, self.config)

    def _check(self, space: dict[str, Any], fixed: list[str]) -> None:
        """Compose a trial's config with each option of the space: a key or option not there fails now."""
        for i in range(max([len(getattr(d, "choices", ())) for d in space.values()] + [1])):
            point = [
                f"{k}={d.choices[min(i, len(d.choices) - 1)] if hasattr(d, 'choices') else d.low}"
                for k, d in space.items()
            ]
            try:
                self.loader.load_sweep_config(self.config, [*fixed, *point])
            except Exception as error:
                where = "configs/hparams_search/optuna.yaml, or a copy"  # it names the shipped nets' keys
                raise ConfigError(
                    f"The search space (hydra.sweeper.params) does not fit the config: {error}\n"
                    f"Search the keys this config has: edit the space ({where})."
                ) from None

    def _ask(self, study: Any, space: dict[str, Any]) -> list[Any]:
        """The next batch of trials; none once the study has n_trials complete or pruned ones."""
        from optuna.trial import TrialState

        while True:
            if received:  # a stop signal between trials, or while waiting: no trial of this worker's runs
                log.warning("Search stopped: the same command continues the study.")
                raise SystemExit(EXIT_CODE)
            for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                silent = time.time() - trial.user_attrs.get("heartbeat", trial.datetime_start.timestamp())
                # [host, pid, its heartbeat_interval]: workers may beat at different intervals
                where, pid, interval = trial.user_attrs.get("worker", ("", 0, self.heartbeat_interval))
                ended = where == here() and not alive(pid)  # a worker here, killed
                if ended or silent > 2 * interval:
                    why = "has ended" if ended else f"sent no heartbeat for {silent:.0f} s"
                    log.warning(f"Trial {trial.number}: its worker {why}: failed.")
                    tell(study, trial.number, TrialState.FAIL)
            states = [t.state for t in study.get_trials(deepcopy=False)]
            done = states.count(TrialState.COMPLETE) + states.count(TrialState.PRUNED)
            running = states.count(TrialState.RUNNING)
            if done >= self.n_trials:
                return []
            if (size := min(self.n_jobs, self.n_trials - done - running)) > 0:
                return [study.ask(space) for _ in range(size)]
            log.info(f"Waiting for the {running} trials still running in other workers.")
            time.sleep(min(5, self.heartbeat_interval))  # a worker's allocation (a GPU) waits meanwhile

    def _run(self, study: Any, trials: list[Any], fixed: list[str], url: str) -> None:
        """Launch one batch of trials, then tell the study how each ended (pruned: its callback said so)."""
        from optuna.trial import TrialState

        jobs = []
        for trial in trials:
            overrides = [*fixed, *(f"{k}={v}" for k, v in trial.params.items())]
            trial.set_user_attr("overrides", overrides)  # the best one becomes an experiment config
            trial.set_user_attr("heartbeat", time.time())
            trial.set_user_attr("worker", [here(), os.getpid(), self.heartbeat_interval])  # it beats it
            jobs.append([*overrides, f"hydra.sweep.subdir={trial.number}"])
            if OmegaConf.select(self.config, PRUNING) is not None:  # which trial the run is, for its callback
                ids = {"storage": quote(url), "study_name": quote(study.study_name), "trial": trial.number}
                jobs[-1] += [f"{PRUNING}.{key}={value}" for key, value in ids.items()]
        stop = threading.Event()
        threading.Thread(target=self._beat, args=(trials, stop), daemon=True).start()
        try:
            returns = self.launcher.launch(jobs, initial_job_idx=trials[0].number)
        except BaseException:  # a stop signal or Ctrl+C: these trials end here
            for trial in trials:
                tell(study, trial, TrialState.FAIL)
            numbers = ", ".join(str(trial.number) for trial in trials)
            log.warning(
                f"Search stopped: the same command continues the study with new trials; trial {numbers}, cut"
                " short, counts as failed, not continued (resume=<its directory> would, outside the study)."
            )
            raise
        finally:
            stop.set()
        pruned = {t.number for t in study.get_trials(deepcopy=False) if "pruned_epoch" in t.user_attrs}
        metric = OmegaConf.select(self.config, "optimized_metric", default="value")
        for trial, job in zip(trials, returns, strict=True):
            value = job.return_value if job.status == JobStatus.COMPLETED else None
            number = isinstance(value, int | float) and value == value  # not NaN: Optuna stores it as failed
            state = TrialState.COMPLETE if number else TrialState.FAIL
            state = TrialState.PRUNED if trial.number in pruned else state
            tell(study, trial, state, value if state == TrialState.COMPLETE else None)
            log.info(f"Trial {trial.number} {state.name.lower()}: {metric} = {value}")
        for trial, job in zip(trials, returns, strict=True):  # a failed trial stops the search
            if job.status == JobStatus.FAILED:
                job.return_value  # noqa: B018 (raises the trial's own error)
            if not isinstance(job.return_value, int | float) and trial.number not in pruned:
                raise ConfigError(
                    f"Trial {trial.number} returned {job.return_value!r}: is {metric} in its metrics?"
                )

    def _beat(self, trials: list[Any], stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_interval):
            for trial in trials:
                with contextlib.suppress(Exception):  # finished meanwhile
                    trial.set_user_attr("heartbeat", time.time())


def tell(study: Any, trial: Any, state: Any, value: float | None = None) -> None:
    """Tell the study how a trial ended, unless it has ended already: here, or in another worker that found
    it silent, even between this worker's read of the trial and its write (Optuna then refuses the write)."""
    from optuna.exceptions import UpdateFinishedTrialError

    with contextlib.suppress(UpdateFinishedTrialError):
        study.tell(trial, value, state=state, skip_if_finished=True)


def here() -> str:
    """This machine and its process ids' namespace (a container's own, even with the host's name)."""
    with contextlib.suppress(OSError):
        return f"{socket.gethostname()} {os.stat('/proc/self/ns/pid').st_ino}"
    return socket.gethostname()


def alive(pid: int) -> bool:
    """Whether process `pid` of this machine is running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True


def quote(text: str) -> str:
    """`text` as one value of a Hydra override, whatever characters it holds."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
