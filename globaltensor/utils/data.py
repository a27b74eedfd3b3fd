"""Datasets and loaders; a global batch is fed split over the ranks (S(0)), each rank loading
only its own rows, in an order that does not depend on the number of ranks."""
import numpy as np

from .. import random as _random


class Dataset:
    """Anything with __len__ and __getitem__ returning arrays (or tuples of arrays)."""

    def __len__(self):
        raise NotImplementedError

    def __getitem__(self, index):
        raise NotImplementedError


class TensorDataset(Dataset):
    """Rows of equally long arrays or tensors."""

    def __init__(self, *arrays):
        self.arrays = [np.asarray(a.numpy() if hasattr(a, "numpy") else a) for a in arrays]
        if len({len(a) for a in self.arrays}) != 1:
            raise ValueError("TensorDataset needs arrays of the same length")

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, index):
        return tuple(a[index] for a in self.arrays)


def _order(n, shuffle, epoch_counter):
    """The sample order of one epoch: a permutation from the sharding-invariant generator."""
    if not shuffle:
        return np.arange(n)
    keys = np.empty(n, np.float64)
    _random.fill(keys, _random.UNIFORM, (n,), (0,), epoch_counter)
    return np.argsort(keys, kind="stable")


class DataLoader:
    """Batches of a dataset. With placement and sbp (split(0) on the batch axis), every rank
    reads only the rows of its piece and each batch comes as global tensors whose value is
    the same as a one-process run's batch; the shuffle order is the same on every rank."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, placement=None, sbp=None):
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.placement, self.sbp = placement, sbp

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        from ..tensor import Tensor
        order = _order(len(self.dataset), self.shuffle, _random.next_counter())
        for b in range(len(self)):
            rows = order[b * self.batch_size:(b + 1) * self.batch_size]
            if self.placement is None:
                yield _stack([self.dataset[int(i)] for i in rows], lambda a: Tensor(a))
                continue
            from ..env import get_rank
            from ..layout import local_box
            from ..sbp import normalize
            sbp = normalize(self.sbp, self.placement.ndim)
            coord = self.placement.mesh_coord(get_rank())
            lo, hi = local_box((len(rows),), self.placement.hierarchy, tuple(s for s in sbp), coord)[0] \
                if coord is not None else (0, 0)
            mine = [self.dataset[int(i)] for i in rows[lo:hi]]
            sample = self.dataset[int(rows[0])]
            yield _stack(mine, lambda a, n=len(rows): _global(a, n, self.placement, sbp), sample)


def _stack(items, wrap, sample=None):
    sample = items[0] if items else sample
    if isinstance(sample, tuple):
        return tuple(wrap(np.stack([it[j] for it in items]) if items else np.empty((0,) + np.shape(sample[j]),
                                                                                    np.asarray(sample[j]).dtype))
                     for j in range(len(sample)))
    return wrap(np.stack(items) if items else np.empty((0,) + np.shape(sample), np.asarray(sample).dtype))


def _global(piece, n_rows, placement, sbp):
    """A global tensor of n_rows rows from this rank's rows (the layout's even split)."""
    from .. import dtype as _dtype
    from ..backends.devices import device
    from ..tensor import Tensor
    local = device(placement.type).from_host(np.ascontiguousarray(piece))
    return Tensor(local, (n_rows,) + piece.shape[1:], _dtype.of_array(piece), placement, sbp)


class DistributedSampler:
    """The indices of this rank's share of each epoch (rank r takes every world-th sample of the
    shared order), for users feeding local tensors."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True):
        from ..env import get_rank, get_world_size
        self.n = len(dataset)
        self.num_replicas = get_world_size() if num_replicas is None else num_replicas
        self.rank = get_rank() if rank is None else rank
        self.shuffle = shuffle

    def __iter__(self):
        order = _order(self.n, self.shuffle, _random.next_counter())
        return iter(order[self.rank::self.num_replicas].tolist())

    def __len__(self):
        return len(range(self.rank, self.n, self.num_replicas))
