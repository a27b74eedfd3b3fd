"""ZeRO-2's gradient buckets: partial gradients of parameters whose gradient is their S(0) shard, reduce-scattered a bucket at a time."""
import math

import numpy as np

from . import autograd, layout
from .boxing.execution import _group
from .distributed import collectives
from .env import get_rank
from .grad_buckets import pack
from .sbp import broadcast, partial_sum, split
from .scope import current as _scope
from .tensor import Tensor

SHARD_BUCKET_BYTES = 8 << 20  # whole gradient bytes one reduce_scatter carries (a bigger gradient: its own)


def _bucketed(leaf):
    """A stage-2 parameter on a 1-D cpu placement: broadcast, its gradient S(0) (zero.attach)."""
    pl = getattr(leaf, "_placement", None)
    return (pl is not None and pl.type == "cpu" and pl.ndim == 1 and tuple(leaf.sbp) == (broadcast,)
            and getattr(leaf, "_grad_sbp", None) == (split(0),) and leaf.ndim > 0
            and pl.mesh_coord(get_rank()) is not None)


def plan_shards(leaves_in_order, limit):
    """Buckets of the stage-2 leaves by (placement, dtype), in the order their gradients finish
    (the same on every rank: backward's order is the model's)."""
    by_key = {}
    for leaf in leaves_in_order:
        if _bucketed(leaf):
            by_key.setdefault((leaf.placement, leaf.dtype), []).append(leaf)
    plan = []
    for leaves in by_key.values():
        plan += pack(leaves, [leaf._local.nbytes for leaf in leaves], lambda i: limit)
    first = {id(leaf): i for i, leaf in enumerate(leaves_in_order)}
    plan.sort(key=lambda bucket: first[id(bucket[-1])])
    return plan


class ShardBuckets:
    """One backward's stage-2 buckets: take(leaf, g) files a partial gradient; a bucket whose leaves
    are all in is reduce-scattered (in plan order, alike on every rank): its gradients packed rank by
    rank, one reduce_scatter, each leaf's .grad its shard (added to what it holds)."""

    def __init__(self, plan, run):
        self.plan, self.run = plan, run
        self._bucket_of = {id(leaf): i for i, bucket in enumerate(plan) for leaf in bucket}
        self._grads = [{} for _ in plan]
        self._missing = [len(bucket) for bucket in plan]
        self._done = 0

    def owns(self, leaf):
        return id(leaf) in self._bucket_of

    def take(self, leaf, g):
        i = self._bucket_of.get(id(leaf))
        if i is None:
            return g
        takes = (g is not None and g.placement == leaf.placement and tuple(g.sbp) == (partial_sum,)
                 and g.dtype == leaf.dtype and type(g._local) is np.ndarray)
        self._grads[i][id(leaf)] = g if takes else None
        self._missing[i] -= 1
        while self._done < len(self.plan) and self._missing[self._done] == 0:
            self._reduce(self._done)
            self._done += 1
        return None if takes else g

    def _reduce(self, i):
        items = [(leaf, self._grads[i][id(leaf)]) for leaf in self.plan[i]]
        items = [(leaf, g) for leaf, g in items if g is not None]
        self._grads[i] = {}
        if not items:
            return
        pl = items[0][0].placement
        k = pl.hierarchy[0]
        per = [[n * math.prod(leaf.shape[1:]) for n in layout.split_sizes(leaf.shape[0], k)] for leaf, _ in items]
        flats = [g._local.reshape(-1) for _, g in items]
        chunks = [flat[sum(lengths[:r]):sum(lengths[:r + 1])] for r in range(k) for flat, lengths in zip(flats, per)]
        coord = pl.mesh_coord(get_rank())
        mine = collectives.reduce_scatter(np.concatenate(chunks), group=_group(pl.axis_ranks(0, coord)),
                                          sizes=[sum(c[r] for c in per) for r in range(k)])
        at, idx = 0, coord[0]
        for (leaf, _), lengths in zip(items, per):
            n = lengths[idx]
            shape = layout.local_shape(tuple(leaf.shape), pl.hierarchy, (split(0),), coord)
            shard = Tensor(mine[at:at + n].reshape(shape).copy(), tuple(leaf.shape), leaf.dtype, pl, (split(0),))
            self.run.store(leaf, shard)
            at += n

    def finish(self):
        while self._done < len(self.plan):  # leaves backward never reached: reduced with what came
            self._missing[self._done] = 0
            self._reduce(self._done)
            self._done += 1

    def abandon(self):
        self._grads = [{} for _ in self.plan]


class _ShardSink:
    """Registered with autograd when this module loads; begins a backward's ShardBuckets where stage-2
    leaves are reached, outside no_sync() (there the partial gradients are kept) and graph captures
    (a capture records each reduction)."""

    def begin(self, run):
        state = _scope.get()
        if not state.sync or state.recorder is not None:
            return None
        plan = plan_shards(run.leaves, SHARD_BUCKET_BYTES)
        return ShardBuckets(plan, run) if plan else None


SHARD_SINK = _ShardSink()
autograd.sinks.add(SHARD_SINK)
