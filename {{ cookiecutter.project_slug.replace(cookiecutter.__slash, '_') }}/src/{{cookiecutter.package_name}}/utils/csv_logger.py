"""Lightning's CSVLogger, except that a resumed run appends to its metrics.csv instead of deleting it."""

import csv
from typing import Any

from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter


class AppendingWriter(ExperimentWriter):
    def _check_log_dir_exists(self) -> None:
        # Lightning's writer deletes an existing metrics.csv here; keep it and its columns.
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as file:
                self.metrics_keys = list(csv.DictReader(file).fieldnames or [])


class ResumableCSVLogger(CSVLogger):
    @property
    def experiment(self) -> Any:
        if self._experiment is None and self.log_dir:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = AppendingWriter(log_dir=self.log_dir)
        return super().experiment
