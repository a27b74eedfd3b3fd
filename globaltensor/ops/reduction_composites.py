"""Composite reductions over the primitives of reduction.py: var, std, logsumexp, norm, dist.

Being composites, they take their SBP rows and gradients from the ops they are written with."""
import builtins

import numpy as np

from ._front import dims_arg, tensors
from .reduction import _float, amax, amin, mean, sum  # noqa: A004
from ..sbp import split, without_partial


def var(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """Variance over dim, divided by count - correction (PyTorch's correction=; unbiased=True is
    correction=1, the default as in OneFlow/PyTorch)."""
    (input,) = tensors(input)
    dims = dims_arg(dim, input.ndim)
    count = int(np.prod([input.shape[d] for d in (dims if dims is not None else range(input.ndim))]))
    correction = (1 if unbiased else 0) if correction is None else correction
    if not input.dtype.is_floating and not input.dtype.is_complex:  # integers and bools: the default float
        input = _float(input)
    centered = input - mean(input, dims, keepdim=True)
    if input.dtype.is_complex:  # |x - mean|^2, real (PyTorch)
        from .elementwise import imag, real
        squares = real(centered) * real(centered) + imag(centered) * imag(centered)
    else:
        squares = centered * centered
    return sum(squares, dims, keepdim) / float(builtins.max(count - correction, 0))  # 0: nan, as PyTorch


def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """Standard deviation: the square root of var (same arguments)."""
    from .elementwise import sqrt
    return sqrt(var(input, dim, unbiased, keepdim, correction=correction))


def logsumexp(input, dim=None, keepdim=False):
    """log(sum(exp(x))) computed stably: the max is subtracted first (and detached)."""
    from .elementwise import exp, log
    (input,) = tensors(input)
    dims = dims_arg(dim, input.ndim)
    from .elementwise import isfinite, where
    if not input.dtype.is_floating and not input.dtype.is_complex:  # integers and bools: the default float
        input = _float(input)
    if input.is_global and builtins.any(isinstance(s, split) and (dims is None or s.dim in dims) for s in input.sbp):
        out = _logsumexp_split(input, dims)
    else:
        m = amax(input, dims, keepdim=True).detach()
        m = where(isfinite(m), m, 0.0)  # a group of -inf (or one inf): exp(x - m) must not be nan
        out = log(sum(exp(input - m), dims, keepdim=True)) + m
    if not keepdim:
        from .shape import squeeze
        out = squeeze(out, dims if dims is not None else tuple(range(input.ndim)))
    return out


def _logsumexp_split(x, dims):
    """logsumexp over dims that x is split along, without moving x: the shift is the mean of the
    finite values (partial sums, reduced while they have the reduced shape) rather than the max
    (which would gather the slices), and the sum of exp runs in float64, where a shifted value
    overflows only past 709 above that mean (and a row underflows only where every value lies
    745 below it): logits masked with -inf are fine, with a huge finite value (-1e9) they are
    not. Each rank sums exp over its slice; the partial sums meet in small all_reduces of the
    reduced shape (the Megatron cross-entropy)."""
    from .elementwise import cast, exp, isfinite, log, where

    def whole(t):  # the partial sums reduced while small (else x - m would run on partial values)
        return t.to_global(sbp=without_partial(t.sbp))
    finite = isfinite(x)
    count = whole(sum(finite.astype(x.dtype), dims, keepdim=True)).clip(1, None)
    m = (whole(sum(where(finite, x, 0.0), dims, keepdim=True)) / count).detach()  # the finite values' mean
    return cast(log(whole(sum(exp(cast(x - m, np.float64)), dims, keepdim=True))), x.dtype.np) + m


def norm(input, p=2, dim=None, keepdim=False):
    """Vector p-norm over dim: p = 0 (the count of non-zeros), 1, 2 ("fro"), inf, -inf or any
    positive number. The gradient of a zero vector's norm is 0 (as PyTorch), not nan."""
    from .elementwise import abs as _abs
    from .elementwise import cast
    (input,) = tensors(input)
    dims = dims_arg(dim, input.ndim)
    if p in ("fro", 2):
        return _root(sum(input * input, dims, keepdim), 2)
    if p in (float("inf"), "inf"):
        return amax(_abs(input), dims, keepdim)
    if p in (float("-inf"), "-inf"):
        return amin(_abs(input), dims, keepdim)
    if p == 0:
        return sum(cast(input != 0, input.dtype), dims, keepdim)
    if p == 1:
        return sum(_abs(input), dims, keepdim)
    from .elementwise import pow as _pow
    return _root(sum(_pow(_abs(input), p), dims, keepdim), p)


def _root(total, p):
    """total ** (1 / p), whose gradient at 0 is 0 (the root itself would give 0 * inf)."""
    from .elementwise import cast, pow as _pow, sqrt, where
    nonzero = total != 0
    safe = where(nonzero, total, 1.0)
    return (sqrt(safe) if p == 2 else _pow(safe, 1.0 / p)) * cast(nonzero, total.dtype)


def dist(input, other, p=2):
    """The p-norm of x - y."""
    return norm(input - other, p)
