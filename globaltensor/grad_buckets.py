"""Gradient buckets: a sink of autograd's that files each finished gradient, and a bucket's
all_reduce starts as soon as its last gradient is in (on the group's worker thread where CPUs allow)."""
import os

import numpy as np

from . import autograd
from .backends.devices import device
from .distributed import collectives
from .env import get_local_world_size, get_rank, get_world_size
from .grad_flat import FlatBuffer, copies, fill, flat_buffers, _flat_cache  # noqa: F401 - callers name them here
from .scope import current as _scope, scoped
from .sbp import broadcast
from .sbp import reducible_axes as sbp_reducible_axes
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


_bucket_bytes = [25 << 20]


def bucket_bytes():
    """The size of a gradient bucket: the gradients one all_reduce carries."""
    return _bucket_bytes[0]


def set_bucket_size(megabytes):
    """The size of the gradient buckets reduced by one all_reduce each (default 25 MB)."""
    _bucket_bytes[0] = int(megabytes * (1 << 20))


def no_sync():
    """Inside: backward keeps the partial gradients of broadcast leaves (no communication); the
    first backward after it reduces what was accumulated, in buckets. Scoped to this thread."""
    return scoped(sync=False)


def syncing():
    return _scope.get().sync


def overlaps(host=True):
    """True when a bucket's all_reduce may run on the group's worker thread beside the rest of
    backward: always for device buckets (their kernels run on the device); for host memory when
    this process may run on at least two CPUs per rank of its host. With fewer, the worker only
    takes turns on the CPUs backward's kernels use (and spins beside them while a peer is late),
    so each bucket runs on the calling thread as it fills: the same collectives in the same
    order, so ranks deciding apart stay correct. GLOBALTENSOR_BUCKET_OVERLAP=0/1 decides."""
    forced = os.environ.get("GLOBALTENSOR_BUCKET_OVERLAP")
    if forced in ("0", "1"):
        return forced == "1"
    if not host:
        return True
    if not _cpus:
        _cpus.append(len(os.sched_getaffinity(0)))  # one value a process: read once
    return _cpus[0] >= 2 * get_local_world_size()


_cpus = []


