"""What a conversion costs and which steps it takes: plans, priced in bytes.

A plan is a list of steps, each priced in the bytes it moves between ranks (summed over
ranks); candidates are compared and the cheapest wins. One mesh axis at a time, each change
S -> B, S(i) -> S(j), P -> S, ... is one kind of step, from the table of boxing/steps.py (which
gives its price and its runner); S(i) -> S(i), B -> B and P -> P need nothing.

Nesting: split axes cut the tensor in mesh-axis order, so an axis is converted directly only
when no later axis splits a dimension the conversion touches; such later axes are gathered
first (last axis first) and split again afterwards (first axis first). Moves between
placements, and any layout in one all_to_all, go by the *overlap* route: every target rank
receives, from one holder each, the parts of its box that source pieces cover.
"""
import functools
import itertools

from ..sbp import broadcast, partial_sum, split, without_partial
from . import network
from .steps import ALL_REDUCE, REDISTRIBUTE, SLICE, SPLIT_TO_PARTIAL_MOVED, along_axis


class Step:
    """One transition: `kind` (a row of boxing/steps.py's KINDS) on mesh axis `mesh_dim` (None for
    the overlap route); `placement` is where it ends, `src_placement` where it starts."""

    __slots__ = ("kind", "mesh_dim", "src", "dst", "bytes", "placement", "src_placement")

    def __init__(self, kind, mesh_dim, src, dst, nbytes, placement, src_placement=None):
        self.kind, self.mesh_dim, self.src, self.dst = kind, mesh_dim, src, dst
        self.bytes, self.placement = int(nbytes), placement
        self.src_placement = placement if src_placement is None else src_placement

    def __repr__(self):
        where = "" if self.mesh_dim is None else f" on mesh axis {self.mesh_dim}"
        return f"{self.kind.name}{where}: {_text(self.src)} -> {_text(self.dst)}, {self.bytes} bytes"


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
        kinds = ", ".join(s.kind.name for s in self.steps) or "no communication"
        return (f"Plan({_text(self.src_sbp)} -> {_text(self.dst_sbp)}, shape {self.global_shape}: {kinds}; "
                f"{self.bytes} bytes)")


def _text(sbp):
    return "(" + ", ".join(str(s) for s in sbp) + ")"


def _touched(s, t):
    return {x.dim for x in (s, t) if isinstance(x, split)}


def reduction_bytes(placement, sbp, axis, global_shape, itemsize):
    """What reducing a value partial on mesh axis `axis` costs (an all_reduce there)."""
    return ALL_REDUCE.bytes(placement, sbp, placement, sbp, axis, global_shape, itemsize)


def _plan_axes(placement, src, dst, global_shape, itemsize):
    """Steps along one mesh axis at a time.

    Phase 1, last axis first: axes holding S or P that must change are converted (through B
    when their target would cut a dim that an earlier changing axis touches), and split axes
    cutting such a dim are gathered. Phase 2, first axis first: the remaining local cuts.
    """
    state, steps = list(src), []
    changing = [a for a in range(len(src)) if src[a] != dst[a]]

    def convert(axis, target):
        kind = along_axis(state[axis], target)
        before = tuple(state)
        state[axis] = target
        after = tuple(state)
        nbytes = kind.bytes(placement, before, placement, after, axis, global_shape, itemsize)
        steps.append(Step(kind, axis, before, after, nbytes, placement))

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


def _cuts_first(placement, src, dst, global_shape, itemsize):
    """Free local cuts (B -> S) first, so that later collectives move less."""
    state, steps = list(src), []
    for axis in range(len(src)):
        t = dst[axis]
        later = {s.dim for s in state[axis + 1:] if isinstance(s, split)}
        if state[axis] is broadcast and isinstance(t, split) and t.dim not in later:
            before = tuple(state)
            state[axis] = t
            steps.append(Step(SLICE, axis, before, tuple(state), 0, placement))
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
    moved = REDISTRIBUTE.bytes(src_placement, mid_src, dst_placement, mid_dst, None, global_shape, itemsize)
    if moved or src_placement != dst_placement or mid_src != mid_dst:
        route.append(Step(REDISTRIBUTE, None, mid_src, mid_dst, moved, dst_placement, src_placement))
    return route + _plan_axes(dst_placement, mid_dst, dst_sbp, global_shape, itemsize)


def _split_to_partial_moved(src_placement, src_sbp, dst_placement, dst_sbp):
    return (src_placement != dst_placement and src_placement.ndim == dst_placement.ndim == 1
            and isinstance(src_sbp[0], split) and dst_sbp[0] is partial_sum)


def plan(src_placement, src_sbp, dst_placement, dst_sbp, global_shape, itemsize):
    """The cheapest Plan; on a tie the earlier candidate (axis by axis: native collectives).
    S -> P onto another 1-D placement is OneFlow's layout, not a price: each rank keeps its piece.
    On a job spanning hosts a byte between hosts costs more (boxing/network.py)."""
    return _plan(src_placement, src_sbp, dst_placement, dst_sbp, global_shape, itemsize, network.topology())


plan.cache_clear = lambda: _plan.cache_clear()


@functools.lru_cache(maxsize=4096)
def _plan(src_placement, src_sbp, dst_placement, dst_sbp, global_shape, itemsize, hosts):
    if _split_to_partial_moved(src_placement, src_sbp, dst_placement, dst_sbp):
        nbytes = SPLIT_TO_PARTIAL_MOVED.bytes(src_placement, src_sbp, dst_placement, dst_sbp, None, global_shape,
                                              itemsize)
        step = Step(SPLIT_TO_PARTIAL_MOVED, None, src_sbp, dst_sbp, nbytes, dst_placement, src_placement)
        return Plan(src_placement, src_sbp, dst_placement, dst_sbp, global_shape, itemsize, [step])
    candidates = []
    if src_placement == dst_placement:
        candidates.append(_plan_axes(src_placement, src_sbp, dst_sbp, global_shape, itemsize))
        candidates.append(_cuts_first(src_placement, src_sbp, dst_sbp, global_shape, itemsize))
    for mid_src in _resolved(src_sbp, len(global_shape)):
        candidates.append(_overlap_route(src_placement, src_sbp, mid_src, dst_placement, dst_sbp, global_shape,
                                         itemsize))
    best = min((c for c in candidates if c is not None),
               key=lambda steps: network.plan_cost(steps, global_shape, itemsize, hosts))
    return Plan(src_placement, src_sbp, dst_placement, dst_sbp, global_shape, itemsize, best)
