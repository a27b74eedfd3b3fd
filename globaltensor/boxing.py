"""Boxing: move a global tensor to another (placement, sbp) without changing its value.

A plan is a list of steps, each priced in the bytes it moves between ranks (summed over
ranks); candidates are compared and the cheapest wins. One mesh axis at a time, the 1-D
transitions are (k ranks along the axis, N the bytes of the value they share):

    S(i) -> S(i), B -> B, P -> P      nothing
    S(i) -> B      all_gather           (k-1) N   concatenate the pieces
    S(i) -> S(j)   all_to_all           (k-1) N/k each rank keeps its j-slice of every i-piece
    S(i) -> P      local                0         own piece in place, zeros elsewhere: sum = value
    B -> S(i)      local slice (view)   0
    B -> P         local                0         first rank keeps the value, others zeros
    P -> B         all_reduce           2(k-1) N
    P -> S(i)      reduce_scatter       (k-1) N

Nesting: split axes cut the tensor in mesh-axis order, so an axis is converted directly only
when no later axis splits a dimension the conversion touches; such later axes are gathered
first (last axis first) and split again afterwards (first axis first). Moves between
placements, and any layout in one all_to_all, go by the *overlap* route: every target rank
receives, from one holder each, the parts of its box that source pieces cover.
"""
import functools
import itertools
import math

import numpy as np

from . import layout
from .backends.devices import device, move
from .distributed.group import Group
from .env import get_rank
from .sbp import _Broadcast, _PartialSum, broadcast, normalize, partial_sum, split
from .tensor import Tensor



def _contiguous(x):
    """x as a C-contiguous array (numpy or cupy), keeping 0-d arrays 0-d."""
    return x if x.flags.c_contiguous else x.copy()

class Step:
    """One transition: `kind` on mesh axis `mesh_dim` (None for the overlap route)."""

    __slots__ = ("kind", "mesh_dim", "src", "dst", "bytes", "placement")

    def __init__(self, kind, mesh_dim, src, dst, nbytes, placement):
        self.kind, self.mesh_dim, self.src, self.dst = kind, mesh_dim, src, dst
        self.bytes, self.placement = int(nbytes), placement

    def __repr__(self):
        where = "" if self.mesh_dim is None else f" on mesh axis {self.mesh_dim}"
        return f"{self.kind}{where}: {_text(self.src)} -> {_text(self.dst)}, {self.bytes} bytes"


class Plan:
    """The steps converting (src placement, sbp) to (dst placement, sbp) for one shape."""

    def __init__(self, src_placement, src_sbp, dst_placement, dst_sbp, global_shape, itemsize, steps):
        self.src_placement, self.src_sbp = src_placement, src_sbp
        self.dst_placement, self.dst_sbp = dst_placement, dst_sbp
        self.global_shape, self.itemsize, self.steps = global_shape, itemsize, steps

    @property
    def bytes(self):
        return sum(s.bytes for s in self.steps)

    def explain(self):
        head = (f"{_text(self.src_sbp)} on {self.src_placement} -> {_text(self.dst_sbp)} on {self.dst_placement}, "
                f"shape {self.global_shape}: {self.bytes} bytes moved")
        return "\n".join([head] + [f"  {i + 1}. {s}" for i, s in enumerate(self.steps)] +
                         (["  (no communication: the layouts agree)"] if not self.steps else []))


def _text(sbp):
    return "(" + ", ".join(str(s) for s in sbp) + ")"


# --- planning ------------------------------------------------------------------------------

def _touched(s, t):
    return {x.dim for x in (s, t) if isinstance(x, split)}


def _axis_kind(s, t):
    if isinstance(s, split):
        return {split: "all_to_all", _Broadcast: "all_gather", _PartialSum: "split_to_partial"}[type(t)]
    if s is broadcast:
        return "slice" if isinstance(t, split) else "broadcast_to_partial"
    return "reduce_scatter" if isinstance(t, split) else "all_reduce"


_GROUP_BYTES = {"all_gather": lambda n, k: (k - 1) * n, "reduce_scatter": lambda n, k: (k - 1) * n,
                "all_reduce": lambda n, k: 2 * (k - 1) * n, "all_to_all": lambda n, k: (k - 1) * n / k}


