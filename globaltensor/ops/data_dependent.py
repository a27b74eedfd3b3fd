"""Ops whose output size depends on the values: masked_select, nonzero, unique (run on B inputs).

The dispatcher boxes their inputs to broadcast and reads their output shapes from each call's
results, on every rank (registry.py: data_dependent=True)."""
import builtins

import numpy as np

from ..registry import rules
from ._front import apply, tensors
from .gather_scatter_nd import scatter_nd_add
from ..registry import op
from ..creation import zeros_like
from ..errors import wrap_dim


def _data_dependent(backward=None):
    """An op whose output size depends on the values: the dispatcher boxes its inputs to B and
    reads its output shape from each call's result, on every rank (never from its cache)."""
    def register(kernel):
        return op(kernel.__name__.lstrip("_"), rules.broadcast_only, backward, data_dependent=True)(kernel)
    return register


def _masked_select_backward(ctx, g):
    """The gradient goes back to the selected positions: scatter_nd_add into zeros like x."""
    from .shape import expand
    x, mask = ctx.inputs
    where = nonzero(expand(mask, x.shape))
    return scatter_nd_add(zeros_like(x), where, g), None


@_data_dependent(_masked_select_backward)
def _masked_select(x, mask):
    return x[np.broadcast_to(mask, x.shape)]


@_data_dependent()
def _nonzero(x):
    return np.stack(np.nonzero(x), axis=1).astype(np.int64)


@_data_dependent()
def _unique(x, return_inverse=False, return_counts=False, dim=None):
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True, axis=dim)
    out = (values,)
    if return_inverse:
        out += (inverse.reshape(x.shape if dim is None else (x.shape[dim],)).astype(np.int64),)
    if return_counts:
        out += (counts.astype(np.int64),)
    return out


def masked_select(input, mask):
    """The elements of x where mask holds, as a 1-D tensor; input and mask broadcast together
    first (as PyTorch's). Data-dependent size: the inputs are gathered to broadcast first."""
    input, mask = tensors(input, mask)
    if tuple(input.shape) != tuple(mask.shape):
        from .shape import expand
        shape = np.broadcast_shapes(tuple(input.shape), tuple(mask.shape))
        input = input if tuple(input.shape) == shape else expand(input, shape)
        mask = mask if tuple(mask.shape) == shape else expand(mask, shape)
    return apply("masked_select", [input, mask])


def nonzero(input, *, as_tuple=False):
    """Indices (n, ndim) of the non-zero elements; as_tuple=True: one 1-D tensor a dim (as
    numpy's nonzero). Data-dependent size: gathered to broadcast."""
    (input,) = tensors(input)
    found = apply("nonzero", [input])
    if not as_tuple:
        return found
    from .shape import reshape
    return tuple(reshape(found[:, d], -1) for d in range(builtins.max(input.ndim, 1)))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values, sorted (always, as PyTorch on CPU), with the index of each element's
    value (return_inverse) and each value's count (return_counts); dim: distinct slices along it.
    Data-dependent size: gathered to broadcast."""
    (input,) = tensors(input)
    static = {"return_inverse": bool(return_inverse), "return_counts": bool(return_counts),
              "dim": None if dim is None else wrap_dim(dim, input.ndim)}
    out = apply("unique", [input], static, multi=True)
    return out[0] if len(out) == 1 else tuple(out)
