"""Gradient buckets: backward files each finished gradient, and a bucket's all_reduce starts on
the group's worker thread as soon as its last gradient is in, while backward goes on."""
import numpy as np

from .distributed import collectives
from .env import get_rank
from .sbp import broadcast, partial_sum
from .tensor import Tensor


def pack(leaves, nbytes, limits):
    """Consecutive leaves in buckets of at most limits(i) bytes (a larger leaf gets its own)."""
    buckets, current, size = [], [], 0
    for leaf, n in zip(leaves, nbytes):
        if current and size + n > limits(len(buckets)):
            buckets.append(current)
            current, size = [], 0
        current.append(leaf)
        size += n
    if current:
        buckets.append(current)
    return buckets


class Buckets:
    """One backward's buckets. ready(leaf, g) files a finished gradient (None when the leaf got
    none); buckets start in plan order on every rank, each once all its leaves are in; finish()
    starts the rest, waits, and lands each reduced gradient."""

    def __init__(self, plan, launch, land):
        self.plan, self._launch, self._land = plan, launch, land
        self._bucket_of = {id(leaf): i for i, bucket in enumerate(plan) for leaf in bucket}
        self._grads = [{} for _ in plan]
        self._missing = [len(bucket) for bucket in plan]
        self._started = []

    def owns(self, leaf):
        return id(leaf) in self._bucket_of

    def ready(self, leaf, g):
        i = self._bucket_of[id(leaf)]
        self._grads[i][id(leaf)] = g
        self._missing[i] -= 1
        while len(self._started) < len(self.plan) and self._missing[len(self._started)] == 0:
            self._start_next()

    def _start_next(self):
        i = len(self._started)
        self._started.append(self._launch(self.plan[i], self._grads[i]))

    def finish(self):
        while len(self._started) < len(self.plan):
            self._start_next()
        for pending in self._started:
            self._land(pending)

    def abandon(self):
        """After an error in backward: wait for what started (its buffers must outlive it)."""
        for pending in self._started:
            for work, _, _ in pending:
                try:
                    if work is not None:
                        work.wait()
                except Exception:  # noqa: BLE001 - the error of backward is the one to report
                    pass


# Global leaves: a broadcast leaf whose gradient came out partial is reduced over those mesh axes.

def reducible_axes(leaf, g):
    """The mesh axes where g is partial and the leaf broadcast, or None when g differs otherwise."""
    if g.placement != leaf.placement or g.sbp == leaf.sbp:
        return None
    axes = []
    for a, (gs, ls) in enumerate(zip(g.sbp, leaf.sbp)):
        if gs is partial_sum and ls is broadcast:
            axes.append(a)
        elif gs != ls:
            return None
    return tuple(axes)


def plan_global(leaves_in_order, limit):
    """Buckets of the global leaves that may get partial gradients, by (placement, dtype)."""
    by_key = {}
    for leaf in leaves_in_order:
        if leaf.is_global and broadcast in leaf.sbp:
            by_key.setdefault((leaf.placement, leaf.dtype), []).append(leaf)
    plan = []
    for leaves in by_key.values():
        plan += pack(leaves, [leaf._local.nbytes for leaf in leaves], lambda i: limit)
    first = {id(leaf): i for i, leaf in enumerate(leaves_in_order)}
    plan.sort(key=lambda bucket: first[id(bucket[-1])])  # in the order they fill up
    return plan


def launch_global(bucket, grads):
    """Pack the bucket's partial gradients per reduced axes; one all_reduce_async each."""
    by_axes = {}
    for leaf in bucket:
        g = grads.get(id(leaf))
        if g is not None:
            by_axes.setdefault(reducible_axes(leaf, g), []).append((leaf, g))
    pending = []
    for axes, items in by_axes.items():
        placement = items[0][0].placement
        coord = placement.mesh_coord(get_rank())
        if coord is None:  # this rank holds no piece: nothing to reduce
            pending.append((None, None, items))
            continue
        flat = collectives.empty_shared((sum(g._local.size for _, g in items),), items[0][1]._local.dtype)
        np.concatenate([g._local.reshape(-1) for _, g in items], out=flat)
        group = _group(placement.axes_ranks(axes, coord))
        pending.append((collectives.all_reduce_async(flat, group=group), flat, items))
    return pending


def land_global(pending):
    for work, flat, items in pending:
        if work is not None:
            work.wait()
        start = 0
        for leaf, g in items:
            n = g._local.size
            piece = flat[start:start + n].reshape(g._local.shape) if work is not None else g._local
            start += n
            reduced = Tensor(piece, leaf.shape, leaf.dtype, leaf.placement, leaf.sbp)
            leaf.grad = reduced if leaf.grad is None else _add(leaf.grad, reduced).detach()


def _group(ranks):
    from .boxing import _group as group  # boxing imports autograd, which imports this module
    return group(ranks)


def _add(a, b):
    from .ops import add
    return add(a, b)
