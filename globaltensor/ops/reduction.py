"""Reductions and scans: sum (linear: S on a reduced dim gives P), max/min/prod/any/all
(not linear), composites (mean, var, std, logsumexp, norm, dist), cumsum, argmax/argmin."""
import builtins

import numpy as np

from ..backends.devices import array_module
from . import rules
from ._front import apply, dims_arg, tensors
from .registry import op


def _axis(dims):
    return None if dims is None else tuple(dims)


def _expand_back(g, ctx):
    """The output gradient broadcast back over the reduced dims of the input."""
    from .shape import expand, reshape
    x = ctx.inputs[0]
    dims, keep = ctx.static["dims"], ctx.static["keepdim"]
    if not keep:
        shape = [1 if (dims is None or d in dims) else n for d, n in enumerate(x.shape)]
        g = reshape(g, shape)
    return expand(g, x.shape)


@op("sum", rules.reduction(linear=True), lambda ctx, g: _expand_back(g, ctx))
def _sum(x, dims=None, keepdim=False):
    return np.sum(x, axis=_axis(dims), keepdims=keepdim)


def sum(x, dim=None, keepdim=False, axis=None, dtype=None):  # noqa: A001 - the public name
    """Sum over dim (int, tuple or None for all); on a split dim the result stays partial."""
    (x,) = tensors(x)
    if dtype is not None:
        from .elementwise import cast
        x = cast(x, dtype)
    return apply("sum", [x], {"dims": dims_arg(dim, x.ndim, axis), "keepdim": keepdim})


def mean(x, dim=None, keepdim=False, axis=None):
    """sum / count: a composite, so it shares sum's SBP rows and gradient."""
    (x,) = tensors(x)
    dims = dims_arg(dim, x.ndim, axis)
    count = int(np.prod([x.shape[d] for d in (dims if dims is not None else range(x.ndim))]))
    total = sum(x if x.dtype.is_floating else _float(x), dims, keepdim)
    return total / builtins.max(count, 1) if count else total * float("nan")


def _float(x):
    from .elementwise import cast
    return cast(x, "float32")