def _axis_bytes(kind, placement, state, axis, global_shape, itemsize):
    """Bytes moved by `kind` along `axis`, over all groups (pieces estimated as even)."""
    cost = _GROUP_BYTES.get(kind)
    if cost is None:
        return 0
    shared = math.prod(global_shape) * itemsize  # the value one group shares
    for b, s in enumerate(state):
        if b != axis and isinstance(s, split):
            shared /= placement.hierarchy[b]
    return cost(shared, placement.hierarchy[axis]) * (placement.size // placement.hierarchy[axis])


def _plan_axes(placement, src, dst, global_shape, itemsize):
    """Steps along one mesh axis at a time.

    Phase 1, last axis first: axes holding S or P that must change are converted (through B
    when their target would cut a dim that an earlier changing axis touches), and split axes
    cutting such a dim are gathered. Phase 2, first axis first: the remaining local cuts.
    """
    state, steps = list(src), []
    changing = [a for a in range(len(src)) if src[a] != dst[a]]

    def convert(axis, target):
        kind = _axis_kind(state[axis], target)
        before = tuple(state)
        state[axis] = target
        steps.append(Step(kind, axis, before, tuple(state),
                          _axis_bytes(kind, placement, before, axis, global_shape, itemsize), placement))

    for axis in reversed(range(len(src))):
        held = set().union(*(_touched(src[a], dst[a]) for a in changing if a < axis))
        s, t = state[axis], dst[axis]
        cut_later = isinstance(s, split) and s.dim in held
        if s is broadcast or (s == t and not cut_later):
            continue
        target = broadcast if (isinstance(t, split) and t.dim in held) or (cut_later and t == s) else t
        convert(axis, target)
    for axis in range(len(src)):
        if state[axis] != dst[axis]:
            convert(axis, dst[axis])
    return steps


def _overlap_bytes(src_pl, src, dst_pl, dst, global_shape, itemsize):
    total = 0
    for r, s, box in _overlap_blocks(src_pl, src, dst_pl, dst, tuple(global_shape)):
        if r != s:
            total += math.prod(b - a for a, b in box) * itemsize
    return total


@functools.lru_cache(maxsize=4096)
def _overlap_blocks(src_pl, src, dst_pl, dst, global_shape):
    """(receiver, sender, global box) for every piece of data that must reach a receiver.

    Sources with partial_sum axes are not allowed here; broadcast axes of the source give
    several holders of one box: a receiver takes it from itself when it holds it, else from
    the holder picked by its own position (spreading the load)."""
    holders = {}
    for s_rank in src_pl.rank_list():
        coord = src_pl.mesh_coord(s_rank)
        box = tuple(layout.local_box(global_shape, src_pl.hierarchy, src, coord))
        holders.setdefault(box, []).append(s_rank)
    blocks = []
    for i, r in enumerate(dst_pl.rank_list()):
        need = layout.local_box(global_shape, dst_pl.hierarchy, dst, dst_pl.mesh_coord(r))
        for box, owners in holders.items():
            part = layout.intersect(box, need)
            if part is None:
                continue
            sender = r if r in owners else owners[i % len(owners)]
            blocks.append((r, sender, tuple(part)))
    return tuple(blocks)


def _without_partial(sbp):
    return tuple(broadcast if s is partial_sum else s for s in sbp)


def _cuts_first(placement, src, dst, global_shape, itemsize):
    """Free local cuts (B -> S) first, so that later collectives move less."""
    state, steps = list(src), []
    for axis in range(len(src)):
        t = dst[axis]
        later = {s.dim for s in state[axis + 1:] if isinstance(s, split)}
        if state[axis] is broadcast and isinstance(t, split) and t.dim not in later:
            before = tuple(state)
            state[axis] = t
            steps.append(Step("slice", axis, before, tuple(state), 0, placement))
    if not steps:
        return None
    return steps + _plan_axes(placement, tuple(state), dst, global_shape, itemsize)


def _resolved(sbp, ndim):
    """Ways to remove partial sums before a move: each P axis becomes B or S(d) on a dim that
    no other axis splits."""
    options = [[s] if s is not partial_sum else [broadcast] + [split(d) for d in range(ndim)] for s in sbp]
    for combo in itertools.product(*options):
        dims = [s.dim for s in combo if isinstance(s, split)]
        if len(dims) == len(set(dims)) or combo == tuple(_without_partial(sbp)):
            yield combo


def _overlap_route(src_placement, src_sbp, mid_src, dst_placement, dst_sbp, global_shape, itemsize):
    mid_dst = _without_partial(dst_sbp)
    route = _plan_axes(src_placement, src_sbp, mid_src, global_shape, itemsize)
    moved = _overlap_bytes(src_placement, mid_src, dst_placement, mid_dst, global_shape, itemsize)
    if moved or src_placement != dst_placement or mid_src != mid_dst:
        route.append(Step("redistribute", None, mid_src, mid_dst, moved, dst_placement))
    return route + _plan_axes(dst_placement, mid_dst, dst_sbp, global_shape, itemsize)


@functools.lru_cache(maxsize=4096)
def plan(src_placement, src_sbp, dst_placement, dst_sbp, global_shape, itemsize):
    """The cheapest Plan; on a tie the earlier candidate (axis by axis: native collectives)."""
    candidates = []
    if src_placement == dst_placement:
        candidates.append(_plan_axes(src_placement, src_sbp, dst_sbp, global_shape, itemsize))
        candidates.append(_cuts_first(src_placement, src_sbp, dst_sbp, global_shape, itemsize))
    for mid_src in _resolved(src_sbp, len(global_shape)):
        candidates.append(_overlap_route(src_placement, src_sbp, mid_src, dst_placement, dst_sbp, global_shape,
                                         itemsize))
    best = min((c for c in candidates if c is not None), key=lambda steps: sum(s.bytes for s in steps))
    return Plan(src_placement, src_sbp, dst_placement, dst_sbp, global_shape, itemsize, best)


# --- running a plan on this rank's piece --------------------------------------------------

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


# --- the public conversions ---------------------------------------------------------------

def convert(x, placement, sbp):
    """x in (placement, sbp) (None: keep): from a local tensor, or between layouts of a global one.
    Not differentiable (ops/conversion.py's to_global is); returns x itself when nothing changes."""
    from .placement import placement as Placement
    if placement is not None and not isinstance(placement, Placement):
        raise TypeError(f"placement must be a gt.placement, got {placement!r}")
    if x.is_local:
        if placement is None or sbp is None:
            raise ValueError("to_global on a local tensor needs both placement and sbp")
        return from_local(move(x._local, device(placement.type)), placement, sbp)
    placement = placement or x.placement
    if sbp is None:
        if placement.ndim != x.placement.ndim:
            raise ValueError(f"sbp is needed: the new placement has {placement.ndim} mesh axes, the tensor's "
                             f"{x.placement.ndim}")
        sbp = x.sbp
    sbp = normalize(sbp, placement.ndim, x.ndim)
    if placement == x.placement and sbp == x.sbp:
        return x
    if placement.type != x.placement.type:
        return _across_devices(x, placement, sbp)
    p = plan(x.placement, x.sbp, placement, sbp, x.shape, x.dtype.itemsize)
    return Tensor(run(p, x._local, x.dtype), x.shape, x.dtype, placement, sbp)


def _across_devices(x, placement, sbp):
    """cpu <-> cuda: the boxing runs on the cpu side (before an upload, after a download), so
    each rank only moves its own piece between host and device."""
    from .placement import placement as Placement
    if placement.type == "cpu":
        on_host = Placement("cpu", x.placement.ranks)
        x = Tensor(device(x.placement.type).to_host(x._local), x.shape, x.dtype, on_host, x.sbp)
        return convert(x, placement, sbp)
    boxed = convert(x, Placement("cpu", placement.ranks), sbp)
    return Tensor(device(placement.type).from_host(boxed._local), x.shape, x.dtype, placement, sbp)


def full_value(x):
    """The whole value on every rank, as a new numpy array (collective)."""
    from .placement import placement as Placement
    everyone = Placement(x.placement.type, list(range(_world_size())))
    p = plan(x.placement, x.sbp, everyone, (broadcast,), x.shape, x.dtype.itemsize)
    value = run(p, x._local, x.dtype)
    dev = device(x.placement.type)
    return value.copy() if dev.is_host else dev.to_host(value)


def _world_size():
    from .env import get_world_size
    return get_world_size()


_META = 20  # in placement, ndim, dtype index, then up to 17 dims


def _exchange_meta(array, placement):
    """Every rank's (in placement, ndim, dtype, shape): one small all_gather over all ranks, by the
    placement's device (so a cuda job spanning machines exchanges it through NCCL)."""
    from . import dtype as _dtype
    from .distributed.group import world_group
    if array.ndim > _META - 3:
        raise ValueError(f"at most {_META - 3} dimensions are supported, got {array.ndim}")
    row = np.zeros(_META, np.int64)
    row[0] = get_rank() in placement
    row[1] = array.ndim
    row[2] = _dtype.ALL.index(_dtype.of_array(array))
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
    from . import dtype as _dtype
    sbp = normalize(sbp, placement.ndim, array.ndim)
    meta = _exchange_meta(array, placement)
    names = {(shape, code) for shape, code in meta.values()}
    ndims = {len(shape) for shape, _ in names}
    codes = {code for _, code in names}
    if len(ndims) > 1 or len(codes) > 1:
        detail = ", ".join(f"rank {r}: shape {s} {_dtype.ALL[c].name}" for r, (s, c) in sorted(meta.items()))
        raise ValueError(f"to_global: the local pieces must have the same number of dims and dtype; got {detail}")
    dt = _dtype.ALL[codes.pop()]
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
