"""The kinds of boxing step, one table (KINDS): for each kind the 1-D transition it makes, the
collective it issues, the bytes it moves and how it runs.

Planning picks kinds and prices them from their rows, running a plan calls each step's runner,
and printing (plans, graph programs) shows the row's name and counts its collective. Along one
mesh axis (k ranks, N the bytes of the value they share):

    S(i) -> B      all_gather           (k-1) N   concatenate the pieces
    S(i) -> S(j)   all_to_all           (k-1) N/k each rank keeps its j-slice of every i-piece
    S(i) -> P      split_to_partial     0         own piece in place, zeros elsewhere: sum = value
    B -> S(i)      slice (a view)       0
    B -> P         broadcast_to_partial 0         first rank keeps the value, others zeros
    P -> B         all_reduce           2(k-1) N
    P -> S(i)      reduce_scatter       (k-1) N

`redistribute` is the move between placements (or any layout in one all_to_all): every target rank
receives, from one holder each, the parts of its box that source pieces cover. `split_to_partial_moved`
is S -> P onto another 1-D placement, as OneFlow's naive S -> P: each source piece stays on its rank
when that rank is a target, else goes to target number (source index % targets); every target holds
zeros elsewhere, so the pieces still sum to the value.
"""
import functools
import math

import numpy as np

from .. import layout
from ..backends.devices import device
from ..env import get_rank
from ..sbp import broadcast, split
from .execution import _alloc, _block_shapes, _contiguous, _group, _pack, _redistribute, _take, _unpack


class Kind:
    """One row: `name` (as printed), `transition` (the (from, to) SBP letters it converts along one
    mesh axis; None for the move between placements), `collective` (what it issues; None: local),
    `bytes(src_placement, src, dst_placement, dst, mesh_dim, global_shape, itemsize)` (over all
    ranks) and `run(x, step, plan, dt)` (this rank's piece after the step)."""

    __slots__ = ("name", "transition", "collective", "bytes", "run")

    def __init__(self, name, transition, collective, nbytes, run):
        self.name, self.transition, self.collective, self.bytes, self.run = name, transition, collective, nbytes, run

    def __repr__(self):
        return f"Kind({self.name})"

    def __str__(self):
        return self.name


def _letter(s):
    """S, B or P: the SBP's kind, as `transition` spells it."""
    return "S" if isinstance(s, split) else "B" if s is broadcast else "P"


# --- bytes -------------------------------------------------------------------------------------

def _free(*_):
    return 0


