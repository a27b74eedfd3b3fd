"""Triangles and diagonals of matrices: tril, triu (batched over leading dims) and diag (and its backward)."""
import builtins

import numpy as np

from ._front import apply, tensors
from ..registry import op
from .shape import _meta, _rows


def _batch_dims_rows(s, o, st):
    """Batch dims (all but the last two) may be split; linear."""
    return _rows([(d, d) for d in range(len(s[0]) - 2)])


def _triangle_shape(s, st):
    shape = tuple(s[0])
    return shape if len(shape) != 1 else shape * 2  # numpy: a 1-D input is a row to broadcast


@op("tril", _batch_dims_rows, lambda ctx, g: tril(g, ctx.static["diagonal"]), meta=_meta(_triangle_shape))
def _tril(x, diagonal=0):
    return np.tril(x, diagonal)


@op("triu", _batch_dims_rows, lambda ctx, g: triu(g, ctx.static["diagonal"]), meta=_meta(_triangle_shape))
def _triu(x, diagonal=0):
    return np.triu(x, diagonal)


def tril(input, diagonal=0):
    """The lower triangle (on and below `diagonal`) of the last two dims; the rest zero."""
    return apply("tril", tensors(input), {"diagonal": diagonal})


def triu(input, diagonal=0):
    """The upper triangle (on and above `diagonal`) of the last two dims; the rest zero."""
    return apply("triu", tensors(input), {"diagonal": diagonal})


def _diag_shape(s, st):
    shape, k = tuple(s[0]), st["offset"]
    if len(shape) == 1:
        return (shape[0] + abs(k),) * 2
    if len(shape) != 2:
        raise ValueError(f"diag expects a 1-D or 2-D tensor, got shape {shape}")
    rows, cols = shape
    return (builtins.max(0, builtins.min(rows, cols - k) if k >= 0 else builtins.min(rows + k, cols)),)


@op("diag", lambda s, o, st: _rows([]), lambda ctx, g: _diag_backward(ctx, g), meta=_meta(_diag_shape))
def _diag(x, offset=0):
    return np.diag(x, offset)


def _diag_backward(ctx, g):
    """A vector's diag: the diagonal of g; a matrix's diagonal: g placed on it, in the matrix's
    shape (square or not)."""
    x, offset = ctx.inputs[0], ctx.static["offset"]
    if x.ndim == 1:
        return diag(g, offset)
    return apply("diag_grad", [g], {"offset": offset, "shape": tuple(x.shape)})


@op("diag_grad", lambda s, o, st: _rows([]), lambda ctx, g: diag(g, ctx.static["offset"]),
    meta=_meta(lambda s, st: st["shape"]))
def _diag_grad(g, offset=0, shape=()):
    """A zero matrix of `shape` with g on diagonal `offset`."""
    from ..backends.devices import array_module
    xp = array_module(g)
    out = xp.zeros(shape, g.dtype)
    at = xp.arange(g.shape[0])
    out[at + builtins.max(-offset, 0), at + builtins.max(offset, 0)] = g
    return out


def diag(input, diagonal=0):
    """A 1-D tensor -> the matrix with it on diagonal `diagonal`; a 2-D one -> that diagonal."""
    (input,) = tensors(input)
    if input.ndim not in (1, 2):
        raise ValueError(f"diag expects a 1-D or 2-D tensor, got shape {tuple(input.shape)}")
    return apply("diag", [input], {"offset": diagonal})
