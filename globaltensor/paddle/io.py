"""paddle.io: Dataset, DataLoader (Paddle's arguments; each batch a list of local tensors),
DistributedBatchSampler (each rank its share of every epoch's batches)."""
import math

import numpy as np

from .. import random as _random
from ..env import get_rank, get_world_size
from ..tensor import Tensor
from ..utils.data import Dataset, _order

__all__ = ["Dataset", "DataLoader", "BatchSampler", "DistributedBatchSampler"]


class BatchSampler:
    """Lists of indices, batch_size each (the last one shorter unless drop_last)."""

    def __init__(self, dataset=None, sampler=None, shuffle=False, batch_size=1, drop_last=False):
        self.dataset, self.shuffle, self.batch_size, self.drop_last = dataset, shuffle, batch_size, drop_last
        self.sampler = sampler

    def _indices(self):
        if self.sampler is not None:
            return [int(i) for i in self.sampler]
        return [int(i) for i in _order(len(self.dataset), self.shuffle, _random.next_counter())]

    def __iter__(self):
        idx = self._indices()
        n = len(idx) // self.batch_size if self.drop_last else math.ceil(len(idx) / self.batch_size)
        for b in range(n):
            yield idx[b * self.batch_size:(b + 1) * self.batch_size]

    def __len__(self):
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


class DistributedBatchSampler(BatchSampler):
    """Rank r takes indices r, r + k, ... of the epoch's order (padded to a multiple of k with the
    first ones, as Paddle), then batches them; set_epoch(e) reshuffles alike on every rank."""

    def __init__(self, dataset, batch_size, num_replicas=None, rank=None, shuffle=False, drop_last=False):
        super().__init__(dataset, None, shuffle, batch_size, drop_last)
        self.nranks = num_replicas if num_replicas is not None else get_world_size()
        self.local_rank = rank if rank is not None else get_rank()
        self.epoch = 0
        self.num_samples = math.ceil(len(dataset) / self.nranks)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _indices(self):
        if self.shuffle:
            order = np.random.default_rng(self.epoch).permutation(len(self.dataset))  # the same on every rank
        else:
            order = np.arange(len(self.dataset))
        total = self.num_samples * self.nranks
        order = np.concatenate([order, order[:total - len(order)]])
        return [int(i) for i in order[self.local_rank:total:self.nranks]]

    def __len__(self):
        return self.num_samples // self.batch_size if self.drop_last else math.ceil(self.num_samples / self.batch_size)


class DataLoader:
    """Batches of a dataset as lists of local tensors (one per field of a sample), in the order of
    batch_sampler, or of a BatchSampler(batch_size, shuffle, drop_last)."""

    def __init__(self, dataset, feed_list=None, places=None, return_list=True, batch_sampler=None, batch_size=1,
                 shuffle=False, drop_last=False, collate_fn=None, num_workers=0, use_buffer_reader=True,
                 prefetch_factor=2, use_shared_memory=True, timeout=0, worker_init_fn=None, persistent_workers=False):
        self.dataset = dataset
        self.batch_sampler = batch_sampler if batch_sampler is not None else \
            BatchSampler(dataset, shuffle=shuffle, batch_size=batch_size, drop_last=drop_last)
        self.collate_fn = collate_fn

    def __len__(self):
        return len(self.batch_sampler)

    def __iter__(self):
        for indices in self.batch_sampler:
            samples = [self.dataset[i] for i in indices]
            if self.collate_fn is not None:
                yield self.collate_fn(samples)
                continue
            yield _collate(samples)

    def __call__(self):
        return iter(self)


def _collate(samples):
    first = samples[0]
    if isinstance(first, (tuple, list)):
        return [_stack([s[j] for s in samples]) for j in range(len(first))]
    return _stack(samples)


def _stack(values):
    if isinstance(values[0], Tensor):
        values = [v.numpy() for v in values]
    return Tensor(np.ascontiguousarray(np.stack([np.asarray(v) for v in values])))
