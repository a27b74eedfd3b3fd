"""Running a plan on this rank's piece (each step's runner is its kind's, boxing/steps.py), and the
tools the runners share: the cached groups, blocks packed along a dim, one all_to_all of boxes."""
import math

import numpy as np

from ..distributed.group import Group
from ..env import get_rank


def _contiguous(x):
    """x as a C-contiguous array (numpy or cupy), keeping 0-d arrays 0-d."""
    return x if x.flags.c_contiguous else x.copy()


def _group(ranks):
    found = _groups.get(ranks)
    return found if found is not None else _groups.setdefault(ranks, Group(ranks))


_groups = {}


def _alloc(shape, dt, dev):
    return dev.empty(tuple(shape), dt.np)


def _take(x, d, lo, hi):
    index = [slice(None)] * x.ndim
    index[d] = slice(lo, hi)
    return x[tuple(index)]


def _block_shapes(shape, d, sizes):
    """The shapes of `shape` cut along dim d into pieces of the given sizes."""
    return [tuple(n if i == d else shape[i] for i in range(len(shape))) for n in sizes]


def _pack(x, d, sizes, dt, dev):
    """The pieces of x along dim d, each C-contiguous, one after another in a flat buffer
    (x itself when d == 0: its row ranges already lie in that order)."""
    if d == 0 and x.flags.c_contiguous:
        return x.reshape(-1)
    out = _alloc((x.size,), dt, dev)
    start, lo = 0, 0
    for shape, n in zip(_block_shapes(x.shape, d, sizes), sizes):
        count = math.prod(shape)
        out[start:start + count].reshape(shape)[...] = _take(x, d, lo, lo + n)
        start, lo = start + count, lo + n
    return out


def _unpack(flat, shapes, d, dt, dev):
    """Concatenate along dim d the blocks lying one after another in `flat`."""
    full = list(shapes[0])
    full[d] = sum(shape[d] for shape in shapes)
    if d == 0:
        return flat.reshape(full)
    out = _alloc(full, dt, dev)
    start, lo = 0, 0
    for shape in shapes:
        count = math.prod(shape)
        _take(out, d, lo, lo + shape[d])[...] = flat[start:start + count].reshape(shape)
        start, lo = start + count, lo + shape[d]
    return out


def _redistribute(x, blocks, src_box, dst_box, union, dt, dev, zeros=False):
    """Send each (receiver, sender, box) block from sender to receiver in one all_to_all
    (zeros: the parts of dst_box that no block covers are zero)."""
    me = get_rank()
    if me not in union:
        return x
    sends = {r: box for r, s, box in blocks if s == me}
    recvs = {s: box for r, s, box in blocks if r == me}
    counts = [math.prod(b - a for a, b in sends[q]) if q in sends else 0 for q in union]
    parts = [_contiguous(x[tuple(slice(a - o, b - o) for (a, b), (o, _) in zip(sends[q], src_box))]).ravel()
             for q in union if q in sends]
    send = _alloc((sum(counts),), dt, dev)
    if parts:
        np.concatenate(parts, out=send)
    recv_counts = [math.prod(b - a for a, b in recvs[q]) if q in recvs else 0 for q in union]
    received = dev.collectives.all_to_all(send, counts, group=_group(union), recv_sizes=recv_counts)
    if dst_box is None:
        return dev.empty((0,) * max(1, len(src_box or ())), dt.np)
    out = _alloc(tuple(b - a for a, b in dst_box), dt, dev)
    if zeros:
        out[...] = 0
    start = 0
    for q, n in zip(union, recv_counts):
        if n:
            box = recvs[q]
            out[tuple(slice(a - o, b - o) for (a, b), (o, _) in zip(box, dst_box))] = \
                received[start:start + n].reshape([b - a for a, b in box])
            start += n
    return out


def run(p, x, dt):
    """This rank's piece in the target layout, from its piece `x` in the source layout."""
    for step in p.steps:
        x = step.kind.run(x, step, p, dt)
    return x