def _extreme_backward(ctx, g, *rest):
    """The gradient goes to the elements equal to the result (split evenly among ties)."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    from .elementwise import cast, equal
    mask = cast(equal(x, _expand_back(y, ctx)), x.dtype)
    count = _expand_back(sum(mask, ctx.static["dims"], ctx.static["keepdim"]), ctx)
    return _expand_back(g, ctx) * mask / count


def _reduce_op(name, kernel, backward):
    op(name, rules.reduction(linear=False), backward)(kernel)


_reduce_op("max", lambda x, dims=None, keepdim=False: np.max(x, axis=_axis(dims), keepdims=keepdim), _extreme_backward)
_reduce_op("min", lambda x, dims=None, keepdim=False: np.min(x, axis=_axis(dims), keepdims=keepdim), _extreme_backward)
_reduce_op("prod", lambda x, dims=None, keepdim=False: np.prod(x, axis=_axis(dims), keepdims=keepdim),
           lambda ctx, g: _expand_back(g * ctx.outputs[0], ctx) / ctx.inputs[0])
_reduce_op("all", lambda x, dims=None, keepdim=False: np.all(x, axis=_axis(dims), keepdims=keepdim), None)
_reduce_op("any", lambda x, dims=None, keepdim=False: np.any(x, axis=_axis(dims), keepdims=keepdim), None)
_reduce_op("median", lambda x, dims=None, keepdim=False: np.median(x, axis=_axis(dims), keepdims=keepdim)
           .astype(x.dtype if x.dtype.kind == "f" else np.float64), None)


def _arg_kernel(fn):
    def kernel(x, dims=None, keepdim=False):
        if dims is None:
            return array_module(x).asarray(fn(x.reshape(-1)), dtype=np.int64)
        return fn(x, axis=dims[0], keepdims=keepdim).astype(np.int64)
    return kernel


op("argmax", rules.reduction(linear=False))(_arg_kernel(np.argmax))
op("argmin", rules.reduction(linear=False))(_arg_kernel(np.argmin))


def _reducer(name):
    def front(x, dim=None, keepdim=False, axis=None):
        (x,) = tensors(x)
        return apply(name, [x], {"dims": dims_arg(dim, x.ndim, axis), "keepdim": keepdim})
    front.__name__ = name
    front.__doc__ = f"{name} over dim (int, tuple or None for all); not linear, so never partial."
    return front


max, min, prod, all, any, median = (_reducer(n) for n in ("max", "min", "prod", "all", "any", "median"))  # noqa: A001


def _arg(name):
    def front(x, dim=None, keepdim=False, axis=None):
        (x,) = tensors(x)
        dims = dims_arg(dim, x.ndim, axis)
        if dims is not None and len(dims) != 1:
            raise ValueError(f"{name} takes one dim")
        return apply(name, [x], {"dims": dims, "keepdim": keepdim and dims is not None})
    front.__name__ = name
    front.__doc__ = f"Index of the {name[3:]} along dim (flat index when dim is None), int64."
    return front


argmax, argmin = _arg("argmax"), _arg("argmin")


def var(x, dim=None, unbiased=True, keepdim=False, axis=None):
    """Variance (unbiased by default, as OneFlow/PyTorch)."""
    (x,) = tensors(x)
    dims = dims_arg(dim, x.ndim, axis)
    count = int(np.prod([x.shape[d] for d in (dims if dims is not None else range(x.ndim))]))
    centered = x - mean(x, dims, keepdim=True)
    return sum(centered * centered, dims, keepdim) / builtins.max(count - (1 if unbiased else 0), 1)


def std(x, dim=None, unbiased=True, keepdim=False, axis=None):
    from .elementwise import sqrt
    return sqrt(var(x, dim, unbiased, keepdim, axis))


def logsumexp(x, dim=None, keepdim=False, axis=None):
    """log(sum(exp(x))) computed stably: the max is subtracted first (and detached)."""
    from .elementwise import exp, log
    (x,) = tensors(x)
    dims = dims_arg(dim, x.ndim, axis)
    m = max(x, dims, keepdim=True).detach()
    out = log(sum(exp(x - m), dims, keepdim=True)) + m
    if not keepdim:
        from .shape import squeeze
        out = squeeze(out, dims if dims is not None else tuple(range(x.ndim)))
    return out


def norm(x, p=2, dim=None, keepdim=False, axis=None):
    """Vector p-norm over dim (p = 1, 2, inf, or any positive number; "fro" = 2)."""
    from .elementwise import abs as _abs
    from .elementwise import pow as _pow
    from .elementwise import sqrt
    (x,) = tensors(x)
    dims = dims_arg(dim, x.ndim, axis)
    if p in ("fro", 2):
        return sqrt(sum(x * x, dims, keepdim))
    if p in (float("inf"), "inf"):
        return max(_abs(x), dims, keepdim)
    if p == 1:
        return sum(_abs(x), dims, keepdim)
    return _pow(sum(_pow(_abs(x), p), dims, keepdim), 1.0 / p)


def dist(x, y, p=2):
    """The p-norm of x - y."""
    return norm(x - y, p)


def numel(x):
    """The number of elements (a Python int)."""
    return x.numel()


@op("cumsum", rules.along_dims(lambda i, o, st: [(d, d) for d in range(len(i)) if d != st["dim"]], linear=True),
    lambda ctx, g: _flip_cumsum(g, ctx.static["dim"]))
def _cumsum(x, dim=0):
    return np.cumsum(x, axis=dim)


def _flip_cumsum(g, dim):
    from .shape import flip
    return flip(cumsum(flip(g, dim), dim), dim)


def cumsum(x, dim=None, axis=None):
    """Running sum along dim; independent along the other dims, linear (P stays P)."""
    (x,) = tensors(x)
    d = dims_arg(dim, x.ndim, axis)
    if d is None:
        from .shape import flatten
        x, d = flatten(x), (0,)
    return apply("cumsum", [x], {"dim": d[0]})


@op("trace", lambda s, o, st: [((rules.B,), (rules.B,)), ((rules.P,), (rules.P,))],
    lambda ctx, g: g * _eye_like(ctx.inputs[0]))
def _trace(x):
    return array_module(x).asarray(np.trace(x))


def _eye_like(x):
    from .creation import eye
    from ..sbp import broadcast
    if x.is_local:
        return eye(x.shape[0], x.shape[1], dtype=x.dtype)
    return eye(x.shape[0], x.shape[1], dtype=x.dtype, placement=x.placement, sbp=(broadcast,) * x.placement.ndim)


def trace(x):
    """The sum of the main diagonal of a 2-D tensor."""
    return apply("trace", tensors(x))
