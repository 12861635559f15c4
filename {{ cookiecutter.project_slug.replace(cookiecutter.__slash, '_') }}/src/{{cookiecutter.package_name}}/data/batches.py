"""Whole batches from tensors in memory, in an order that a checkpoint can restore.

A standard DataLoader calls `dataset[i]` once per sample and collates the results; for data
already held as tensors that is most of the cost of an epoch. Here the sampler yields the
indices of a whole batch and the dataset answers with one tensor indexing per batch.

The order of an epoch is a function of (seed, epoch) alone, and the loader counts the batches
it has served, so a run stopped in the middle of an epoch continues with the next batch it
would have seen (Lightning saves `state_dict()` of a loader that has one, and restores it).
"""

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler


class TensorBatches(Dataset):
    """Tensors of equal length, indexed by a tensor of indices: `dataset[index]` is a whole batch."""

    def __init__(self, *tensors: Tensor) -> None:
        if len({len(t) for t in tensors}) != 1:
            raise ValueError(f"tensors of different lengths: {[len(t) for t in tensors]}")
        self.tensors = tensors

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, index: Tensor) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)


class BatchIndexSampler(Sampler[Tensor]):
    """Yields one index tensor per batch: this rank's share of a permutation made from (seed, epoch).

    Under DDP every rank gets the same number of batches: like torch's DistributedSampler,
    the order is padded by repeating its start.
    """

    def __init__(
        self,
        size: int,
        batch_size: int,
        shuffle: bool,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        self.size = size
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.num_samples = math.ceil(size / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.start = 0  # batches of this epoch to skip, once: set when a checkpoint is restored

    def set_epoch(self, epoch: int) -> None:
        """Lightning calls this at the start of every epoch."""
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(self.num_samples / self.batch_size)

    def order(self) -> Tensor:
        """This rank's indices for the current epoch, in order."""
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.size, generator=generator)
        else:
            order = torch.arange(self.size)
        if self.total_size > self.size:
            order = torch.cat([order, order[: self.total_size - self.size]])
        return order[self.rank : self.total_size : self.num_replicas]

    def __iter__(self) -> Iterator[Tensor]:
        order, start, self.start = self.order(), self.start, 0
        for batch in range(start, len(self)):
            yield order[batch * self.batch_size : (batch + 1) * self.batch_size]


class BatchLoader:
    """Whole batches through a DataLoader, which can save and restore its place in an epoch.

    Workers, pinned memory and persistent workers work as in any DataLoader. It is not a
    DataLoader itself, so Lightning uses it as it is: it never swaps its sampler (for DDP, or
    for `overfit_batches`, where the data module turns shuffling off instead).
    """

    def __init__(self, dataset: TensorBatches, sampler: BatchIndexSampler, **loader_options: Any) -> None:
        self.sampler = sampler
        # batch_size=None: the sampler's index tensors select whole batches. A private
        # generator: iterating never draws from the global random state, so a run restored
        # from a checkpoint draws the same random numbers as one never stopped.
        self.loader = DataLoader(
            dataset, sampler=sampler, batch_size=None, generator=torch.Generator(), **loader_options
        )
        self.served = 0  # batches of the current epoch handed out so far

    # What Lightning looks for in a loader to tell whether it shuffles.
    batch_sampler = None

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[Any]:
        self.served = self.sampler.start
        for batch in self.loader:
            self.served += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        return {"seed": self.sampler.seed, "epoch": self.sampler.epoch, "served": self.served}

    def load_state_dict(self, state: dict[str, int]) -> None:
        sampler = self.sampler
        sampler.seed = state["seed"]
        if state["served"] >= len(sampler):  # saved at the end of an epoch: the next one starts
            sampler.set_epoch(state["epoch"] + 1)
            sampler.start = 0
        else:
            sampler.set_epoch(state["epoch"])
            sampler.start = state["served"]
