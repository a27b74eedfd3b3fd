"""RowGrad: a table's gradient as the rows it touches (a sparse embedding's; Paddle's SelectedRows)."""
import numpy as np

from ..creation import zeros
from ..dtype import int64
from ._front import apply
from .concat_split import concat


class RowGrad:
    """A table's gradient as parts (rows [n] int64, values [n, dim]), repeated rows adding up: part
    k's dense gradient is index_add(zeros(shape), rows_k, values_k) and the gradient is their sum
    in order (how a table looked up several times gets its dense gradient). A sum of row gradients
    keeps the parts of both (no copy); a sum with a dense gradient is dense. `coalesced()` gives
    the touched rows and their sums, bit for bit as the dense gradient's rows, which the optimizers
    update alone (optim/row_updates.py). PyTorch's sparse gradient, Paddle's SelectedRows."""

    is_sparse = True
    is_rows = True  # what autograd and the optimizers test (duck-typed: they sit below or beside ops)
    requires_grad = False
    _node = _local = None  # no piece: zero_grad's zero_in_place calls zero_()
    _placement = None
    is_local, is_global = True, False

    def __init__(self, parts, shape, dtype):
        self.parts, self.shape, self.dtype = list(parts), tuple(shape), dtype

    @property
    def rows(self):
        """Every part's rows, concatenated (repeats kept)."""
        return concat([r.reshape(-1) for r, _ in self.parts]) if self.parts else zeros(0, dtype=int64)

    @property
    def values(self):
        return concat([v for _, v in self.parts]) if self.parts else zeros(0, self.shape[1], dtype=self.dtype)

    def coalesced(self):
        """(unique rows ascending, their summed values) as numpy arrays (the pieces of local tensors)."""
        return coalesce([(r._local, v._local) for r, v in self.parts], self.shape[1:], self.dtype.np)

    def to_dense(self):
        """The dense gradient (a tensor of the table's shape), the parts added in order."""
        out = None
        for r, v in self.parts:
            d = apply("index_add", [zeros(*self.shape, dtype=self.dtype), r.reshape(-1), v],
                      {"dim": 0, "size": self.shape[0]})
            out = d if out is None else out + d
        return zeros(*self.shape, dtype=self.dtype) if out is None else out

    def __add__(self, other):
        if other is None:
            return self
        if getattr(other, "is_rows", False):
            if tuple(other.shape) != tuple(self.shape):
                raise ValueError(f"adding row gradients of tables {tuple(self.shape)} and {tuple(other.shape)}")
            return RowGrad(self.parts + other.parts, self.shape, self.dtype)
        return self.to_dense() + other

    def __radd__(self, other):
        return self if other is None else other + self.to_dense()

    def detach(self):
        return self

    def cast(self, dtype):
        return RowGrad([(r, v.cast(dtype)) for r, v in self.parts], self.shape, dtype)

    def zero_(self):
        """No rows (a .grad zeroed in place: Paddle's clear_grad)."""
        self.parts = []
        return self

    def __repr__(self):
        return f"RowGrad(parts={len(self.parts)}, shape={self.shape}, dtype={self.dtype})"


def coalesce(parts, row_shape, dtype):
    """(unique rows ascending, summed values) of parts [(rows, values)]: each part's repeats summed
    in order (np.add.at, as index_add), then the parts added in order, so each row's sum is the
    dense gradient's bit for bit (Paddle's MergeAdd)."""
    sums = [_merge_repeats(np.asarray(rows).reshape(-1), values.reshape((-1,) + tuple(row_shape)))
            for rows, values in parts]
    if len(sums) == 1:
        return sums[0]
    if not sums:
        return np.zeros(0, np.int64), np.zeros((0,) + tuple(row_shape), dtype)
    union = np.unique(np.concatenate([u for u, _ in sums]))
    total = np.zeros((len(union),) + tuple(row_shape), dtype)
    for unique, summed in sums:
        total[np.searchsorted(union, unique)] += summed  # unique positions: one addition each
    return union, total


def _merge_repeats(rows, values):
    """(unique rows ascending, the values of each row summed in order from 0): np.add.at into zeros
    at np.unique's inverse, bit for bit, without add.at's per-element loop. A stable sort keeps each
    row's values in order; the k-th value of every row is added in the k-th vectorized pass."""
    if len(rows) == 0:
        return rows.astype(np.int64), values[:0].copy()
    order = _stable_order(rows)
    ordered = np.take(rows, order)
    first = np.empty(len(rows), bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    total = np.take(values, np.take(order, starts), axis=0) + 0.0  # 0 + v: add.at's first addition (-0.0 -> 0.0)
    if len(starts) < len(rows):
        group = np.cumsum(first) - 1
        rank = np.arange(len(rows)) - starts[group]
        for k in range(1, int(rank.max()) + 1):
            at = rank == k
            total[group[at]] += np.take(values, order[at], axis=0)  # one value per row in a pass: no repeated position
    return ordered[starts], total


def _stable_order(rows):
    """argsort(rows, kind="stable"): as a quicksort of rows * n + position where that fits in int64
    (the keys are unique, so the order is the stable one; several times faster)."""
    n = len(rows)
    low, high = int(rows.min()), int(rows.max())
    if low >= 0 and high < (2 ** 62) // n:
        return np.argsort(rows * n + np.arange(n))
    return np.argsort(rows, kind="stable")
