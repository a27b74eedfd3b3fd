"""A global tensor from every rank's local piece (to_global on a local tensor)."""
import numpy as np

from .. import layout
from ..backends.devices import device
from ..env import get_rank
from ..sbp import broadcast, normalize, split
from ..tensor import Tensor
from .execution import _alloc, _contiguous, _group, _redistribute


_META = 20  # in placement, ndim, dtype index, then up to 17 dims


def _exchange_meta(array, placement):
    """Every rank's (in placement, ndim, dtype, shape): one small all_gather over all ranks, by the
    placement's device (so a cuda job spanning machines exchanges it through NCCL)."""
    from .. import dtype as _dtype
    from ..distributed.group import world_group
    if array.ndim > _META - 3:
        raise ValueError(f"at most {_META - 3} dimensions are supported, got {array.ndim}")
    row = np.zeros(_META, np.int64)
    row[0] = get_rank() in placement
    row[1] = array.ndim
    row[2] = int(_dtype.of_array(array).code)
    row[3:3 + array.ndim] = array.shape
    table = gather_rows(row, placement.type, world_group())
    return {r: (tuple(int(v) for v in table[r, 3:3 + table[r, 1]]), int(table[r, 2]))
            for r in range(len(table)) if table[r, 0]}


def gather_rows(row, device_type, group):
    """Every member's int64 `row`, stacked in member order, through the device's collectives (so
    a cuda job spanning machines goes through NCCL): the small exchanges that check metadata."""
    dev = device(device_type)
    return dev.to_host(dev.collectives.all_gather(dev.from_host(row[None, :]), group=group,
                                                  sizes=[1] * len(group.ranks)))


def from_local(array, placement, sbp):
    """A global tensor from every rank's piece (SPEC §3): split pieces concatenate (lengths may
    differ: they are rebalanced to the even layout), broadcast takes the first rank's data
    along each broadcast axis, partial_sum pieces add up. Mismatches raise on every rank."""
    from .. import dtype as _dtype
    sbp = normalize(sbp, placement.ndim, array.ndim)
    meta = _exchange_meta(array, placement)
    names = {(shape, code) for shape, code in meta.values()}
    ndims = {len(shape) for shape, _ in names}
    codes = {code for _, code in names}
    if len(ndims) > 1 or len(codes) > 1:
        detail = ", ".join(f"rank {r}: shape {s} {_dtype.from_code(c).name}" for r, (s, c) in sorted(meta.items()))
        raise ValueError(f"to_global: the local pieces must have the same number of dims and dtype; got {detail}")
    dt = _dtype.from_code(codes.pop())
    shapes = {r: shape for r, (shape, _) in meta.items()}
    first = {r: tuple(0 if s is broadcast else c for s, c in zip(sbp, placement.mesh_coord(r))) for r in shapes}
    unlike = [r for r in shapes if shapes[r] != shapes[int(placement.ranks[first[r]])]]
    if unlike:
        raise ValueError(f"to_global: along a broadcast mesh axis every piece must have the shape of the first "
                         f"rank's (whose data is taken); got {_shapes_text(shapes)}")
    global_shape = _infer_global_shape(shapes, placement, sbp, first)
    dev = device(placement.type)
    local = array if get_rank() in placement else dev.empty((0,) * max(1, array.ndim), dt.np)
    local = _broadcast_axes(local, shapes, placement, sbp, dt)
    out = _settle_splits(local, shapes, first, global_shape, placement, sbp, dt)
    out._source = _source_box(shapes, first, global_shape, placement, sbp)
    return out


def _source_box(shapes, first, global_shape, placement, sbp):
    """(box, counts): where this rank's piece lay in the global value, and whether it counted
    (pieces along broadcast axes other than the first are ignored)."""
    me = get_rank()
    if me not in placement:
        return None, False
    coord = placement.mesh_coord(me)
    box = [(0, n) for n in global_shape]
    for d in range(len(global_shape)):
        axes = [a for a, s in enumerate(sbp) if isinstance(s, split) and s.dim == d]
        if not axes:
            continue
        if placement.ndim == 1:  # pieces concatenate in rank order, whatever their lengths
            start = sum(shapes[r][d] for r in placement.rank_list()[:coord[0]])
            box[d] = (start, start + shapes[me][d])
        else:
            box[d] = layout.local_box(global_shape, placement.hierarchy, sbp, coord)[d]
    return box, first[me] == coord


