"""Reductions and scans: sum, mean, max/min/median/prod/any/all, argmax/argmin, histogram, cumsum, trace.

sum is linear (S on a reduced dim gives P), the others are not; mean is sum's composite. The
composite reductions over these (var, std, logsumexp, norm, dist) are in reduction_composites.py."""
import builtins
import collections

import numpy as np

from ..backends.devices import array_module
from ..registry import rules
from ._front import apply, dims_arg, tensors
from ..registry import op
from ..creation import arange, eye
from ..sbp import broadcast as B, partial_sum as P, split
from ..dispatch import amp_entry


def _axis(dims):
    return None if dims is None else tuple(dims)


def _expand_back(g, ctx):
    """The output gradient broadcast back over the reduced dims of the input. Where the input
    was split along a reduced dim (forward S(d) -> P), the gradient comes back B -> S(d): a
    partial gradient is reduced while it has the reduced shape, before it is expanded."""
    from .shape import expand, reshape
    x = ctx.inputs[0]
    dims, keep = ctx.static["dims"], ctx.static["keepdim"]
    if g.is_global and x.is_global and g.placement == x.placement:
        whole = tuple(B if gs is P and isinstance(xs, split) and (dims is None or xs.dim in dims) else gs
                      for gs, xs in zip(g.sbp, x.sbp))
        if whole != g.sbp:
            g = g.to_global(sbp=whole)
    if not keep:
        shape = [1 if (dims is None or d in dims) else n for d, n in enumerate(x.shape)]
        g = reshape(g, shape)
    return expand(g, x.shape)


def _int64_of_unsigned(x):
    """The dtype= of numpy's sums and products as PyTorch's: int64 for bool and unsigned integers
    too (numpy takes uint64 for them, which has no tensors here); None (numpy's own) otherwise."""
    return np.int64 if x.dtype.kind in "bu" else None


@op("sum", rules.reduction(linear=True), lambda ctx, g: _expand_back(g, ctx))
def _sum(x, dims=None, keepdim=False):
    return np.sum(x, axis=_axis(dims), keepdims=keepdim, dtype=_int64_of_unsigned(x))


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001 - the public name
    """Sum over dim (int, tuple or None for all); on a split dim the result stays partial."""
    input = _as(input, dtype)
    return apply("sum", [input], {"dims": dims_arg(dim, input.ndim), "keepdim": keepdim})


@amp_entry("mean")
def mean(input, dim=None, keepdim=False, *, dtype=None):
    """sum / count: a composite, so it shares sum's SBP rows and gradient. Integers give the
    default float dtype."""
    input = _as(input, dtype)
    dims = dims_arg(dim, input.ndim)
    count = int(np.prod([input.shape[d] for d in (dims if dims is not None else range(input.ndim))]))
    total = sum(input if input.dtype.is_floating or input.dtype.is_complex else _float(input), dims, keepdim)
    return total / builtins.max(count, 1) if count else total * float("nan")


def _as(x, dtype):
    """x as a tensor, cast to dtype first when one is given (PyTorch's dtype= of reductions)."""
    (x,) = tensors(x)
    if dtype is None:
        return x
    from .elementwise import cast
    return cast(x, dtype)


def _float(x):
    from .elementwise import cast
    from ..dtype import get_default_dtype
    return cast(x, get_default_dtype())


def _extreme_backward(ctx, g, *rest):
    """The gradient goes to the elements equal to the result (split evenly among ties), or, with
    indices (max(x, dim)), to the element each index names (as PyTorch)."""
    if ctx.static.get("indices"):
        return _at_index(ctx, g, ctx.outputs[1])
    x, y = ctx.inputs[0], ctx.outputs[0]
    from .elementwise import cast, equal
    mask = cast(equal(x, _expand_back(y, ctx)), x.dtype)
    count = _expand_back(sum(mask, ctx.static["dims"], ctx.static["keepdim"]), ctx)
    return _expand_back(g, ctx) * mask / count


