"""Dispatch: check -> choose a signature -> box the inputs -> run the kernel -> wrap (+ record).

Decisions are cached per (op, placement, input SBPs, shapes, dtypes, static arguments), so
a repeated op costs a dictionary lookup before its kernel.
"""
import functools
import itertools

import numpy as np

from . import autograd
from . import dtype as _dtype
from .backends.devices import device, of_array
from .boxing import plan, run
from .env import get_rank
from .ops.registry import REGISTRY
from .tensor import Layout, Tensor


class Decision:
    """The signature chosen for one cache key, with what it needs at run time."""

    __slots__ = ("in_sbps", "out_sbps", "out_shapes", "out_dtypes", "plans", "out_layouts", "participates",
                 "single", "device")

    def __init__(self, in_sbps, out_sbps, out_shapes, out_dtypes, plans):
        self.in_sbps, self.out_sbps, self.out_shapes = in_sbps, out_sbps, out_shapes
        self.out_dtypes, self.plans = out_dtypes, plans
        self.out_layouts, self.participates, self.single = None, True, len(out_shapes) == 1
        self.device = None


_cache = {}


def _freeze(value):
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def _static_key(static):
    """The static arguments as a hashable key: their items when hashable (the common case)."""
    key = tuple(static.items())
    try:
        hash(key)
        return key
    except TypeError:
        return _freeze(static)


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
            best, best_key = Decision(in_sbps, out_sbps, out_shapes, out_dtypes, plans), key
    best.out_layouts = [Layout.of(sh, dt, placement, sbp) for sh, dt, sbp in zip(out_shapes, out_dtypes, best.out_sbps)]
    best.participates = placement.mesh_coord(get_rank()) is not None
    best.device = device(placement.type)
    if all(p is None for p in plans):
        best.plans = None
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


def apply(name, tensors, static=None, multi=False, out=None, order=None):
    """Run op `name` on tensor inputs (local or global) with static keyword arguments. `out` and
    `order` are this rank's hints to ops registered takes_hints (an array the kernel may write
    its piece into; "F" for a column-major piece): rank-local facts go there, never into the
    static arguments, so every rank still reaches the same decision."""
    opdef = REGISTRY[name]
    static = static or {}
    kernel = opdef.kernel
    if opdef.takes_hints and (out is not None or order is not None):
        kernel = functools.partial(kernel, out=out, order=order)
    if tensors[0]._placement is None:
        _check_placements(name, tensors)
        result = kernel(*[t._local for t in tensors], **static)
        dev = of_array(tensors[0]._local)
        outs = tuple(Tensor(dev.asarray(o)) for o in (result if isinstance(result, tuple) else (result,)))
    else:
        outs = _apply_global(opdef, kernel, tensors, static)
    if autograd._enabled[0]:
        for t in tensors:
            if t.requires_grad:
                autograd.record(name, opdef.backward, tensors, outs, static)
                break
    return outs if multi else outs[0]


def _apply_global(opdef, kernel, tensors, static):
    """The cached path: one dict lookup keyed by interned layouts, box, kernel, wrap."""
    skey = _static_key(static) if static else ()
    if len(tensors) == 2:
        a, b = tensors
        key = (opdef, skey, a._layout or a.layout(), b._layout or b.layout() if b._placement is not None else None)
    elif len(tensors) == 1:
        key = (opdef, skey, tensors[0]._layout or tensors[0].layout())
    else:
        key = (opdef, skey, *[t.layout() if t._placement is not None else None for t in tensors])
    decision = _cache.get(key)
    if decision is None:
        _check_placements(opdef.name, tensors)
        decision = _cache[key] = _decide(opdef, tensors, static)
    plans = decision.plans
    if plans is None:
        pieces = [t._local for t in tensors]
    else:
        pieces = [t._local if p is None else run(p, t._local, t._dtype) for t, p in zip(tensors, plans)]
    dev = decision.device
    if not decision.participates:
        return tuple(Tensor._wrap(dev.empty((0,) * max(1, len(lay.shape)), lay.dtype.np), lay)
                     for lay in decision.out_layouts)
    out = kernel(*pieces, **static)
    if decision.single:
        lay = decision.out_layouts[0]
        if type(out) is not np.ndarray:
            out = dev.asarray(out)
        if out.dtype != lay.dtype.np:
            out = out.astype(lay.dtype.np)
        return (Tensor._wrap(out, lay),)
    outs = []
    for o, lay in zip(out, decision.out_layouts):
        o = dev.asarray(o)
        outs.append(Tensor._wrap(o if o.dtype == lay.dtype.np else o.astype(lay.dtype.np), lay))
    return tuple(outs)
