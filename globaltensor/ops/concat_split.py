"""Joining and cutting along a dim: concat, stack, split, chunk, unbind, unstack (other dims keep their splits)."""
import builtins
import itertools

import numpy as np

from ..registry import rules
from . import _front
from ._front import apply, tensors
from ..registry import op
from .shape import _meta, _rows, squeeze
from ..creation import zeros_like
from ..errors import ShapeError, wrap_dim

B, P, S = rules.B, rules.P, rules.split


def _concat_rows(s, o, st):
    n, dim = len(s), st["dim"]
    return _rows([(d, d) for d in range(len(o[0])) if d != dim], n_in=n)


def _concat_backward(ctx, g):
    sizes = [t.shape[ctx.static["dim"]] for t in ctx.inputs]
    return split(g, sizes, ctx.static["dim"])


def _concat_shape(s, st):
    first, dim = tuple(s[0]), st["dim"]
    for shape in s[1:]:
        if len(shape) != len(first):
            raise ShapeError(f"Tensors must have same number of dimensions: got {len(first)} and {len(shape)} is "
                             f"expected. (concat of shapes {[tuple(x) for x in s]})")
        for d, (a, b) in enumerate(zip(first, shape)):
            if d != dim and a != b:
                raise ShapeError(f"Sizes of tensors must match except in dimension {dim}. Got {b} and {a} is "
                                 f"expected in dimension {d}. (concat of shapes {[tuple(x) for x in s]})")
    return first[:dim] + (builtins.sum(shape[dim] for shape in s),) + first[dim + 1:]


def _joint_dtype(dt):
    return rules.result_dtype(*dt)


@op("concat", _concat_rows, _concat_backward, meta=_meta(_concat_shape, _joint_dtype))
def _concat(*xs, dim=0):
    return np.concatenate(xs, axis=dim)


def _joined(values, name):
    """The tensors of one dtype, PyTorch's result type of theirs (float32 with int64 stays float32)."""
    values = _front.tensors(*values)
    return _front.promoted(*values, name=name) if len({t.dtype for t in values}) > 1 else values


def concat(tensors, dim=0):
    """Join tensors along an existing dim (splits along the other dims are kept); 1-D empty tensors
    among tensors of more dims are skipped, as PyTorch (out = cat([tensor([]), x]))."""
    tensors = _joined(tensors, "cat")
    kept = [t for t in tensors if tuple(t.shape) != (0,)]
    if kept and len(kept) < len(tensors) and builtins.any(t.ndim != 1 for t in kept):
        tensors = kept
    dim = wrap_dim(dim, tensors[0].ndim)
    return apply("concat", tensors, {"dim": dim})


def _stack_rows(s, o, st):
    dim = st["dim"]
    return _rows([(d, d if d < dim else d + 1) for d in range(len(s[0]))], n_in=len(s))


def _stack_shape(s, st):
    first, dim = tuple(s[0]), st["dim"]
    if any(tuple(shape) != first for shape in s):
        raise ShapeError(f"stack expects each tensor to be equal size, but got {first} at first input and "
                         f"{next(tuple(x) for x in s if tuple(x) != first)} (stack of shapes {[tuple(x) for x in s]})")
    return first[:dim] + (len(s),) + first[dim:]


@op("stack", _stack_rows, lambda ctx, g: unbind(g, ctx.static["dim"]), meta=_meta(_stack_shape, _joint_dtype))
def _stack(*xs, dim=0):
    return np.stack(xs, axis=dim)


def stack(tensors, dim=0):
    """Join tensors along a new dim."""
    tensors = _joined(tensors, "stack")
    dim = wrap_dim(dim, tensors[0].ndim + 1)
    return apply("stack", tensors, {"dim": dim})


def _split_rows(s, o, st):
    dim = st["dim"]
    return _rows([(d, d) for d in range(len(s[0])) if d != dim], n_out=len(o))


