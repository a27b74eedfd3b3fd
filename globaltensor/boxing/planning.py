"""What a conversion costs and which steps it takes: plans, priced in bytes.

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

from .. import layout
from ..sbp import _Broadcast, _PartialSum, broadcast, partial_sum, split, without_partial


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

    __str__ = explain

    def __repr__(self):
        kinds = ", ".join(s.kind for s in self.steps) or "no communication"
        return (f"Plan({_text(self.src_sbp)} -> {_text(self.dst_sbp)}, shape {self.global_shape}: {kinds}; "
                f"{self.bytes} bytes)")


def _text(sbp):
    return "(" + ", ".join(str(s) for s in sbp) + ")"


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


def reduction_bytes(placement, sbp, axis, global_shape, itemsize):
    """What reducing a value partial on mesh axis `axis` costs (an all_reduce there)."""
    return _axis_bytes("all_reduce", placement, sbp, axis, global_shape, itemsize)


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
        if len(dims) == len(set(dims)) or combo == tuple(without_partial(sbp)):
            yield combo


def _overlap_route(src_placement, src_sbp, mid_src, dst_placement, dst_sbp, global_shape, itemsize):
    mid_dst = without_partial(dst_sbp)
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
