"""x[key] = value for basic keys (ints, slices, None, Ellipsis) as one op: each rank writes the part of the selection its piece holds."""
import builtins

import numpy as np

from ..backends.devices import array_module
from ..registry import op, rules
from ._front import apply

B, S = rules.B, rules.split


def basic_selection(shape, key):
    """Per dim of x, the global indices a basic key selects; the shape of x[key]; that shape
    with one entry per dim of x (ints: 1; None dims dropped)."""
    real = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if real > len(shape):
        raise IndexError(f"Too many indices for tensor of dimension {len(shape)}")
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    fill = (builtins.slice(None),) * (len(shape) - real)
    at = next((i for i, k in enumerate(key) if k is Ellipsis), len(key))
    key = key[:at] + fill + key[at + 1:]
    selections, out_shape, d = [], [], 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        n = shape[d]
        if isinstance(k, builtins.slice):
            sel = np.arange(n)[k]
            out_shape.append(len(sel))
        else:
            if not -n <= int(k) < n:
                raise IndexError(f"index {int(k)} is out of bounds for dimension {d} with size {n}")
            sel = np.array([int(k) % n])
        selections.append(sel)
        d += 1
    return selections, tuple(out_shape), tuple(len(s) for s in selections)


def encoded(key):
    """A basic key as static data (hashable: a slice is ("slice", start, stop, step), ... "ellipsis")."""
    return tuple(("slice", k.start, k.stop, k.step) if isinstance(k, builtins.slice) else
                 "ellipsis" if k is Ellipsis else None if k is None else int(k) for k in key)


def decoded(key):
    return tuple(builtins.slice(*k[1:]) if isinstance(k, tuple) else Ellipsis if k == "ellipsis" else k for k in key)


def lead_ones_dropped(data, shape, ndim):
    """The value without leading dims of size 1 beyond the selection's dims (PyTorch drops them)."""
    lead = 0
    while len(shape) - lead > ndim and shape[lead] == 1:
        lead += 1
    return (data.reshape(data.shape[lead:]) if lead and data.ndim == len(shape) else data), tuple(shape[lead:])


def check_value_shape(value_shape, shape, key):
    """RuntimeError (PyTorch's words) unless a value of value_shape broadcasts to x[key]'s shape."""
    _, out_shape, _ = basic_selection(shape, key)
    value_shape = lead_ones_dropped(np.empty(0), tuple(value_shape), len(out_shape))[1]
    try:
        fits = np.broadcast_shapes(value_shape, out_shape) == tuple(out_shape)
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(f"shape mismatch: value tensor of shape {tuple(value_shape)} cannot be broadcast to "
                           f"indexing result of shape {tuple(out_shape)}")


def _setitem_rows(s, o, st):
    """x (the tensor written), value (the whole value, if a tensor) -> x's new value.
    x S(d), value B -> S(d)     each rank writes the selection's part inside its slice
    x B, value B -> B           every rank writes the whole selection
    (a partial x is summed first, to a split: the value lands once, not once per rank)"""
    n = len(s[0])
    tail = (B,) * (len(s) - 1)
    return [((B,) + tail, (B,))] + [((S(d),) + tail, (S(d),)) for d in range(n)]


def _setitem_meta(s, dt, st):
    return [tuple(s[0])], [dt[0]]


def _setitem_backward(ctx, g):
    from .elementwise import sum_to
    from .indexing import getitem
    x, key = ctx.inputs[0], decoded(ctx.static["key"])
    gx = apply("setitem", [g], {**ctx.static, "fill": 0}) if x.requires_grad else None
    gv = None
    if len(ctx.inputs) > 1 and ctx.inputs[1].requires_grad:
        gv = sum_to(getitem(g, key), ctx.inputs[1].shape)
    return (gx,) if len(ctx.inputs) == 1 else (gx, gv)


@op("setitem", _setitem_rows, _setitem_backward, meta=_setitem_meta, takes_offsets=True)
def _setitem(piece, value=None, key=(), shape=(), fill=0, offsets=None):
    """The piece with the selection's part inside it written: from the whole value (broadcast to
    the selection), or `fill` when there is no value tensor. The piece starts at offsets[0]."""
    selections, out_shape, aligned = basic_selection(shape, decoded(key))
    xp = array_module(piece)
    if value is None:
        data = xp.full((1,) * len(aligned), fill, piece.dtype)
    else:
        data = lead_ones_dropped(value, value.shape, len(out_shape))[0]
    data = xp.broadcast_to(data, out_shape).reshape(aligned) if value is not None else data
    start = offsets[0] if offsets and offsets[0] is not None else (0,) * piece.ndim
    where, taken = [], []
    for sel, lo, n in zip(selections, start, piece.shape):
        inside = (sel >= lo) & (sel < lo + n)
        where.append(sel[inside] - lo)
        taken.append(np.nonzero(inside)[0])
    out = piece.copy()
    region = _index(where, xp)
    out[region] = data if value is None else data[_index(taken, xp)]
    return out


def _index(positions, xp):
    """An index for these positions per dim: slices when each is a run with a positive step,
    else an open mesh of index arrays (np.ix_)."""
    slices = []
    for p in positions:
        step = int(p[1] - p[0]) if len(p) > 1 else 1
        if len(p) and step > 0 and np.array_equal(p, np.arange(p[0], p[-1] + 1, step)):
            slices.append(builtins.slice(int(p[0]), int(p[-1]) + 1, step))
        elif not len(p):
            slices.append(builtins.slice(0, 0))
        else:
            return tuple(xp.asarray(i) for i in np.ix_(*positions))
    return tuple(slices)
