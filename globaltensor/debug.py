"""Observability: count the collectives a block of code issues, explain a conversion, draw a layout."""
import contextlib

from . import layout
from .distributed import collectives as _collectives
from .sbp import normalize, partial_sum


class CollectiveCount(dict):
    """Collectives issued by this rank, by kind ({"all_gather": 1}); `.bytes` by kind too
    (the bytes this rank passed in)."""

    def __init__(self):
        super().__init__()
        self.bytes = {}

    def add(self, kind, nbytes, group=None):
        self[kind] = self.get(kind, 0) + 1
        self.bytes[kind] = self.bytes.get(kind, 0) + int(nbytes)

    @property
    def total(self):
        return sum(self.values())


@contextlib.contextmanager
def _observing(observer):
    """Tell `observer` (an object with add(kind, nbytes, group)) of each collective inside."""
    _collectives._observers.append(observer)
    try:
        yield observer
    finally:  # by identity: two counters that counted the same collectives are equal
        observers = _collectives._observers
        del observers[next(i for i, o in enumerate(observers) if o is observer)]


def count_collectives():
    """Count the collectives this rank runs inside the with block, by kind.

    Examples:
        >>> with gt.debug.count_collectives() as c:
        ...     y = (x @ w).to_global(sbp=gt.sbp.broadcast)   # x S(1), w S(0): partial, then reduced
        >>> c
        {'all_reduce': 1}
    """
    return _observing(CollectiveCount())


class CollectiveTrace(list):
    """Collectives issued by this rank, in order: (kind, group ranks, bytes passed in)."""

    def add(self, kind, nbytes, group=None):
        self.append((kind, _ranks_of(group), int(nbytes)))


def _ranks_of(group):
    from .distributed.group import Group
    from .env import get_world_size
    if group is None:
        return tuple(range(get_world_size()))
    return tuple(group.ranks) if isinstance(group, Group) else tuple(int(r) for r in group)


def trace_collectives():
    """with gt.debug.trace_collectives() as t: ...; then t lists (kind, ranks, bytes) in order. Every
    member of a group must issue the same kinds on it in the same order (SPMD): comparing the
    ranks' traces finds where a program diverges."""
    return _observing(CollectiveTrace())


def device_paths():
    """How often each GPU path ran in this process, as a dict ("cublaslt.linear": 3,
    "ipc.all_reduce": 2, "host.all_gather": 1, "cupy.matmul": 1, ...): kernels by library and
    name, collectives by transport ("none" when a group of one or an empty array moved nothing).
    Compare two snapshots to see what a block of code ran."""
    from .backends.devices import PATHS
    return dict(PATHS)


def clear_caches():
    """Empty the caches of decided ops, boxing plans, attention masks, micro-batch
    shards, collectives' call plans and gradient-bucket buffers (each is bounded; this frees them now). Results do not
    change: each cache holds pure functions of its keys."""
    from . import dispatch, grad_buckets
    from .boxing import planning, steps
    from .ops import attention
    from .pipeline import microbatch
    from .distributed import call_plans
    dispatch._cache.clear()
    grad_buckets._flat_cache.clear()
    call_plans.clear()
    for cached in (planning.plan, steps.overlap_blocks, attention._future, microbatch._dim0_shards):
        cached.cache_clear()


def signature(name, *tensors, **static):
    """The SBP signature op `name` takes for these global inputs (deciding it, running nothing;
    every rank must call it: a decision may exchange shapes).

    Examples:
        >>> gt.debug.signature("matmul", x, w)    # x split(0), w broadcast
        Signature(S(0), B -> S(0))
    """
    from .dispatch import decision_for
    from .registry import REGISTRY
    return decision_for(REGISTRY[name], tensors, static).signature


def explain(x, sbp=None, placement=None, file=None):
    """Print (and return) the plan that x.to_global(placement, sbp) would use, with its cost."""
    from .boxing import plan
    if not x.is_global:
        raise ValueError("explain needs a global tensor")
    placement = placement or x.placement
    sbp = normalize(sbp if sbp is not None else x.sbp, placement.ndim, x.ndim)
    p = plan(x.placement, x.sbp, placement, sbp, x.shape, x.dtype.itemsize)
    print(p.explain(), file=file)
    return p


def layout_text(x):
    """Which rank holds which block of a 1-D or 2-D global tensor, as text."""
    if not x.is_global:
        raise ValueError("visualize needs a global tensor")
    if x.ndim not in (1, 2):
        raise ValueError(f"visualize draws 1-D and 2-D tensors; this one has shape {x.shape}")
    pl, sbp = x.placement, x.sbp
    boxes = {r: layout.local_box(x.shape, pl.hierarchy, sbp, pl.mesh_coord(r)) for r in pl.rank_list()}
    empty = [r for r, box in boxes.items() if any(b == a for a, b in box)]
    cuts = [sorted({a for box in boxes.values() for a, _ in [box[d]]} | {x.shape[d]}) for d in range(x.ndim)]
    partial = any(s is partial_sum for s in sbp)
    lines = [f"{tuple(x.shape)} on {pl} as ({', '.join(str(s) for s in sbp)})"
             + ("; P: the value is the sum over the ranks listed" if partial else "")]
    rows = list(zip(cuts[0][:-1], cuts[0][1:])) if x.ndim == 2 else [(0, 1)]
    cols = list(zip(cuts[-1][:-1], cuts[-1][1:]))
    cells = []
    for r0, r1 in rows:
        row = []
        for c0, c1 in cols:
            cell = (r0, r1, c0, c1) if x.ndim == 2 else (c0, c1)
            holders = [r for r, box in boxes.items() if r not in empty and _covers(box, cell, x.ndim)]
            row.append("ranks " + ",".join(map(str, holders)) if len(holders) > 1 else f"rank {holders[0]}"
                       if holders else "-")
        cells.append(row)
    width = max(len(c) for row in cells for c in row)
    header = "".join(f"[{c0}:{c1})".center(width + 3) for c0, c1 in cols)
    lines.append((" " * 12 if x.ndim == 2 else "") + header)
    for (r0, r1), row in zip(rows, cells):
        label = f"[{r0}:{r1})".ljust(12) if x.ndim == 2 else ""
        lines.append(label + "".join(f"| {c.ljust(width)} " for c in row) + "|")
    if empty:
        lines.append(f"empty pieces: rank(s) {empty}")
    return "\n".join(lines)


def _covers(box, cell, ndim):
    if ndim == 1:
        return box[0][0] <= cell[0] and cell[1] <= box[0][1]
    return box[0][0] <= cell[0] and cell[1] <= box[0][1] and box[1][0] <= cell[2] and cell[3] <= box[1][1]


def visualize(x):
    """Print which rank holds which block of a 1-D or 2-D global tensor (rich when installed)."""
    text = layout_text(x)
    try:
        from rich.console import Console
        Console().print(text, highlight=False)
    except ImportError:
        print(text)
    return text


__all__ = ["count_collectives", "explain", "visualize", "layout_text", "device_paths", "clear_caches"]