def _infer_global_shape(shapes, placement, sbp, first):
    """Concatenate along split dims (over the ranks holding the first data of each broadcast
    axis); every other dim must agree."""
    ref = shapes[placement.rank_list()[0]]
    global_shape = list(ref)
    for d in range(len(ref)):
        axes = [a for a, s in enumerate(sbp) if isinstance(s, split) and s.dim == d]
        reps = {first[r] for r in shapes}
        if axes:
            totals = {}
            for coord in reps:
                key = tuple(c for a, c in enumerate(coord) if a not in axes)
                rank = int(placement.ranks[coord])
                totals[key] = totals.get(key, 0) + shapes[rank][d]
            if len(set(totals.values())) > 1:
                raise ValueError(f"to_global: the pieces split along dim {d} do not add up to one length: {totals}")
            global_shape[d] = totals.popitem()[1]
        else:
            seen = {shapes[int(placement.ranks[c])][d] for c in reps}
            if len(seen) > 1:
                raise ValueError(f"to_global: dim {d} is not split, so every piece needs the same length there; "
                                 f"got {sorted(seen)} ({_shapes_text(shapes)})")
    return tuple(global_shape)


def _shapes_text(shapes):
    return ", ".join(f"rank {r}: {s}" for r, s in sorted(shapes.items()))


def _broadcast_axes(local, shapes, placement, sbp, dt):
    """Along each broadcast axis, the data of coordinate 0 overwrites the others'."""
    coord = placement.mesh_coord(get_rank())
    for axis, s in enumerate(sbp):
        if s is not broadcast or coord is None:
            continue
        ranks = placement.axis_ranks(axis, coord)
        source = ranks[0]
        dev = device(placement.type)
        buf = local if get_rank() == source else _alloc(shapes[source], dt, dev)
        buf = _contiguous(buf)
        dev.collectives.broadcast(buf, src=source, group=_group(ranks))
        local = buf
    return local


def _settle_splits(local, shapes, first, global_shape, placement, sbp, dt):
    """Keep pieces that already follow the even split; rebalance a 1-D split that does not."""
    expected = {r: layout.local_shape(global_shape, placement.hierarchy, sbp, placement.mesh_coord(r)) for r in shapes}
    wrong = {r: shapes[r] for r in shapes if first[r] == placement.mesh_coord(r) and shapes[r] != expected[r]}
    if not wrong:
        return Tensor(local, global_shape, dt, placement, sbp)
    if placement.ndim != 1:
        raise ValueError("to_global: on an N-D mesh the split pieces must follow the even layout (the first L % k "
                         f"ranks one longer); expected {_shapes_text(expected)}, got {_shapes_text(shapes)}")
    d = sbp[0].dim
    starts, offset = {}, 0
    for r in placement.rank_list():
        starts[r] = offset
        offset += shapes[r][d]
    blocks = []
    for r in placement.rank_list():
        need = layout.local_box(global_shape, placement.hierarchy, sbp, placement.mesh_coord(r))
        for s in placement.rank_list():
            have = [(0, n) for n in global_shape]
            have[d] = (starts[s], starts[s] + shapes[s][d])
            part = layout.intersect(have, need)
            if part is not None:
                blocks.append((r, s, tuple(part)))
    me = get_rank()
    src_box = None
    if me in placement:
        src_box = [(0, n) for n in global_shape]
        src_box[d] = (starts[me], starts[me] + shapes[me][d])
    dst_box = layout.local_box(global_shape, placement.hierarchy, sbp, placement.mesh_coord(me)) if me in placement \
        else None
    union = tuple(sorted(placement.rank_list()))
    return Tensor(_redistribute(_contiguous(local), blocks, src_box, dst_box, union, dt, device(placement.type)),
                  global_shape, dt, placement, sbp)
