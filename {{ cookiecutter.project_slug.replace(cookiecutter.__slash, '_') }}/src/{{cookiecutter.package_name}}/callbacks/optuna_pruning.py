"""Optuna pruning in `-m hparams_search=optuna`: report after each validation, stop a trial that falls behind.

optuna-integration's callback needs the Trial object of the process that asked for it; a trial here is a
job of its own, perhaps on another machine, so it reaches its study through the storage. A pruned run
ends like a finished one (metrics.json written; no trial is tested), with pruned.json saying when it stopped.
"""

import logging
from pathlib import Path
from typing import Any

import lightning as L

from {{ cookiecutter.package_name }}.utils.runs import write_json

log = logging.getLogger(__name__)


class OptunaPruning(L.Callback):
    """Report `monitor` to trial number `trial` of the study after each validation, with the epoch as step."""

    def __init__(
        self, monitor: str, dirpath: str, storage: str | None, study_name: str | None, trial: int | None
    ) -> None:
        self.monitor, self.dirpath, self.number = monitor, Path(dirpath), trial
        self.storage, self.study_name = storage, study_name
        self.trial: Any = None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.number is None or not trainer.is_global_zero:
            return
        import optuna

        from {{ cookiecutter.package_name }}.utils.optuna_settings import make, open_storage

        storage = open_storage(self.storage)
        study = optuna.load_study(study_name=self.study_name, storage=storage)
        study.pruner = make("pruner", study.user_attrs.get("pruner"))  # the sweeper's; storages keep none
        study_id = storage.get_study_id_from_name(self.study_name)
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, self.number)
        if storage.get_trial(trial_id).state.is_finished():  # the run of a finished trial, resumed
            log.info(f"Trial {self.number} of study {self.study_name} has finished: not reporting to it.")
        else:
            self.trial = optuna.trial.Trial(study, trial_id)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.monitor)
        if trainer.sanity_checking or self.number is None:
            return
        prune = False
        if self.trial is not None and value is None:  # a typo in optimized_metric, or a test metric
            logged = ", ".join(sorted(trainer.callback_metrics))
            log.warning(f"{self.monitor} is not among the validation's metrics ({logged}): no pruning.")
            self.trial = None  # said once; a trial that returns no value fails
        if self.trial is not None and value is not None:
            from optuna.exceptions import UpdateFinishedTrialError

            try:
                self.trial.report(float(value), trainer.current_epoch)
                prune = self.trial.should_prune()
            except UpdateFinishedTrialError:  # another worker failed it: its heartbeat came late
                log.warning(f"Trial {self.number} has ended in its study (failed?): it trains on, unpruned.")
                self.trial = None
        if trainer.strategy.broadcast(prune):  # every rank stops
            trainer.should_stop = True
        if prune:  # the sweeper reads it back, to tell the study
            self.trial.set_user_attr("pruned_epoch", trainer.current_epoch)
            marker = {"trial": self.number, "epoch": trainer.current_epoch, "step": trainer.global_step}
            write_json(self.dirpath / "pruned.json", {**marker, self.monitor: float(value)})
            log.info(f"Optuna pruned trial {self.number} at epoch {trainer.current_epoch}: stopping.")