def _split_backward(ctx, *grads):
    parts = [g if g is not None else zeros_like(o) for g, o in zip(grads, ctx.outputs)]
    return concat(parts, ctx.static["dim"])


def _split_meta(s, dt, st):
    shape, sizes, dim = tuple(s[0]), tuple(st["sizes"]), st["dim"]
    if not sizes or builtins.sum(sizes) != shape[dim] or builtins.min(sizes) < 0:
        raise ValueError(f"split sizes {list(sizes)} do not add up to {shape[dim]} (dim {dim} of shape {shape})")
    return [shape[:dim] + (n,) + shape[dim + 1:] for n in sizes], [dt[0]] * len(sizes)


@op("split", _split_rows, _split_backward, meta=_split_meta)
def _split(x, sizes=(), dim=0):
    return tuple(np.split(x, list(itertools.accumulate(sizes))[:-1], axis=dim))


def split(tensor, split_size_or_sections=None, dim=0, *, num_or_sections=None):
    """Pieces along dim (a tuple), as PyTorch: an int is a piece size (the last may be shorter), a list the
    sizes. Paddle's keyword num_or_sections=: an int is a number of equal pieces, a list the sizes
    (one may be -1: the rest)."""
    (tensor,) = tensors(tensor)
    dim = wrap_dim(dim, tensor.ndim)
    n = tensor.shape[dim]
    if (split_size_or_sections is None) == (num_or_sections is None):
        raise TypeError("split() takes split_size_or_sections (PyTorch) or num_or_sections= (Paddle): one of them")
    if isinstance(num_or_sections, int):
        if num_or_sections <= 0 or n % num_or_sections:
            raise ValueError(f"split: num_or_sections={num_or_sections} does not divide dim {dim} of size {n} "
                             f"into equal pieces")
        split_size_or_sections = [n // num_or_sections] * num_or_sections
    elif num_or_sections is not None:
        split_size_or_sections = num_or_sections
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size < 0:
            raise ShapeError(f"split expects split_size be non-negative, but got split_size={size}")
        if size == 0 and n:
            raise ShapeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if n else [0]  # empty dim: one empty piece
    else:
        sizes = list(split_size_or_sections)
        if -1 in sizes:
            sizes[sizes.index(-1)] = n - sum(s for s in sizes if s != -1)
    if sum(sizes) != n:
        raise ShapeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                         f"dimension {dim}), but got split_sizes={sizes} (shape {tuple(tensor.shape)})")
    return tuple(apply("split", [tensor], {"sizes": tuple(sizes), "dim": dim}, multi=True))  # a tuple, as PyTorch


def chunk(input, chunks, dim=0):
    """`chunks` pieces of ceil(n / chunks) along dim (the last ones may be smaller)."""
    (input,) = tensors(input)
    if input.ndim == 0:
        raise ShapeError("chunk expects at least a 1-dimensional tensor (got a 0-d tensor)")
    if chunks <= 0:
        raise ShapeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    dim = wrap_dim(dim, input.ndim)
    if input.shape[dim] == 0:  # as PyTorch: `chunks` empty pieces
        return split(input, [0] * chunks, dim)
    size = -(-input.shape[dim] // chunks)
    return split(input, max(size, 1), dim)


def unbind(input, dim=0):
    """The slices along dim, each without that dim (a tuple, as PyTorch)."""
    (input,) = tensors(input)
    dim = wrap_dim(dim, input.ndim)
    if input.shape[dim] == 0:
        return ()
    return tuple(squeeze(p, dim) for p in split(input, 1, dim))


def unstack(input, dim=0, num=None):
    """Paddle's unbind: the slices along dim (num, when given, must be their count)."""
    out = list(unbind(input, dim))  # a list, as Paddle
    if num is not None and num != len(out):
        raise ValueError(f"unstack: num={num}, but dim {dim} has {len(out)} slices")
    return out
