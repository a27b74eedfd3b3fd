"""Micro-batches: the batch cut along dim 0 without moving pieces, and hollow tensors (the
metadata of a global tensor on a rank that holds no piece of it)."""
import functools
import itertools

import numpy as np

from .. import layout, ops
from ..backends.devices import device
from ..env import get_rank
from ..ops._front import constant
from ..tensor import Tensor


def hollow(shape, dtype, placement, sbp):
    """A global tensor this rank holds no piece of: metadata only."""
    piece = device(placement.type).empty((0,) * max(1, len(shape)), dtype.np)
    return Tensor(piece, shape, dtype, placement, sbp)


def meta(t):
    """(global shape, dtype, placement, sbp): what a rank knows of a tensor it holds no piece of."""
    return (tuple(t.shape), t.dtype, t.placement, t.sbp)


@functools.lru_cache(maxsize=1024)
def _dim0_shards(shape, placement, sbp):
    """The distinct row ranges (dim 0) that the ranks of the placement hold, in order."""
    return sorted({layout.local_box(shape, placement.hierarchy, sbp, placement.mesh_coord(r))[0]
                   for r in placement.rank_list()})


class Cut:
    """How the batch is cut into micro-batches: each shard of rows (a data-parallel rank's
    piece) is cut into m chunks, and micro-batch j is chunk j of every shard, so the pieces
    stay where they are. Row order within the batch changes, which a mean loss does not see;
    outputs are put back in order."""

    def __init__(self, x, m):
        self.m, self.n = m, x.shape[0]
        self.shards = _dim0_shards(tuple(x.shape), x.placement, x.sbp)
        starts = [list(itertools.accumulate(layout.split_sizes(hi - lo, m), initial=lo)) for lo, hi in self.shards]
        self.ranges = [[(at[j], at[j + 1]) for at in starts] for j in range(m)]
        self.sizes = [sum(b - a for a, b in r) for r in self.ranges]
        self.local_ok = all(self._keeps_layout(x, j) for j in range(m)) and min(self.sizes) > 0

    def _keeps_layout(self, t, j):
        """Does chunk j of every piece form a tensor of the same SBP (pieces where its layout puts them)?"""
        shape = (self.sizes[j],) + tuple(t.shape[1:])
        return _dim0_shards(shape, t.placement, t.sbp) == [
            (sum(b - a for a, b in self.ranges[j][:i]), sum(b - a for a, b in self.ranges[j][:i + 1]))
            for i in range(len(self.shards))]

    def take(self, t, j):
        """Micro-batch j of t (a tensor with the batch's rows): from the pieces when t is laid
        out like the input, else by global slicing."""
        if self.local_ok and _dim0_shards(tuple(t.shape), t.placement, t.sbp) == self.shards:
            shape = (self.sizes[j],) + tuple(t.shape[1:])
            coord = t.placement.mesh_coord(get_rank())
            if coord is None:
                return hollow(shape, t.dtype, t.placement, t.sbp)
            lo, hi = layout.local_box(t.shape, t.placement.hierarchy, t.sbp, coord)[0]
            i = self.shards.index((lo, hi))
            a, b = self.ranges[j][i]
            return Tensor(t._local[a - lo:b - lo], shape, t.dtype, t.placement, t.sbp)
        parts = [t[a:b] for a, b in self.ranges[j]]
        return parts[0] if len(parts) == 1 else ops.cat(parts, 0)

    def join(self, outs):
        """The micro-batches' outputs as one tensor, rows back in the batch's order: from the
        pieces when each output is laid out as its micro-batch was cut (no communication, same
        SBP), else by global ops."""
        first = outs[0]
        if (self.local_ok and all((o.placement, o.sbp) == (first.placement, first.sbp) for o in outs)
                and all(self._keeps_layout(o, j) for j, o in enumerate(outs))):
            shape = (self.n,) + tuple(first.shape[1:])
            if _dim0_shards(shape, first.placement, first.sbp) == self.shards:
                if get_rank() not in first.placement:
                    return hollow(shape, first.dtype, first.placement, first.sbp)
                xp = device(first.placement.type).xp
                piece = xp.concatenate([o._local for o in outs], axis=0)
                return Tensor(piece, shape, first.dtype, first.placement, first.sbp)
        whole = ops.cat(outs, 0) if len(outs) > 1 else outs[0]
        order = [r for ranges in self.ranges for a, b in ranges for r in range(a, b)]
        if order == list(range(self.n)):
            return whole
        inverse = [0] * self.n
        for i, r in enumerate(order):
            inverse[r] = i
        index = constant(np.asarray(inverse, np.int64), whole)  # the micro-batches' order: a global fact
        return ops.index_select(whole, 0, index)
