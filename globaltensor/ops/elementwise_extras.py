"""Paddle's element-wise ops and whole-tensor comparisons: scale, increment, shard_index, add_n, allclose, equal_all."""
import numpy as np

from ..creation import full
from ..registry import op, rules
from ._front import apply, tensors
from .elementwise import abs, add, equal, isnan, less_equal, logical_and, logical_or  # noqa: A004


@op("scale", rules.elementwise(), lambda ctx, g: g * ctx.static["scale"])
def _scale(x, scale=1.0, bias=0.0, bias_after_scale=True):
    return (x * scale + bias if bias_after_scale else (x + bias) * scale).astype(x.dtype)


def scale(input, scale=1.0, bias=0.0, bias_after_scale=True):
    """Paddle's scale: scale * x + bias (or (x + bias) * scale)."""
    return apply("scale", tensors(input), {"scale": scale, "bias": bias, "bias_after_scale": bias_after_scale})


def increment(input, value=1.0):
    """x + value (Paddle's increment, as a new tensor)."""
    return add(input, value)


@op("shard_index", rules.elementwise(), meta=rules.like(0))
def _shard_index(x, index_num=1, nshards=1, shard_id=0, ignore_value=-1):
    size = (index_num + nshards - 1) // nshards
    return np.where(x // size == shard_id, x % size, ignore_value).astype(x.dtype)


def shard_index(input, index_num, nshards, shard_id, ignore_value=-1):
    """Paddle's shard_index: labels of shard `shard_id` become local indices, others ignore_value."""
    return apply("shard_index", tensors(input), {"index_num": index_num, "nshards": nshards, "shard_id": shard_id,
                                             "ignore_value": ignore_value})


def add_n(inputs):
    """The sum of a list of tensors."""
    inputs = list(inputs)
    total = inputs[0]
    for t in inputs[1:]:
        total = add(total, t)
    return total


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True (a 0-d bool tensor) when |x - y| <= atol + rtol * |y| everywhere."""
    close = less_equal(abs(input - other), atol + rtol * abs(other))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    return close.all()


def equal_all(input, other):
    """True (a 0-d bool tensor) when x and y have the same shape and values."""
    if tuple(input.shape) != tuple(other.shape):
        from ..sbp import broadcast
        if input.is_local:
            return full((), False, dtype="bool")
        return full((), False, dtype="bool", placement=input.placement, sbp=(broadcast,) * input.placement.ndim)
    return equal(input, other).all()