def _at_index(ctx, g, index):
    """The output gradient where `index` points along the reduced dim (a flat index when all
    dims are reduced), zero elsewhere: the backward of max/min/median with indices."""
    from .elementwise import cast, equal
    from .shape import reshape, unsqueeze
    x, dims = ctx.inputs[0], ctx.static["dims"]
    n = x.numel() if dims is None else x.shape[dims[0]]
    where = {} if x.is_local else {"placement": x.placement, "sbp": (rules.B,) * x.placement.ndim}
    iota = reshape(arange(n, **where), x.shape if dims is None else
                   [n if d == dims[0] else 1 for d in range(x.ndim)])
    if not ctx.static["keepdim"]:
        for d in (range(x.ndim) if dims is None else dims):
            index = unsqueeze(index, d)
    return _expand_back(g, ctx) * cast(equal(iota, index), g.dtype)


def _prod_backward(ctx, g):
    """d prod / d x_i = the product of the others: prod / x_i where x_i != 0; at a zero, the
    product of the non-zeros when it is the only zero of its group, else 0 (as PyTorch)."""
    from .elementwise import cast, where
    x, dims, keep = ctx.inputs[0], ctx.static["dims"], ctx.static["keepdim"]
    zero = x == 0
    others = _expand_back(_prod(where(zero, 1.0, x), dims, keep), ctx)
    zeros = _expand_back(sum(cast(zero, x.dtype), dims, keep), ctx)
    at_zero = where(zeros == 1, others, 0.0)
    elsewhere = where(zeros == 0, others / where(zero, 1.0, x), 0.0)
    return _expand_back(g, ctx) * where(zero, at_zero, elsewhere)


def _empty_dims_check(name, shape, dims):
    for d in range(len(shape)) if dims is None else dims:
        if shape[d] == 0:
            raise ValueError(f"{name}: cannot reduce dim {d} of size 0 (shape {tuple(shape)}): it has no identity")


def _extreme_meta(name):
    """Reduced shapes; the values' dtype, and int64 indices when asked (max(x, dim))."""
    def meta(s, dt, st):
        _empty_dims_check(name, s[0], st.get("dims"))
        shape = rules.reduced_shape(s, st)
        return ([shape, shape], [dt[0], np.int64]) if st.get("indices") else ([shape], [dt[0]])
    return meta


def _extreme_kernel(values, index):
    def kernel(x, dims=None, keepdim=False, indices=False):
        out = values(x, axis=_axis(dims), keepdims=keepdim)
        if not indices:
            return out
        return out, index(x, axis=dims[0], keepdims=keepdim).astype(np.int64)
    return kernel


def _reduce_op(name, kernel, backward, meta=None):
    op(name, rules.reduction(linear=False), backward, meta=meta)(kernel)


_reduce_op("max", _extreme_kernel(np.max, np.argmax), _extreme_backward, _extreme_meta("max"))
_reduce_op("min", _extreme_kernel(np.min, np.argmin), _extreme_backward, _extreme_meta("min"))
_reduce_op("prod", lambda x, dims=None, keepdim=False: np.prod(x, axis=_axis(dims), keepdims=keepdim,
                                                               dtype=_int64_of_unsigned(x)),
           lambda ctx, g: _prod_backward(ctx, g))
_reduce_op("all", lambda x, dims=None, keepdim=False: np.all(x, axis=_axis(dims), keepdims=keepdim), None)
_reduce_op("any", lambda x, dims=None, keepdim=False: np.any(x, axis=_axis(dims), keepdims=keepdim), None)


def _median_meta(s, dt, st):
    if st["dims"] is not None:
        _empty_dims_check("median", s[0], st["dims"])
    shape = rules.reduced_shape(s, st)
    return [shape, shape], [dt[0], np.int64]


def _median_backward(ctx, g, *rest):
    """median(x, dim): to the element each index names; median(x): shared among ties (PyTorch)."""
    return _extreme_backward(ctx, g) if ctx.static["dims"] is None else _at_index(ctx, g, ctx.outputs[1])


