"""Rearrangements that copy: tile, flip, roll (the dims they leave alone keep their splits; linear, so P -> P)."""
import builtins

import numpy as np

from ..errors import ShapeError, wrap_dim
from ..registry import op
from ._front import apply, dims_arg, tensors
from .shape import _meta, _rows, reshape


def _tile_shape(s, st):
    shape, reps = tuple(s[0]), tuple(st["reps"])
    n = builtins.max(len(shape), len(reps))
    shape, reps = (1,) * (n - len(shape)) + shape, (1,) * (n - len(reps)) + reps
    return tuple(a * r for a, r in zip(shape, reps))


@op("tile", lambda s, o, st: _rows([]), lambda ctx, g: _tile_back(g, ctx), meta=_meta(_tile_shape))
def _tile(x, reps=()):
    return np.tile(x, reps)


def _tile_back(g, ctx):
    x, reps = ctx.inputs[0], ctx.static["reps"]
    shape = list(x.shape)
    lead = len(reps) - len(shape)
    full = [1] * max(lead, 0) + shape
    reps = (1,) * max(0, len(full) - len(reps)) + tuple(reps)
    split_shape = []
    for r, n in zip(reps, full):
        split_shape += [r, n]
    summed = reshape(g, split_shape).sum(tuple(range(0, 2 * len(full), 2)))  # a method: reduction comes later
    return reshape(summed, x.shape)


def tile(input, *dims, **kwargs):
    """Repeat x along each dim (numpy's tile); dims an int or a sequence, or several ints (x.tile(2, 2))."""
    (input,) = tensors(input)
    dims = _dims_of(dims, kwargs)
    reps = (dims,) if isinstance(dims, int) else tuple(dims)
    if any(r < 0 for r in reps):
        raise ShapeError(f"Trying to create tensor with negative dimension {builtins.min(reps)} (tile {reps})")
    return apply("tile", [input], {"reps": reps})


@op("flip", lambda s, o, st: _rows([(d, d) for d in range(len(s[0])) if d not in st["dims"]]),
    lambda ctx, g: flip(g, ctx.static["dims"]), meta=_meta(lambda s, st: s[0]))
def _flip(x, dims=()):
    return np.flip(x, dims).copy()  # a copy, as PyTorch: writing into the result leaves x alone


def _dims_of(args, kwargs):
    """dims= or the positional dims: one int or sequence, or several ints (x.flip(0, 1), x.tile(2, 2))."""
    if set(kwargs) - {"dims"}:
        raise TypeError(f"unexpected keyword arguments {sorted(set(kwargs) - {'dims'})}")
    if "dims" in kwargs:
        return kwargs["dims"]
    return args[0] if len(args) == 1 else tuple(args)


def flip(input, *dims, **kwargs):
    """Reverse the order along dims (an int or a sequence, or several ints), into a new tensor."""
    (input,) = tensors(input)
    return apply("flip", [input], {"dims": dims_arg(_dims_of(dims, kwargs), input.ndim)})


@op("roll", lambda s, o, st: _rows([(d, d) for d in range(len(s[0])) if st["dims"] is not None and d not in st["dims"]]),
    lambda ctx, g: roll(g, tuple(-v for v in ctx.static["shifts"]), ctx.static["dims"]), meta=_meta(lambda s, st: s[0]))
def _roll(x, shifts=(), dims=None):
    return np.roll(x, shifts, dims)


def roll(input, shifts, dims=None):
    """Shift the values along dims, cyclically (dims None: over the flattened values)."""
    (input,) = tensors(input)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = None if dims is None else ((dims,) if isinstance(dims, int) else tuple(dims))
    if len(shifts) != (1 if dims is None else len(dims)):
        raise ShapeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims: "
                         f"{1 if dims is None else len(dims)} (roll: shifts={shifts}, dims={dims})")
    return apply("roll", [input], {"shifts": shifts, "dims": None if dims is None else tuple(wrap_dim(d, input.ndim) for d in dims)})
