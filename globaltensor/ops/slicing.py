"""Slices by axes, starts, ends and strides (strided_slice, slice) and slice_scatter, their backward (both inputs of slice_scatter)."""
import builtins

from ..registry import rules
from ._front import apply, tensors
from ..registry import op
from .shape import _meta, _rows
from ..creation import zeros_like
from ..errors import wrap_dim


def _slice_index(shape, axes, starts, ends, strides):
    index = [builtins.slice(None)] * len(shape)  # `slice` below is Paddle's op
    for a, s, e, st in zip(axes, starts, ends, strides):
        index[a] = builtins.slice(s, e, st)
    return tuple(index)


def _slice_back(ctx, g):
    x = ctx.inputs[0]
    st = ctx.static
    base = zeros_like(x)
    return _scatter_slice(base, g, st)


def _sliced_shape(shape, st):
    shape = list(shape)
    for a, s, e, step in zip(st["axes"], st["starts"], st["ends"], st["strides"]):
        shape[a] = len(range(*builtins.slice(s, e, step).indices(shape[a])))
    return tuple(shape)


@op("strided_slice", lambda s, o, st: _rows([(d, d) for d in range(len(s[0])) if d not in st["axes"]]),
    lambda ctx, g: _slice_back(ctx, g), meta=_meta(lambda s, st: _sliced_shape(s[0], st)))
def _strided_slice(x, axes=(), starts=(), ends=(), strides=()):
    return x[_slice_index(x.shape, axes, starts, ends, strides)]


def _slice_scatter_back(ctx, g):
    """base: g with the slice zeroed (the update overwrote it); update: g's slice."""
    st = ctx.static
    base, update = ctx.inputs
    g_base = _scatter_slice(g, zeros_like(update), st) if base.requires_grad else None
    g_update = strided_slice(g, **{k: st[k] for k in ("axes", "starts", "ends", "strides")}) \
        if update.requires_grad else None
    return g_base, g_update


@op("slice_scatter", lambda s, o, st: _rows([(d, d) for d in range(len(s[0])) if d not in st["axes"]], n_in=2),
    _slice_scatter_back, meta=rules.like(0))
def _slice_scatter(base, update, axes=(), starts=(), ends=(), strides=()):
    out = base.copy()
    out[_slice_index(base.shape, axes, starts, ends, strides)] = update
    return out


def _scatter_slice(base, update, st):
    return apply("slice_scatter", [base, update], dict(st))


def strided_slice(input, axes, starts, ends, strides):
    """Paddle's strided_slice: x[starts:ends:strides] along axes."""
    (input,) = tensors(input)
    axes = tuple(wrap_dim(a, input.ndim) for a in axes)
    return apply("strided_slice", [input], {"axes": axes, "starts": tuple(starts), "ends": tuple(ends),
                                         "strides": tuple(strides)})


def slice(input, axes=None, starts=None, ends=None, *, slice_tup_list=None):  # noqa: A001 - Paddle's name
    """Paddle's slice(x, axes, starts, ends): x[starts:ends] along axes; OneFlow's slice(x,
    slice_tup_list): one [start, stop, step] per leading dim (None as in Python's slices)."""
    if slice_tup_list is None and starts is None and ends is None and axes is not None:
        slice_tup_list = axes  # OneFlow's positional form: slice(x, [[start, stop, step], ...])
    if slice_tup_list is None:
        if axes is None or starts is None or ends is None:
            raise TypeError("slice() takes (input, axes, starts, ends) or (input, slice_tup_list)")
        return strided_slice(input, axes, starts, ends, [1] * len(axes))
    (input,) = tensors(input)
    triples = [list(t) for t in slice_tup_list]
    if len(triples) > input.ndim or builtins.any(len(t) != 3 for t in triples):
        raise ValueError(f"slice: slice_tup_list must hold at most {input.ndim} [start, stop, step] triples for "
                         f"a tensor of shape {tuple(input.shape)}, got {slice_tup_list!r}")
    if builtins.any(t[2] is not None and t[2] <= 0 for t in triples):
        raise ValueError(f"slice: steps must be positive, got {slice_tup_list!r}")
    return strided_slice(input, range(len(triples)), [t[0] for t in triples], [t[1] for t in triples],
                         [1 if t[2] is None else t[2] for t in triples])