@op("median", rules.reduction(linear=False), _median_backward, meta=_median_meta)
def _median(x, dims=None, keepdim=False):
    """(values, int64 indices): the lower middle of each sorted slice (the element of rank
    (n - 1) // 2, the first in a stable sort among equals); NaN wins (its first position)."""
    xp = array_module(x)
    flat = x.reshape(-1) if dims is None else x
    axis = 0 if dims is None else dims[0]
    n = flat.shape[axis]
    if n == 0:  # median of no values (all dims reduced): NaN, as PyTorch
        idx = xp.zeros(flat.shape[:axis] + (1,) + flat.shape[axis + 1:], np.int64)
        values = xp.full(idx.shape, np.nan if x.dtype.kind in "fc" else 0, x.dtype)
    else:
        middle = (builtins.slice(None),) * axis + (builtins.slice((n - 1) // 2, (n + 1) // 2),)
        idx = xp.argsort(flat, axis=axis, kind="stable")[middle]
        values = xp.take_along_axis(flat, idx, axis=axis)
        if x.dtype.kind == "f":
            nan = xp.isnan(flat)
            first = xp.argmax(nan, axis=axis, keepdims=True)
            has = xp.take_along_axis(nan, first, axis=axis)
            idx, values = xp.where(has, first, idx), xp.where(has, xp.asarray(np.nan, x.dtype), values)
    shape = rules.reduced_shape([x.shape], {"dims": dims, "keepdim": keepdim})
    return values.reshape(shape), idx.astype(np.int64).reshape(shape)


def _arg_kernel(fn):
    def kernel(x, dims=None, keepdim=False):
        if dims is None:
            return array_module(x).asarray(fn(x.reshape(-1)), dtype=np.int64)
        return fn(x, axis=dims[0], keepdims=keepdim).astype(np.int64)
    return kernel


op("argmax", rules.reduction(linear=False))(_arg_kernel(np.argmax))
op("argmin", rules.reduction(linear=False))(_arg_kernel(np.argmin))


class return_types:  # noqa: N801 - torch.return_types
    """The named tuples (values, indices) of max, min, median, sort, topk: torch.return_types."""


def return_type(name):
    """The named tuple class return_types.<name> with fields values and indices."""
    found = getattr(return_types, name, None)
    if found is None:
        found = collections.namedtuple(name, ("values", "indices"), module=__name__)
        found.__qualname__ = f"return_types.{name}"
        setattr(return_types, name, found)
    return found


for _name in ("max", "min", "median", "sort", "topk"):
    return_type(_name)


def _reducer(name):
    def front(input, dim=None, keepdim=False):
        (input,) = tensors(input)
        out = apply(name, [input], {"dims": dims_arg(dim, input.ndim), "keepdim": keepdim})
        if name in ("all", "any") and input._dtype.name == "uint8":  # PyTorch keeps uint8 there
            return out.to(input._dtype)
        return out
    front.__name__ = name
    front.__doc__ = f"{name} over dim (int, tuple or None for all); not linear, so never partial."
    return front


_prod, all, any = (_reducer(n) for n in ("prod", "all", "any"))  # noqa: A001
amax, amin = _reducer("max"), _reducer("min")
amax.__name__, amin.__name__ = "amax", "amin"
amax.__doc__ = "The largest values over dim (int, tuple or None: all); ties share the gradient (torch.amax)."
amin.__doc__ = "The smallest values over dim (int, tuple or None: all); ties share the gradient (torch.amin)."


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """prod over dim (int, tuple or None for all), in dtype when given; not linear, so never partial."""
    return _prod(_as(input, dtype), dim, keepdim)


def _extreme(name, x, dim, keepdim, other):
    """max/min as PyTorch: (x) -> the value; (x, dim) -> (values, indices); (x, other) -> the
    element-wise maximum/minimum. A tuple of dims gives values only (amax/amin, numpy's max over axes)."""
    from ..tensor import Tensor
    if other is None and isinstance(dim, (Tensor, np.ndarray)):
        dim, other = None, dim
    if other is not None:
        from . import elementwise
        return getattr(elementwise, "maximum" if name == "max" else "minimum")(x, other)
    (x,) = tensors(x)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        return apply(name, [x], {"dims": dims_arg(dim, x.ndim), "keepdim": keepdim})
    dims = dims_arg(int(dim), x.ndim)
    values, indices = apply(name, [x], {"dims": dims, "keepdim": keepdim, "indices": True}, multi=True)
    return return_type(name)(values, indices)


def max(input, dim=None, keepdim=False, *, other=None):  # noqa: A001 - the public name
    """max(x): the largest value (0-d); max(x, dim, keepdim=False): the named tuple (values,
    indices) along dim (indices of the first maximum; the gradient goes there); max(x, y): the
    element-wise maximum. As PyTorch/OneFlow; a tuple of dims gives the values only (amax)."""
    return _extreme("max", input, dim, keepdim, other)


def min(input, dim=None, keepdim=False, *, other=None):  # noqa: A001 - the public name
    """min(x): the smallest value (0-d); min(x, dim, keepdim=False): the named tuple (values,
    indices); min(x, y): the element-wise minimum. As PyTorch/OneFlow (see max)."""
    return _extreme("min", input, dim, keepdim, other)


def median(input, dim=None, keepdim=False):
    """median(x): the lower middle of all values (0-d; never the mean of the two middle ones);
    median(x, dim, keepdim=False): the named tuple (values, indices) along dim. As PyTorch."""
    (input,) = tensors(input)
    if dim is None:
        return apply("median", [input], {"dims": None, "keepdim": keepdim}, multi=True)[0]
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"median takes one dim (an int), got {dim!r}")
    dims = dims_arg(int(dim), input.ndim)
    if input.ndim and input.shape[dims[0]] == 0:
        raise IndexError(f"Expected reduction dim {dims[0]} to have non-zero size. (median of shape {input.shape})")
    values, indices = apply("median", [input], {"dims": dims, "keepdim": keepdim}, multi=True)
    return return_type("median")(values, indices)


def _arg(name):
    def front(input, dim=None, keepdim=False):
        (input,) = tensors(input)
        dims = dims_arg(dim, input.ndim)
        if dims is not None and len(dims) != 1:
            raise ValueError(f"{name} takes one dim")
        return apply(name, [input], {"dims": dims, "keepdim": keepdim and dims is not None})
    front.__name__ = name
    front.__doc__ = f"Index of the {name[3:]} along dim (flat index when dim is None), int64."
    return front


argmax, argmin = _arg("argmax"), _arg("argmin")


def numel(input):
    """The number of elements (a Python int)."""
    return input.numel()


@op("histogram", lambda s, o, st: [((B,), (B,))] + ([((split(d),), (P,)) for d in range(len(s[0]))]
                                                    if st["min"] < st["max"] else []),
    meta=lambda s, dt, st: ([(int(st["bins"]),)], [np.int64]))
def _histogram(x, bins=100, min=0.0, max=0.0):
    lo, hi = (min, max) if min < max else ((float(x.min()), float(x.max())) if x.size else (0.0, 0.0))
    return np.histogram(x, bins=bins, range=(lo, hi))[0].astype(np.int64)


def histogram(input, bins=100, min=0, max=0):  # noqa: A002
    """Counts in `bins` equal bins over [min, max] (the data's range when min == max == 0);
    with an explicit range the counts of split pieces add up (S -> P)."""
    return apply("histogram", tensors(input), {"bins": bins, "min": float(min), "max": float(max)})


@op("cumsum", rules.along_dims(lambda i, o, st: [(d, d) for d in range(len(i)) if d != st["dim"]], linear=True),
    lambda ctx, g: _flip_cumsum(g, ctx.static["dim"]),
    meta=lambda s, dt, st: ([tuple(s[0])], [_cumsum(np.zeros(1, dt[0].np)).dtype]))
def _cumsum(x, dim=0):
    return np.cumsum(x, axis=dim, dtype=_int64_of_unsigned(x))


def _flip_cumsum(g, dim):
    from .rearrange import flip
    return flip(cumsum(flip(g, dim), dim), dim)


def cumsum(input, dim=None, *, dtype=None):
    """Running sum along dim (None: over the flattened values, as numpy), in dtype when given;
    independent along the other dims, linear (P stays P)."""
    input = _as(input, dtype)
    d = dims_arg(dim, input.ndim)
    if d is None:
        from .shape import flatten
        input, d = flatten(input), (0,)
    return apply("cumsum", [input], {"dim": d[0]})


@op("trace", lambda s, o, st: [((rules.B,), (rules.B,)), ((rules.P,), (rules.P,))],
    lambda ctx, g: g * _eye_like(ctx.inputs[0]),
    meta=lambda s, dt, st: ([()], [_trace(np.zeros((1, 1), dt[0].np)).dtype]))
def _trace(x):
    return array_module(x).asarray(np.trace(x, dtype=_int64_of_unsigned(x)))


def _eye_like(x):
    from ..sbp import broadcast
    if x.is_local:
        return eye(x.shape[0], x.shape[1], dtype=x.dtype)
    return eye(x.shape[0], x.shape[1], dtype=x.dtype, placement=x.placement, sbp=(broadcast,) * x.placement.ndim)


def trace(input):
    """The sum of the main diagonal of a 2-D tensor."""
    return apply("trace", tensors(input))
