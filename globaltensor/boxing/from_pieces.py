"""A global tensor from every rank's local piece (to_global on a local tensor)."""
import hashlib

from .. import layout
from ..backends.devices import device
from ..env import get_rank
from ..errors import PlacementError, ShapeError
from ..sbp import broadcast, normalize, split
from ..tensor import Tensor
from .execution import _alloc, _contiguous, _group, _redistribute
from .metadata import gather_pieces


def from_local(array, placement, sbp):
    """A global tensor from every rank's piece (SPEC §3): split pieces concatenate (lengths may
    differ: they are rebalanced to the even layout), broadcast takes the first rank's data
    along each broadcast axis, partial_sum pieces add up. Mismatches raise on every rank."""
    from ..distributed.group import world_group
    sbp = normalize(sbp, placement.ndim, array.ndim)
    # every rank's (shape, dtype), ranks outside the placement included: they learn the global
    # shape; and a digest of the (placement, sbp) it passed, so ranks that differ are named
    digest = _digest(placement, sbp)
    found = gather_pieces([array] if get_rank() in placement else None, placement.type, world_group(),
                          tag=digest, what="to_global", everyone=True)
    _check_same_layout(found, digest, placement, sbp)
    meta = {r: pieces[0] for r, (_, pieces) in found.items() if pieces}
    ndims = {len(shape) for shape, _ in meta.values()}
    dtypes = {dt.name for _, dt in meta.values()}
    if len(ndims) > 1 or len(dtypes) > 1:
        detail = ", ".join(f"rank {r}: shape {s} {dt.name}" for r, (s, dt) in sorted(meta.items()))
        raise ValueError(f"to_global: the local pieces must have the same number of dims and dtype; got {detail}")
    dt = next(iter(meta.values()))[1]
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


def _digest(placement, sbp):
    """A 63-bit digest of (placement, sbp), the same on every rank that passed the same ones."""
    text = f"{placement.type}|{placement.ranks.tolist()}|{','.join(map(str, sbp))}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1


def _check_same_layout(found, digest, placement, sbp):
    """Raise on every rank when the ranks passed different placements or sbp to to_global."""
    groups = {}
    for r, (tag, _) in found.items():
        groups.setdefault(tag, []).append(r)
    if len(groups) > 1:
        mine = sorted(groups[digest])
        others = "; ".join(f"ranks {sorted(rs)}" for t, rs in sorted(groups.items(), key=lambda kv: min(kv[1]))
                           if t != digest)
        sbp_text = "(" + ", ".join(map(str, sbp)) + ")"
        raise PlacementError(f"Inconsistent parallel description: to_global: the ranks passed different placements or sbp (every rank must pass the same): "
                         f"ranks {mine} passed {placement} with sbp {sbp_text}, and these passed something else: "
                         f"{others}")


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
                raise ShapeError(f"to_global: the pieces split along dim {d} do not add up to one length: {totals}")
            global_shape[d] = totals.popitem()[1]
        else:
            seen = {shapes[int(placement.ranks[c])][d] for c in reps}
            if len(seen) > 1:
                odd = min(int(placement.ranks[c]) for c in reps if shapes[int(placement.ranks[c])][d] != ref[d])
                where = ", ".join(str(s.dim) for s in sbp if isinstance(s, split)) or "none"
                raise ShapeError(f"Sizes of tensors must match except in dimension {where}. Expected size {ref[d]} but "
                                 f"got size {shapes[odd][d]} for tensor on rank {odd}! (to_global: dim {d} is not "
                                 f"split, so every piece needs the same length there; got {sorted(seen)} "
                                 f"({_shapes_text(shapes)}))")
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
