"""One all_gather and one reduce_scatter for all the S(0) parameters of a fully_shard unit on a 1-D cpu mesh."""
import math
import weakref

import numpy as np

from . import layout
from .autograd import Function
from .boxing.execution import _group
from .distributed import collectives
from .env import get_rank
from .sbp import broadcast, partial_sum, split
from .tensor import Layout, Tensor


def groupable(params):
    """Whether params can move as one flat buffer: all S(0) on one 1-D cpu placement."""
    if not params:
        return False
    pl = params[0].placement
    return pl.type == "cpu" and pl.ndim == 1 and all(
        p.placement == pl and tuple(p.sbp) == (split(0),) and p.ndim > 0 for p in params)


def _rows(p, k):
    """Elements of p's piece on each of the k ranks (its rows cut by layout, times a row's size)."""
    row = math.prod(p.shape[1:])
    return [n * row for n in layout.split_sizes(p.shape[0], k)]


def gather_arrays(params, dtype=None):
    """The whole values of params (S(0) on a 1-D mesh), in one all_gather of their flat pieces
    (cast to the numpy dtype `dtype` first where given: mixed precision gathers the low dtype)."""
    flat, group, sizes, per = _packed(params, dtype)
    return _unpacked(collectives.all_gather(flat, group=group, sizes=sizes), params, per)


def _packed(params, dtype):
    """(this rank's pieces of params as one flat array, the mesh axis's group, every rank's length,
    each parameter's length on each rank)."""
    pl = params[0].placement
    k = pl.hierarchy[0]
    per = [_rows(p, k) for p in params]
    flat = np.concatenate([p._local.reshape(-1) for p in params])
    if dtype is not None and flat.dtype != dtype:
        flat = flat.astype(dtype)
    group = _group(pl.axis_ranks(0, pl.mesh_coord(get_rank())))
    return flat, group, [sum(c[i] for c in per) for i in range(len(per[0]))], per


def _unpacked(whole, params, per):
    """Each parameter's whole value out of the gathered flat buffer (laid out rank by rank)."""
    pieces, at = [[] for _ in params], 0
    for i in range(len(per[0])):
        for j, p in enumerate(params):
            pieces[j].append(whole[at:at + per[j][i]])
            at += per[j][i]
    return [np.concatenate(ps).reshape(tuple(p.shape)) for ps, p in zip(pieces, params)]


taken = [0]  # gathers an Ahead served (the tests read it)


class Ahead:
    """A unit's gather started ahead of its use (fully_shard's prefetch: the next unit's while this
    one computes), on the group's worker thread; take() waits and unpacks. `key` names the pass it
    was started for: a gather is used only by that pass (the shards may change after it)."""

    __slots__ = ("params", "key", "started", "per", "dtype")

    def __init__(self, params, dtype, key):
        self.params, self.key, self.dtype = list(params), key, dtype
        flat, group, sizes, self.per = _packed(self.params, dtype)
        self.started = collectives.all_gather_async(flat, sizes, group=group)

    def take(self, params, key):
        """The gathered arrays of params, if this gather is theirs for this pass; else None."""
        started, self.started = self.started, None
        if started is None:
            return None
        work, whole = started
        work.wait()
        if key != self.key or len(params) != len(self.params) or any(a is not b for a, b in zip(params, self.params)):
            return None
        taken[0] += 1
        return _unpacked(whole, self.params, self.per)


def _wrap(array, p, sbp, dtype=None):
    return Tensor._wrap(array, Layout.of(tuple(p.shape), dtype or p.dtype, p.placement, sbp))


class GatherGroup(Function):
    """A unit's shards -> their gathered (broadcast) copies in the unit's param_dtype, one all_gather
    (or the copies unit.unshard() made); backward: the copies' pieces freed (or kept for the next
    forward: unit.reshard_after_backward False), their partial gradients, in the unit's reduce dtype,
    packed by rank, one reduce_scatter into the shards (a gradient that is not partial is boxed
    alone), or, with gradient sync off, kept on the unit and added in at the next synced backward.
    The first n_through tensors (the unit's inputs) pass through unchanged: the unit computes on
    the passed copies, so this backward runs as soon as the unit's backward ends (before the
    backward of whatever made the inputs), not after the whole backward."""

    @staticmethod
    def forward(ctx, unit, n_through, *tensors):
        through, params = tensors[:n_through], tensors[n_through:]
        ctx.params, ctx.unit, ctx.n_through = params, unit, n_through
        dtype = unit.param_dtype
        arrays = unit.take_ready(params) or unit.take_ahead(params) or gather_arrays(list(params), dtype and dtype.np)
        outs = tuple(_wrap(a, p, (broadcast,), dtype) for a, p in zip(arrays, params))
        ctx.outs = [weakref.ref(t) for t in outs]  # weakly: copy -> node -> context -> copy is a cycle that
        return tuple(through) + outs               # would keep the step's inputs until the collector ran

    @staticmethod
    def backward(ctx, *grads):
        params, unit = ctx.params, ctx.unit
        fulls = [ref() for ref in ctx.outs]
        unit.after_backward(params, fulls)
        head, grads = (None, None) + grads[:ctx.n_through], grads[ctx.n_through:]
        reduce = unit.reduce_dtype or unit.param_dtype
        if reduce is not None:
            grads = [g if g is None or g.dtype == reduce else g.to(reduce) for g in grads]
        grads = unit.with_unsynced(grads)
        if grads is None:  # gradient sync off: kept on the unit
            return head + (None,) * len(params)
        if any(g is None or tuple(g.sbp) != (partial_sum,) for g in grads):
            return head + tuple(None if g is None else g.to_global(placement=p.placement, sbp=p.sbp).to(p.dtype)
                                for g, p in zip(grads, params))
        pl = params[0].placement
        k = pl.hierarchy[0]
        per = [_rows(p, k) for p in params]
        chunks = []
        for i in range(k):
            for j, g in enumerate(grads):
                flat = g._local.reshape(-1)
                start = sum(per[j][:i])
                chunks.append(flat[start:start + per[j][i]])
        mine = collectives.reduce_scatter(np.concatenate(chunks), group=_group(pl.axis_ranks(0, pl.mesh_coord(get_rank()))),
                                          sizes=[sum(c[i] for c in per) for i in range(k)])
        idx, out, at = pl.mesh_coord(get_rank())[0], [], 0
        for j, p in enumerate(params):
            n = per[j][idx]  # a .grad of its own, in the shard's dtype (a view would keep all of mine)
            out.append(_wrap(mine[at:at + n].reshape(tuple(p._local.shape)).astype(p._local.dtype), p, p.sbp))
            at += n
        return head + tuple(out)