class Buckets:
    """One backward's buckets. ready(leaf, g) files a finished gradient (None when the leaf got
    none); buckets start in plan order on every rank, each once all its leaves are in; finish()
    starts the rest, waits, and lands each reduced gradient. With flats (one FlatBuffer per
    bucket), dest(leaf) is where backward may write the leaf's gradient piece."""

    def __init__(self, plan, launch, land, flats=None):
        self.plan, self._launch, self._land = plan, launch, land
        self._flats = flats if flats is not None else [None] * len(plan)
        self._bucket_of = {id(leaf): i for i, bucket in enumerate(plan) for leaf in bucket}
        self._grads = [{} for _ in plan]
        self._missing = [len(bucket) for bucket in plan]
        self._started = []
        self._offered = []
        self._overlap = overlaps(host=not plan or isinstance(plan[0][0]._local, np.ndarray))

    def offer(self, order):
        """Point each context of backward's `order` at the bucket views of its leaf inputs, so
        its backward may write those gradients in place: only leaves used once (nothing to add
        up) that have no .grad yet, or one that zero_grad left zeros (the gradient replaces it).
        Taken back at finish() or abandon()."""
        if all(f is None for f in self._flats):
            return self
        uses = {}
        for ctx in order:
            for t in ctx.inputs:
                uses[id(t)] = uses.get(id(t), 0) + 1
        for ctx in order:
            for j, t in enumerate(ctx.inputs):
                if id(t) in self._bucket_of and uses[id(t)] == 1 and (t.grad is None or _is_zeroed(t.grad)):
                    view = self.dest(t)
                    if view is not None:
                        if ctx.dests is None:
                            ctx.dests = [None] * len(ctx.inputs)
                            self._offered.append(ctx)
                        ctx.dests[j] = view
        return self

    def _take_back(self):
        for ctx in self._offered:  # a later grad() over this graph must not write into the buckets
            ctx.dests = None
        self._offered = []

    def take(self, leaf, g):
        """autograd's sink protocol: file the leaf's gradient when it is reducible into the leaf's
        layout (and pass None on); else the bucket counts the leaf as done and g goes on."""
        if id(leaf) not in self._bucket_of:
            return g
        takes = g is not None and (leaf.is_local or reducible_axes(leaf, g) is not None)
        if not takes:
            g = self.keep_out(leaf, g)  # before ready(): that may start the bucket's all_reduce
        self.ready(leaf, g if takes else None)
        return None if takes else g

    def owns(self, leaf):
        return id(leaf) in self._bucket_of

    def dest(self, leaf):
        flat = self._flats[self._bucket_of[id(leaf)]]
        return None if flat is None else flat.views[flat.index[id(leaf)]]

    def keep_out(self, leaf, g):
        """g, or a copy of it when it lies in the leaf's bucket view: a gradient the bucket does
        not reduce must not be caught by the in-place all_reduce of its neighbours."""
        if g is None or g._local is not self.dest(leaf):
            return g
        return Tensor(g._local.copy(), g.shape, g.dtype, g.placement, g.sbp)

    def ready(self, leaf, g):
        i = self._bucket_of[id(leaf)]
        self._grads[i][id(leaf)] = g
        self._missing[i] -= 1
        while len(self._started) < len(self.plan) and self._missing[len(self._started)] == 0:
            self._start_next(not self._overlap or not any(self._missing[len(self._started):]))

    def _start_next(self, now):
        """Start the next bucket: on the group's worker thread while backward has gradients to
        come, else (now) on this thread: the plan's last, every bucket once the rest are full too
        or backward is over, every bucket where overlaps() says no. A hand-off and a second thread
        spinning beside this one cost more than they hide when nothing runs beside them."""
        i = len(self._started)
        now = now or i == len(self.plan) - 1
        self._started.append(self._launch(self.plan[i], self._grads[i], self._flats[i], now=now))

    def finish(self):
        self._take_back()
        while len(self._started) < len(self.plan):
            self._start_next(True)
        for pending in self._started:
            self._land(pending)

    def abandon(self):
        """After an error in backward: wait for what started (its buffers must outlive it)."""
        self._take_back()
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
    return None if g.placement != leaf.placement else sbp_reducible_axes(leaf.sbp, g.sbp)


def plan_global(leaves_in_order, limit):
    """Buckets of the global leaves that may get partial gradients, by (placement, dtype)."""
    by_key = {}
    for leaf in leaves_in_order:
        if leaf.is_global and broadcast in leaf.sbp and leaf._grad_sbp is None:  # ZeRO-2: reduce-scattered alone
            by_key.setdefault((leaf.placement, leaf.dtype), []).append(leaf)
    plan = []
    for leaves in by_key.values():
        plan += pack(leaves, [leaf._local.nbytes for leaf in leaves], lambda i: limit)
    first = {id(leaf): i for i, leaf in enumerate(leaves_in_order)}
    plan.sort(key=lambda bucket: first[id(bucket[-1])])  # in the order they fill up
    return plan


def launch_global(bucket, grads, flat=None, now=False):
    """One all_reduce_async per reduced axes (now: all_reduce, done on return): in place in the
    bucket's FlatBuffer when every leaf has a gradient reduced over the same axes (the usual case),
    else packed afresh per axes."""
    by_axes = {}
    for leaf in bucket:
        g = grads.get(id(leaf))
        if g is not None:
            by_axes.setdefault(reducible_axes(leaf, g), []).append((leaf, g))
    pending = []
    for axes, items in by_axes.items():
        placement = items[0][0].placement
        dev = device(placement.type)
        coord = placement.mesh_coord(get_rank())
        if coord is None:  # this rank holds no piece: nothing to reduce
            pending.append((None, None, items))
            continue
        if flat is not None and len(items) == len(bucket):
            buffer = fill(flat, {id(leaf): g._local for leaf, g in items})
        else:
            buffer = dev.empty((sum(g._local.size for _, g in items),), items[0][1]._local.dtype)
            np.concatenate([g._local.reshape(-1) for _, g in items], out=buffer)
        group = _group(placement.axes_ranks(axes, coord))
        pending.append((_all_reduce(dev.collectives, buffer, group, now), buffer, items))
    return pending


