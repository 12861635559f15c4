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
    """Rows of `path`, with a header: the `target` column holds the class (text or a number), the
    `features` columns (null: all the others, in the file's order: a series keeps its order) numbers."""

    def __init__(self, path: str, target: str, features: Sequence[str] | None = None, **options) -> None:
        super().__init__(**options)
        self.path, self.target, self.chosen = Path(path).expanduser().absolute(), target, features

    @cached_property
    def rows(self) -> dict[int, dict[str, str]]:  # by the file's line (blank ones, which csv skips, count)
        if not self.path.is_file():
            raise ValueError(f"data.path={str(self.path)!r}: no such file. Pass a CSV file with a header.")
        with self.path.open(newline="", encoding="utf-8-sig") as file:  # Excel's BOM too
            reader = csv.DictReader(file)
            rows, columns = {reader.line_num: row for row in reader}, reader.fieldnames or []  # noqa: B035
        if missing := [c for c in [self.target, *(self.chosen or [])] if c not in columns]:
            raise ValueError(f"{self.path} has no column {', '.join(map(repr, missing))}: it has {columns}.")
        if twice := sorted({c for c in columns if columns.count(c) > 1}):  # csv keeps the last one's values
            raise ValueError(f"{self.path}: its header names {twice} more than once: rename all but one.")
        if not rows:
            raise ValueError(f"data.path={str(self.path)!r} has a header and no rows.")
        if blank := [line for line, row in rows.items() if not (row[self.target] or "").strip()]:
            raise ValueError(f"data.path={str(self.path)!r}: no {self.target} on lines {blank[:5]}.")
        if extra := [line for line, row in rows.items() if any(v.strip() for v in row.get(None, []))]:
            raise ValueError(f"data.path={str(self.path)!r}: more values than columns on lines {extra[:5]}.")
        return rows

    @cached_property
    def features(self) -> list[str]:
        return list(self.chosen or (c for c in self.rows[min(self.rows)] if c not in (self.target, None)))

    @cached_property
    def class_names(self) -> list[str]:
        return sorted({row[self.target].strip() for row in self.rows.values()})  # " a", "a ", "a": one, a

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (len(self.features),)

    def transform(self, row: Mapping[str, str], where: str = "a row") -> Tensor:  # in training and predict.py
        try:
            return torch.tensor([float(row[name]) for name in self.features])
        except (KeyError, TypeError, ValueError):
            given = {name: row.get(name, "<no such column>") for name in self.features}  # the odd ones show
            raise ValueError(f"{where} does not fit: {given}; data.features: numbers, none blank") from None

    def load(self) -> tuple[Dataset, Sequence[int]]:  # all rows at start-up: one that does not fit stops it
        inputs = torch.stack([self.transform(row, f"{self.path}:{line}") for line, row in self.rows.items()])
        if bad := [line for line, ok in zip(self.rows, inputs.isfinite().all(dim=1), strict=True) if not ok]:
            raise ValueError(f"data.path={str(self.path)!r}: NaN or infinite values on lines {bad[:5]}.")
        labels = [self.class_names.index(row[self.target].strip()) for row in self.rows.values()]
        return TensorDataset(inputs, torch.tensor(labels)), labels