def _per_group(cost):
    """Bytes of a collective along one mesh axis, over all its groups (pieces estimated as even),
    from cost(n, k): what one group of k ranks sharing n bytes moves."""
    def nbytes(placement, src, _dst_placement, _dst, axis, global_shape, itemsize):
        shared = math.prod(global_shape) * itemsize  # the value one group shares
        for b, s in enumerate(src):
            if b != axis and isinstance(s, split):
                shared /= placement.hierarchy[b]
        return cost(shared, placement.hierarchy[axis]) * (placement.size // placement.hierarchy[axis])
    return nbytes


def _overlap_bytes(src_pl, src, dst_pl, dst, _axis, global_shape, itemsize):
    total = 0
    for r, s, box in overlap_blocks(src_pl, src, dst_pl, dst, tuple(global_shape)):
        if r != s:
            total += math.prod(b - a for a, b in box) * itemsize
    return total


@functools.lru_cache(maxsize=4096)
def overlap_blocks(src_pl, src, dst_pl, dst, global_shape):
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


@functools.lru_cache(maxsize=1024)
def split_to_partial_blocks(src_pl, src, dst_pl, global_shape):
    """(receiver, sender, global box) of S -> P onto another 1-D placement (OneFlow's naive S -> P:
    a piece stays where its rank is a target, else goes to target (source index % targets))."""
    targets = dst_pl.rank_list()
    blocks = []
    for i, s_rank in enumerate(src_pl.rank_list()):
        box = tuple(layout.local_box(global_shape, src_pl.hierarchy, src, src_pl.mesh_coord(s_rank)))
        if any(a == b for a, b in box):
            continue  # an empty piece (uneven split) adds nothing to the sum
        receiver = s_rank if s_rank in targets else targets[i % len(targets)]
        blocks.append((receiver, s_rank, box))
    return tuple(blocks)


def _split_to_partial_moved_bytes(src_pl, src, dst_pl, _dst, _axis, global_shape, itemsize):
    blocks = split_to_partial_blocks(src_pl, src, dst_pl, tuple(global_shape))
    return sum(math.prod(b - a for a, b in box) * itemsize for r, s, box in blocks if r != s)


# --- runners -----------------------------------------------------------------------------------

class _Axis:
    """What a runner along one mesh axis reads: the SBPs s -> t there, k ranks along it, this
    rank's index idx among them, the device, and the group of those ranks."""

    __slots__ = ("s", "t", "k", "idx", "dt", "dev", "_step", "_coord", "_shape")

    def __init__(self, step, coord, global_shape, dt):
        axis = step.mesh_dim
        self.s, self.t = step.src[axis], step.dst[axis]
        self.k, self.idx = step.placement.hierarchy[axis], coord[axis]
        self.dt, self.dev = dt, device(step.placement.type)
        self._step, self._coord, self._shape = step, coord, global_shape

    def parent_len(self, d):
        """The extent of dim d shared by the ranks along this axis."""
        step = self._step
        lo, hi = layout.parent_extent(self._shape[d], step.placement.hierarchy, step.src, self._coord, d,
                                      step.mesh_dim)
        return hi - lo

    def group(self):
        return _group(self._step.placement.axis_ranks(self._step.mesh_dim, self._coord))


def _along_axis(fn):
    """A runner of fn(x, _Axis) along the step's mesh axis; ranks outside the placement keep x."""
    def run(x, step, plan, dt):
        coord = step.placement.mesh_coord(get_rank())
        return x if coord is None else fn(x, _Axis(step, coord, plan.global_shape, dt))
    return run


@_along_axis
def _slice(x, a):
    return _take(x, a.t.dim, *layout.split_range(x.shape[a.t.dim], a.k, a.idx))


@_along_axis
def _keep_on_first(x, a):
    return x if a.idx == 0 else np.zeros_like(x)


@_along_axis
def _pad_with_zeros(x, a):
    shape = list(x.shape)
    shape[a.s.dim] = a.parent_len(a.s.dim)
    out = _alloc(shape, a.dt, a.dev)
    out[...] = 0
    lo, hi = layout.split_range(shape[a.s.dim], a.k, a.idx)
    _take(out, a.s.dim, lo, hi)[...] = x
    return out


@_along_axis
def _all_reduce(x, a):
    out = _alloc(x.shape, a.dt, a.dev)
    a.dev.collectives.all_reduce(_contiguous(x), group=a.group(), out=out)
    return out


@_along_axis
def _all_gather(x, a):
    shapes = _block_shapes(x.shape, a.s.dim, layout.split_sizes(a.parent_len(a.s.dim), a.k))
    flat = a.dev.collectives.all_gather(_contiguous(x).reshape(-1), group=a.group(),
                                        sizes=[math.prod(b) for b in shapes])
    return _unpack(flat, shapes, a.s.dim, a.dt, a.dev)


@_along_axis
def _reduce_scatter(x, a):
    d = a.t.dim
    sizes = layout.split_sizes(x.shape[d], a.k)
    blocks = _block_shapes(x.shape, d, sizes)
    packed = _pack(x, d, sizes, a.dt, a.dev)
    return a.dev.collectives.reduce_scatter(packed, group=a.group(),
                                            sizes=[math.prod(b) for b in blocks]).reshape(blocks[a.idx])


@_along_axis
def _all_to_all(x, a):
    """S(i) -> S(j): send member q my j-slice q; stack the i-pieces received."""
    i, j, k, idx = a.s.dim, a.t.dim, a.k, a.idx
    i_sizes, j_sizes = layout.split_sizes(a.parent_len(i), k), layout.split_sizes(a.parent_len(j), k)
    send = _pack(x, j, j_sizes, a.dt, a.dev)
    recv_shapes = [tuple(i_sizes[p] if d == i else (j_sizes[idx] if d == j else x.shape[d]) for d in range(x.ndim))
                   for p in range(k)]
    received = a.dev.collectives.all_to_all(send, [math.prod(b) for b in _block_shapes(x.shape, j, j_sizes)],
                                            group=a.group(), recv_sizes=[math.prod(b) for b in recv_shapes])
    return _unpack(received, recv_shapes, i, a.dt, a.dev)


def _move(x, step, p, dt):
    """Every block of the overlap route from its sender to its receiver, in one all_to_all."""
    me = get_rank()
    src_coord, dst_coord = p.src_placement.mesh_coord(me), p.dst_placement.mesh_coord(me)
    src_box = layout.local_box(p.global_shape, p.src_placement.hierarchy, step.src, src_coord) if src_coord else None
    dst_box = layout.local_box(p.global_shape, p.dst_placement.hierarchy, step.dst, dst_coord) if dst_coord else None
    blocks = overlap_blocks(p.src_placement, step.src, p.dst_placement, step.dst, p.global_shape)
    union = tuple(sorted(set(p.src_placement.rank_list()) | set(p.dst_placement.rank_list())))
    return _redistribute(x, blocks, src_box, dst_box, union, dt, device(p.dst_placement.type))


def _move_to_partial(x, step, p, dt):
    """S -> P onto another 1-D placement: each piece to its receiver, zeros around it."""
    me = get_rank()
    src_coord, dst_coord = p.src_placement.mesh_coord(me), p.dst_placement.mesh_coord(me)
    src_box = layout.local_box(p.global_shape, p.src_placement.hierarchy, step.src, src_coord) if src_coord else None
    dst_box = tuple((0, n) for n in p.global_shape) if dst_coord else None
    blocks = split_to_partial_blocks(p.src_placement, step.src, p.dst_placement, p.global_shape)
    union = tuple(sorted(set(p.src_placement.rank_list()) | set(p.dst_placement.rank_list())))
    return _redistribute(x, blocks, src_box, dst_box, union, dt, device(p.dst_placement.type), zeros=True)


# --- the table ---------------------------------------------------------------------------------

KINDS = {kind.name: kind for kind in (
    #    name                    transition  collective        bytes (n shared by k ranks)            run
    Kind("slice",                ("B", "S"), None,             _free,                                 _slice),
    Kind("broadcast_to_partial", ("B", "P"), None,             _free,                                 _keep_on_first),
    Kind("split_to_partial",     ("S", "P"), None,             _free,                                 _pad_with_zeros),
    Kind("all_gather",           ("S", "B"), "all_gather",     _per_group(lambda n, k: (k - 1) * n),  _all_gather),
    Kind("all_to_all",           ("S", "S"), "all_to_all",     _per_group(lambda n, k: (k - 1) * n / k), _all_to_all),
    Kind("reduce_scatter",       ("P", "S"), "reduce_scatter", _per_group(lambda n, k: (k - 1) * n),  _reduce_scatter),
    Kind("all_reduce",           ("P", "B"), "all_reduce",     _per_group(lambda n, k: 2 * (k - 1) * n), _all_reduce),
    Kind("redistribute",         None,       "all_to_all",     _overlap_bytes,                        _move),
    Kind("split_to_partial_moved", None,     "all_to_all",     _split_to_partial_moved_bytes,         _move_to_partial),
)}
_BY_TRANSITION = {kind.transition: kind for kind in KINDS.values() if kind.transition is not None}
SLICE, ALL_REDUCE, REDISTRIBUTE = KINDS["slice"], KINDS["all_reduce"], KINDS["redistribute"]
SPLIT_TO_PARTIAL_MOVED = KINDS["split_to_partial_moved"]


def along_axis(s, t):
    """The kind converting s to t along one mesh axis (s != t)."""
    return _BY_TRANSITION[_letter(s), _letter(t)]