class _Done:
    """The Work of an all_reduce that ran on the caller's thread."""

    def wait(self):
        pass


def _all_reduce(collectives_module, buffer, group, now):
    """Sum buffer over the group in place: now, or started on the group's worker thread. Either
    way the group's collectives keep one order on every rank (a blocking one drains the worker)."""
    if now:
        collectives_module.all_reduce(buffer, group=group)
        return _Done()
    return collectives_module.all_reduce_async(buffer, group=group)


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


# Local leaves (DataParallel, Paddle's fused_allreduce_gradients): the mean over all ranks.

def launch_local(bucket, grads, flat, now=False):
    """Fill the bucket's buffer (a parameter without a gradient: its .grad, or zeros) and start
    the all_reduce of its mean (now: run it on this thread): the reduction kernel divides where it
    can (collectives.all_reduce_mean: one pass over the buffer fewer), else land_local does."""
    pieces = {}
    for p in bucket:
        g = grads.get(id(p))
        if g is None:
            g = p.grad if p.grad is not None else None
        pieces[id(p)] = g._local if g is not None else np.zeros_like(p._local)
    buffer = fill(flat, pieces)
    work = collectives.all_reduce_mean(buffer, now=now)
    work = _all_reduce(collectives, buffer, None, now) if work is None else _Averaged(work)
    return [(work, buffer, bucket)]


class _Averaged:
    """The Work of an all_reduce that left the mean (land_local divides nothing)."""

    __slots__ = ("work",)

    def __init__(self, work):
        self.work = work

    def wait(self):
        self.work.wait()


def land_local(pending, into_own=False):
    """Each .grad becomes the mean: a view of the bucket's buffer, or (into_own) copied into the
    array the .grad holds already."""
    world = get_world_size()
    for work, flat, bucket in pending:
        work.wait()
        if not isinstance(work, _Averaged):
            flat /= world
        start = 0
        for p in bucket:
            n = p._local.size
            view = flat[start:start + n].reshape(p._local.shape)
            start += n
            if into_own and p.grad._local.flags.writeable:
                p.grad._local[...] = view
            elif into_own:  # zeros left by zero_grad (read-only): the .grad takes a copy
                p.grad._local = view.copy()
            else:
                p.grad = Tensor(view)


def _is_zeroed(t):
    return autograd.engine.is_zeroed(t)


def _group(ranks):
    from .boxing import _group as group
    return group(ranks)


def _add(a, b):
    from .ops import add
    return add(a, b)


class _KeepPartial:
    """Inside no_sync(): a broadcast global leaf's partial gradient is stored as it is (added to
    on later micro-batches); the first backward outside reduces it."""

    def __init__(self, run):
        self.run = run

    def take(self, leaf, g):
        if g is not None and leaf.grad is None and leaf.is_global and reducible_axes(leaf, g) is not None:
            self.run.store(leaf, g)
            return None
        return g

    def finish(self):
        pass

    abandon = finish


class _GlobalSink:
    """Buckets of the broadcast global leaves whose gradients come out partial. Registered with
    autograd when this module loads, before any DataParallel, so its buckets start first. A
    graph's capture gets none: it records each reduction, and the graph's bucketing pass packs
    them."""

    def begin(self, run):
        if not _scope.get().sync:
            return _KeepPartial(run)
        if _scope.get().recorder is not None:
            return None
        plan = plan_global(run.leaves, bucket_bytes())
        return Buckets(plan, launch_global, land_global, flat_buffers(plan)).offer(run.order) if plan else None


GLOBAL_SINK = _GlobalSink()
autograd.sinks.add(GLOBAL_SINK)
