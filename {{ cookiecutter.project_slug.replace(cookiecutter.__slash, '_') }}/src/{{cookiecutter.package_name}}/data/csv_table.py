"""A table in a CSV file: numeric feature columns and one label column."""

import csv
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import Dataset, TensorDataset

from {{ cookiecutter.package_name }}.data.labelled import LabelledDataModule


class CSVDataModule(LabelledDataModule):
    """Rows of `path` with a header: the `target` column holds the class (any text or number),
    the `features` columns (null: all the others) numbers."""

    def __init__(
        self, path: str, target: str, features: Sequence[str] | None = None, **options: int | float
    ) -> None:
        super().__init__(**options)
        self.path, self.target, self.chosen = Path(path).expanduser(), target, features

    @cached_property
    def rows(self) -> list[dict[str, str]]:
        if not self.path.is_file():
            raise ValueError(f"data.path={str(self.path)!r}: no such file. Pass a CSV file with a header row.")
        with self.path.open(newline="") as file:
            reader = csv.DictReader(file)
            rows, columns = list(reader), reader.fieldnames or []
        missing = [c for c in [self.target, *(self.chosen or [])] if c not in columns]
        if missing:
            raise ValueError(f"{self.path} has no column {', '.join(map(repr, missing))}: its columns are {columns}.")
        return rows

    @property
    def features(self) -> list[str]:
        return list(self.chosen or [c for c in self.rows[0] if c != self.target])

    @cached_property
    def class_names(self) -> list[str]:
        names = {row[self.target] for row in self.rows}
        try:
            return sorted(names, key=float)  # 2 before 10
        except ValueError:
            return sorted(names)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (len(self.features),)

    def transform(self, row: Mapping[str, str]) -> Tensor:
        """One row (column name to text) as a model input: training and predict.py alike."""
        try:
            return torch.tensor([float(row[name]) for name in self.features])
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"a row does not fit: the numeric columns {self.features} are expected ({error}).") from error

    def load(self) -> tuple[Dataset, Sequence[int]]:
        index = {name: i for i, name in enumerate(self.class_names)}
        labels = [index[row[self.target]] for row in self.rows]
        inputs = torch.stack([self.transform(row) for row in self.rows])
        return TensorDataset(inputs, torch.tensor(labels)), labels
