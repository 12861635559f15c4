"""What the DataModules here share: a stratified split (or k folds) and resumable loaders."""

import signal

import lightning as L
import torch
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
from sklearn.model_selection import StratifiedKFold, train_test_split
from torch.utils.data import Subset
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler


def start_worker(worker_id: int) -> None:
    """A loader worker's start: seeded as Lightning seeds workers where a loader has no worker_init_fn."""
    L.fabric.utilities.seed.pl_worker_init_function(worker_id)
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:  # a run's, which stops at a safe point, and
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):  # its workers as it ends: stop signals
            signal.signal(signum, signal.SIG_IGN)  # reach all its processes, and torch's die of SIGTERM


class LabelledDataModule(L.LightningDataModule):
    """Splits (input, label) pairs into train, val and test by the samples, fractions and seed (`fold`: one of
    `num_folds` stratified folds of the rest); subclasses implement load(), class_names and input_shape."""

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
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)
        if not (0 < val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
            why = "each must be between 0 and 1, their sum below 1 (to leave training data)"
            raise ValueError(f"data.val_fraction={val_fraction}, data.test_fraction={test_fraction}: {why}.")
        for key, least in (("batch_size", 1), ("num_workers", 0), ("num_folds", 2)):  # else torch's
            if not isinstance(value := self.hparams[key], int) or value < least:  # or sklearn's words, no key
                raise ValueError(f"data.{key}={value}: accepted: an integer, at least {least}.")
        if fold is not None and not (type(fold) is int and 0 <= fold < num_folds):
            raise ValueError(f"data.fold={fold!r}: must be null or 0 to {num_folds - 1} (data.num_folds).")
        self.batch_size, self.splits = batch_size, {}

    def setup(self, stage: str | None = None) -> None:
        if self.splits or stage == "predict":  # predict.py makes its inputs with `transform`: nothing to read
            return
        dataset, labels = self.load()  # stratified by name: sklearn's errors name a class with too few
        split = {"stratify": [self.class_names[y] for y in labels], "random_state": self.hparams.split_seed}
        rest, test = train_test_split(range(len(labels)), test_size=self.hparams.test_fraction, **split)
        split["stratify"] = [split["stratify"][i] for i in rest]
        if self.hparams.fold is None:
            size = self.hparams.val_fraction / (1 - self.hparams.test_fraction)
            train, val = train_test_split(rest, test_size=size, **split)
        else:
            folds = StratifiedKFold(self.hparams.num_folds, shuffle=True, random_state=split["random_state"])
            train_at, val_at = list(folds.split(rest, split["stratify"]))[self.hparams.fold]
            train, val = [rest[i] for i in train_at], [rest[i] for i in val_at]
        self.splits = dict(train=Subset(dataset, train), val=Subset(dataset, val), test=Subset(dataset, test))

    def _loader(self, split: str, sampling: type, **options) -> StatefulDataLoader:
        # Each rank its share (Lightning keeps these samplers); the epoch set here too: workers fetch first
        n, rank, loop = (t.world_size, t.global_rank, t.fit_loop) if (t := self.trainer) else (1, 0, None)
        epoch = loop.epoch_progress.current.processed if loop else 0  # after an epoch's end: the next one
        (sampler := sampling(self.splits[split], n, rank, **options)).set_epoch(epoch)
        return StatefulDataLoader(
            self.splits[split],
            batch_size=self.batch_size,
            sampler=sampler,
            drop_last=split == "train" and len(sampler) % self.batch_size == 1,  # BatchNorm trains on 2+
            num_workers=self.hparams.num_workers,
            worker_init_fn=start_worker,
            persistent_workers=self.hparams.num_workers > 0,
            pin_memory=torch.cuda.is_available(),  # page-locked memory: quicker copies to a CUDA GPU
            generator=torch.Generator().manual_seed(self.hparams.shuffle_seed or 0),  # not dropout's seeds
        )

    def train_dataloader(self) -> StatefulDataLoader:
        return self._loader("train", StatefulDistributedSampler, seed=self.hparams.shuffle_seed or 0)

    def val_dataloader(self) -> StatefulDataLoader:
        return self._loader("val", UnrepeatedDistributedSampler, shuffle=False)

    def test_dataloader(self) -> StatefulDataLoader:
        return self._loader("test", UnrepeatedDistributedSampler, shuffle=False)
