"""What the DataModules here share: a stratified split (or k folds) and resumable loaders."""

from collections.abc import Sequence

import lightning as L
import torch
from sklearn.model_selection import StratifiedKFold, train_test_split
from torch.utils.data import Dataset, Subset
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler


class LabelledDataModule(L.LightningDataModule):
    """Splits a dataset of (sample, label) pairs into train, val and test, and batches them.

    Subclasses implement `load`, `class_names` and `input_shape`. The split depends only on the
    fractions and `split_seed`, never on the training seed: every run and every evaluation sees
    the same test set. With `fold` set, the data outside the test set is split into `num_folds`
    stratified folds instead, and fold `fold` validates. Training batches come in a new order each
    epoch, made from `shuffle_seed` and the epoch alone; the loaders are torchdata's
    StatefulDataLoader, so a checkpoint taken in the middle of an epoch holds its place.
    """

    def __init__(
        self,
        batch_size: int = 64,
        val_fraction: float = 0.15,
        test_fraction: float = 0.15,
        split_seed: int = 0,
        shuffle_seed: int | None = 0,
        num_folds: int = 5,
        fold: int | None = None,
        num_workers: int = 0,
        pin_memory: bool | None = None,
    ) -> None:
        super().__init__()
        if not (0 < val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
            raise ValueError(
                f"data.val_fraction={val_fraction} and data.test_fraction={test_fraction}: each must be "
                "between 0 and 1, and their sum below 1 to leave training data."
            )
        if fold is not None and not 0 <= fold < num_folds:
            raise ValueError(f"data.fold={fold}: must be null or 0 to {num_folds - 1} (data.num_folds={num_folds}).")
        if batch_size < 1:
            raise ValueError(f"data.batch_size={batch_size}: must be a positive integer.")
        self.batch_size = batch_size
        self.val_fraction, self.test_fraction = val_fraction, test_fraction
        self.split_seed, self.shuffle_seed = split_seed, shuffle_seed or 0
        self.num_folds, self.fold = num_folds, fold
        self.num_workers = num_workers
        # Page-locked memory speeds up copies to a CUDA GPU, and is of no use without one.
        self.pin_memory = torch.cuda.is_available() if pin_memory is None else pin_memory
        self.splits: dict[str, Dataset] = {}

    def load(self) -> tuple[Dataset, Sequence[int]]:
        """Return the whole dataset, whose items are (sample, label), and its labels in order."""
        raise NotImplementedError

    @property
    def class_names(self) -> list[str]:
        raise NotImplementedError

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one sample, as the model receives it."""
        raise NotImplementedError

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        dataset, labels = self.load()
        rest, test = train_test_split(
            range(len(labels)), test_size=self.test_fraction, stratify=labels, random_state=self.split_seed
        )
        rest_labels = [labels[i] for i in rest]
        if self.fold is None:
            val_size = self.val_fraction / (1 - self.test_fraction)
            train, val = train_test_split(
                rest, test_size=val_size, stratify=rest_labels, random_state=self.split_seed
            )
        else:
            folds = StratifiedKFold(self.num_folds, shuffle=True, random_state=self.split_seed)
            train_at, val_at = list(folds.split(rest, rest_labels))[self.fold]
            train, val = [rest[i] for i in train_at], [rest[i] for i in val_at]
        self.splits = {name: Subset(dataset, i) for name, i in (("train", train), ("val", val), ("test", test))}

    def _loader(self, split: str, sampler: StatefulDistributedSampler | None = None) -> StatefulDataLoader:
        return StatefulDataLoader(
            self.splits[split],
            batch_size=self.batch_size,
            sampler=sampler,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            pin_memory=self.pin_memory,
            # Workers' seeds from a generator of their own: loading draws nothing from the global
            # random state (dropout's), whatever the workers do.
            generator=torch.Generator().manual_seed(self.shuffle_seed),
        )

    def train_dataloader(self) -> StatefulDataLoader:
        # Each rank its share (Lightning leaves a DistributedSampler as it is), in an order that
        # `set_epoch` (Lightning calls it) and a checkpoint's place in the epoch fully determine.
        world, rank = (self.trainer.world_size, self.trainer.global_rank) if self.trainer else (1, 0)
        shuffled = StatefulDistributedSampler(self.splits["train"], world, rank, seed=self.shuffle_seed)
        return self._loader("train", shuffled)

    def val_dataloader(self) -> StatefulDataLoader:
        return self._loader("val")

    def test_dataloader(self) -> StatefulDataLoader:
        return self._loader("test")
