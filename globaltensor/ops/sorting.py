"""Sorting along a dim: sort, argsort, topk (independent along the other dims, which keep their splits)."""
import numpy as np

from ._front import apply, tensors
from .gather_scatter import _other_dims, scatter_add_
from .reduction import return_type
from ..registry import op
from ..creation import zeros_like
from ..errors import wrap_dim


def _sort_backward(ctx, g, g_idx=None):
    if g is None:
        return (None,)
    return scatter_add_(zeros_like(ctx.inputs[0]), ctx.static["dim"], ctx.outputs[1], g)


def _sort_meta(s, dt, st):
    if not s[0]:
        raise ValueError("sort: the input must have at least 1 dim")
    return [tuple(s[0]), tuple(s[0])], [dt[0], np.int64]


def _order(x, dim, descending):
    """The indices that sort x along dim, stable. Descending keeps equal values in their order too
    and puts NaN first, as PyTorch, by sorting the flipped x (negating it would wrap unsigned and
    the least signed integers, and refuses bool)."""
    if not descending:
        return np.argsort(x, axis=dim, kind="stable")
    flipped = np.argsort(np.flip(x, axis=dim), axis=dim, kind="stable")
    return (x.shape[dim] - 1) - np.flip(flipped, axis=dim)


@op("sort", _other_dims(), _sort_backward, meta=_sort_meta)
def _sort(x, dim=-1, descending=False):
    idx = _order(x, dim, descending)
    return np.take_along_axis(x, idx, axis=dim), idx.astype(np.int64)


def sort(input, dim=-1, descending=False, *, stable=False):
    """The named tuple (values, indices) sorted along dim; independent along the other dims.
    Always stable (stable= is PyTorch's keyword; equal values keep their order)."""
    (input,) = tensors(input)
    dim = wrap_dim(dim, input.ndim)
    return return_type("sort")(*apply("sort", [input], {"dim": dim, "descending": descending}, multi=True))


def argsort(input, dim=-1, descending=False, *, stable=False):
    """The indices that sort input along dim (stable)."""
    return sort(input, dim, descending)[1]


def _topk_meta(s, dt, st):
    x, k = tuple(s[0]), st["k"]
    if not x:
        raise ValueError("topk: the input must have at least 1 dim")
    dim = st["dim"] % len(x)
    if not 0 <= k <= x[dim]:
        raise ValueError(f"topk: k={k} is out of range for dim {dim} of size {x[dim]}")
    shape = x[:dim] + (k,) + x[dim + 1:]
    return [shape, shape], [dt[0], np.int64]


@op("topk", _other_dims(), lambda ctx, g, gi=None: _sort_backward(ctx, g), meta=_topk_meta)
def _topk(x, k=1, dim=-1, largest=True):
    idx = _order(x, dim % x.ndim, largest)[(slice(None),) * (dim % x.ndim) + (slice(0, k),)]
    return np.take_along_axis(x, idx, axis=dim), idx.astype(np.int64)


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """The named tuple (values, indices) of the k largest (or smallest) along dim, in order."""
    (input,) = tensors(input)
    dim = wrap_dim(dim, input.ndim)
    if not 0 <= k <= input.shape[dim]:
        raise ValueError(f"topk: k={k} is out of range for dim {dim} of size {input.shape[dim]}")
    return return_type("topk")(*apply("topk", [input], {"k": k, "dim": dim, "largest": largest}, multi=True))
