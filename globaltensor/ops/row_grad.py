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
    """(unique rows ascending, summed values) of parts [(rows, values)], each row's sum made with
    the dense gradient's additions (Paddle's MergeAdd): each part's repeats summed in order from 0
    (np.add.at into zeros, as index_add), then the parts' sums added in part order."""
    row_shape = tuple(row_shape)
    if not parts:
        return np.zeros(0, np.int64), np.zeros((0,) + row_shape, dtype)
    rows = np.concatenate([np.asarray(r).reshape(-1) for r, _ in parts])
    values = np.concatenate([np.asarray(v).reshape((-1,) + row_shape) for _, v in parts])
    if len(rows) == 0:
        return rows.astype(np.int64), values
    part = np.repeat(np.arange(len(parts)), [np.asarray(r).size for r, _ in parts])
    order = _stable_order(rows)  # by row, then part, then position (the concatenation's order)
    ordered, in_part = np.take(rows, order), np.take(part, order)
    new_group = _changes(ordered) | _changes(in_part)
    group_sums, starts = _sequential_sums(np.take(values, order, axis=0), new_group)
    group_rows = np.take(ordered, starts)
    totals, row_starts = _sequential_sums(group_sums, _changes(group_rows))
    return np.take(group_rows, row_starts), totals


def _changes(a):
    """Where a sorted array starts a new run (True at 0)."""
    first = np.empty(len(a), bool)
    first[0] = True
    np.not_equal(a[1:], a[:-1], out=first[1:])
    return first


def _sequential_sums(values, first):
    """(each run's sum from 0 in order, the runs' start positions): np.add.at's additions without its
    per-element loop, the k-th value of every run added in the k-th vectorized pass."""
    starts = np.flatnonzero(first)
    total = np.take(values, starts, axis=0) + 0.0  # 0 + v: add.at's first addition (-0.0 -> 0.0)
    if len(starts) < len(values):
        group = np.cumsum(first) - 1
        rank = np.arange(len(values)) - np.take(starts, group)
        for k in range(1, int(rank.max()) + 1):
            at = np.flatnonzero(rank == k)
            total[np.take(group, at)] += np.take(values, at, axis=0)  # one value per run: no repeated position
    return total, starts


def _stable_order(rows):
    """argsort(rows, kind="stable"): as a quicksort of rows * n + position where that fits in int64
    (the keys are unique, so the order is the stable one; several times faster)."""
    n = len(rows)
    low, high = int(rows.min()), int(rows.max())
    if low >= 0 and high < (2 ** 62) // n:
        return np.argsort(rows * n + np.arange(n))
    return np.argsort(rows, kind="stable")
