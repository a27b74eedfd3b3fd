"""Dispatch: check -> choose a signature -> box the inputs -> run the kernel -> wrap (+ record).

Decisions are cached per (op, placement, input SBPs, shapes, dtypes, static arguments), so
a repeated op costs a dictionary lookup before its kernel.
"""
import itertools

import numpy as np

from . import autograd
from . import dtype as _dtype
from .boxing import plan, run
from .env import get_rank
from .ops.registry import REGISTRY
from .tensor import Tensor


class Decision:
    """The signature chosen for one cache key, with what it needs at run time."""

    __slots__ = ("in_sbps", "out_sbps", "out_shapes", "out_dtypes", "plans", "multi")

    def __init__(self, in_sbps, out_sbps, out_shapes, out_dtypes, plans, multi):
        self.in_sbps, self.out_sbps, self.out_shapes = in_sbps, out_sbps, out_shapes
        self.out_dtypes, self.plans, self.multi = out_dtypes, plans, multi


_cache = {}


def _freeze(value):
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def _meta(opdef, tensors, static):
    """Output shapes and dtypes: the op's meta, or its kernel run on zero-stride stand-ins."""
    shapes = [t.shape for t in tensors]
    dtypes = [t.dtype for t in tensors]
    if opdef.meta is not None:
        out_shapes, out_dtypes = opdef.meta(shapes, dtypes, static)
    else:
        fakes = [np.lib.stride_tricks.as_strided(np.ones(1, d.np), s, (0,) * len(s)) for s, d in zip(shapes, dtypes)]
        with np.errstate(all="ignore"):
            out = opdef.kernel(*fakes, **static)
        outs = out if isinstance(out, tuple) else (out,)
        out_shapes = [np.shape(o) for o in outs]
        out_dtypes = [_dtype.to_dtype(np.asarray(o).dtype) for o in outs]
    return [tuple(s) for s in out_shapes], [_dtype.to_dtype(d) for d in out_dtypes]


def _decide(opdef, tensors, static):
    placement = tensors[0].placement
    try:
        out_shapes, out_dtypes = _meta(opdef, tensors, static)
    except (ValueError, IndexError, TypeError, np.exceptions.AxisError) as exc:
        shapes = ", ".join(str(t.shape) for t in tensors)
        raise type(exc)(f"{opdef.name}: {exc} (input shapes {shapes})") from None
    rows = opdef.rules([t.shape for t in tensors], out_shapes, static)
    current = [t.sbp for t in tensors]
    best, best_key = None, None
    for order, combo in enumerate(itertools.product(rows, repeat=placement.ndim)):
        in_sbps = [tuple(row[0][i] for row in combo) for i in range(len(tensors))]
        out_sbps = [tuple(row[1][j] for row in combo) for j in range(len(out_shapes))]
        plans = [plan(placement, t.sbp, placement, s, t.shape, t.dtype.itemsize) if s != t.sbp else None
                 for t, s in zip(tensors, in_sbps)]
        cost = sum(p.bytes for p in plans if p is not None)
        moved = sum(1 for s, c in zip(in_sbps, current) if s != c)
        key = (cost, moved, order)  # fewest bytes, then keep inputs as they are, then row order
        if best_key is None or key < best_key:
            best, best_key = Decision(in_sbps, out_sbps, out_shapes, out_dtypes, plans, None), key
    return best


def _check_placements(name, tensors):
    first = tensors[0]
    for t in tensors[1:]:
        if t.is_global != first.is_global:
            g, loc = (first, t) if first.is_global else (t, first)
            raise RuntimeError(f"{name}: cannot mix a global tensor (placement {g.placement}) with a local tensor "
                               f"(placement: none); convert the local one with to_global(placement, sbp)")
        if t.is_global and t.placement != first.placement:
            raise RuntimeError(f"{name}: inputs have different placements, {first.placement} and {t.placement}; "
                               f"move one with to_global(placement=...)")


def apply(name, tensors, static=None, multi=False):
    """Run op `name` on tensor inputs (local or global) with static keyword arguments."""
    opdef = REGISTRY[name]
    static = static or {}
    _check_placements(name, tensors)
    if not tensors[0].is_global:
        out = opdef.kernel(*[t._local for t in tensors], **static)
        outs = tuple(Tensor(np.asarray(o)) for o in (out if isinstance(out, tuple) else (out,)))
    else:
        outs = _apply_global(opdef, tensors, static)
    autograd.record(name, opdef.backward, tensors, outs, static)
    return outs if multi else outs[0]


def _apply_global(opdef, tensors, static):
    placement = tensors[0].placement
    key = (opdef.name, placement, tuple(t.sbp for t in tensors), tuple(t.shape for t in tensors),
           tuple(t.dtype.np for t in tensors), _freeze(static))
    decision = _cache.get(key)
    if decision is None:
        decision = _cache[key] = _decide(opdef, tensors, static)
    pieces = [t._local if p is None else run(p, t._local, t.dtype) for t, p in zip(tensors, decision.plans)]
    if placement.mesh_coord(get_rank()) is None:
        outs = [np.empty((0,) * max(1, len(s)), d.np) for s, d in zip(decision.out_shapes, decision.out_dtypes)]
    else:
        out = opdef.kernel(*pieces, **static)
        outs = [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]
        outs = [o if o.dtype == d.np else o.astype(d.np) for o, d in zip(outs, decision.out_dtypes)]
    return tuple(Tensor(o, s, d, placement, sbp) for o, s, d, sbp in
                 zip(outs, decision.out_shapes, decision.out_dtypes, decision.out_sbps))
