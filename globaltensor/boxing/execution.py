"""Running a plan on this rank's piece: the collectives of each step."""
import math

import numpy as np

from .. import layout
from ..backends.devices import device
from ..distributed.group import Group
from ..env import get_rank
from .planning import _overlap_blocks


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


def _run_axis(x, step, global_shape, dt):
    placement, axis = step.placement, step.mesh_dim
    coord = placement.mesh_coord(get_rank())
    if coord is None:
        return x
    s, t, k, idx = step.src[axis], step.dst[axis], placement.hierarchy[axis], coord[axis]
    dev = device(placement.type)
    _c = dev.collectives

    def parent_len(d):  # the extent of dim d shared by the ranks along this axis
        lo, hi = layout.parent_extent(global_shape[d], placement.hierarchy, step.src, coord, d, axis)
        return hi - lo

    if step.kind == "slice":
        return _take(x, t.dim, *layout.split_range(x.shape[t.dim], k, idx))
    if step.kind == "broadcast_to_partial":
        return x if idx == 0 else np.zeros_like(x)
    if step.kind == "split_to_partial":
        shape = list(x.shape)
        shape[s.dim] = parent_len(s.dim)
        out = _alloc(shape, dt, dev)
        out[...] = 0
        lo, hi = layout.split_range(shape[s.dim], k, idx)
        _take(out, s.dim, lo, hi)[...] = x
        return out
    group = _group(placement.axis_ranks(axis, coord))
    if step.kind == "all_reduce":
        out = _alloc(x.shape, dt, dev)
        _c.all_reduce(_contiguous(x), group=group, out=out)
        return out
    if step.kind == "all_gather":
        shapes = _block_shapes(x.shape, s.dim, layout.split_sizes(parent_len(s.dim), k))
        flat = _c.all_gather(_contiguous(x).reshape(-1), group=group, sizes=[math.prod(b) for b in shapes])
        return _unpack(flat, shapes, s.dim, dt, dev)
    if step.kind == "reduce_scatter":
        sizes = layout.split_sizes(x.shape[t.dim], k)
        packed = _pack(x, t.dim, sizes, dt, dev)
        block = _block_shapes(x.shape, t.dim, sizes)[idx]
        return _c.reduce_scatter(packed, group=group, sizes=[math.prod(b) for b in
                                                            _block_shapes(x.shape, t.dim, sizes)]).reshape(block)
    return _split_to_split(x, s.dim, t.dim, parent_len(s.dim), parent_len(t.dim), k, idx, group, dt, dev)


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


def _split_to_split(x, i, j, len_i, len_j, k, idx, group, dt, dev):
    """S(i) -> S(j) along one axis: send member q my j-slice q; stack the i-pieces received."""
    i_sizes, j_sizes = layout.split_sizes(len_i, k), layout.split_sizes(len_j, k)
    send = _pack(x, j, j_sizes, dt, dev)
    recv_shapes = [tuple(i_sizes[p] if a == i else (j_sizes[idx] if a == j else x.shape[a]) for a in range(x.ndim))
                   for p in range(k)]
    received = dev.collectives.all_to_all(send, [math.prod(b) for b in _block_shapes(x.shape, j, j_sizes)],
                                          group=group, recv_sizes=[math.prod(b) for b in recv_shapes])
    return _unpack(received, recv_shapes, i, dt, dev)


def _redistribute(x, blocks, src_box, dst_box, union, dt, dev):
    """Send each (receiver, sender, box) block from sender to receiver in one all_to_all."""
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
        if step.kind != "redistribute":
            x = _run_axis(x, step, p.global_shape, dt)
            continue
        me = get_rank()
        src_coord, dst_coord = p.src_placement.mesh_coord(me), p.dst_placement.mesh_coord(me)
        src_box = layout.local_box(p.global_shape, p.src_placement.hierarchy, step.src, src_coord) if src_coord else None
        dst_box = layout.local_box(p.global_shape, p.dst_placement.hierarchy, step.dst, dst_coord) if dst_coord else None
        blocks = _overlap_blocks(p.src_placement, step.src, p.dst_placement, step.dst, p.global_shape)
        union = tuple(sorted(set(p.src_placement.rank_list()) | set(p.dst_placement.rank_list())))
        x = _redistribute(x, blocks, src_box, dst_box, union, dt, device(p.dst_placement.type))
    return x
