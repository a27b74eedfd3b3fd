"""Front helpers shared by the op families: argument normalisation and calling the dispatcher."""
import numpy as np

from ..backends.devices import array_module
from ..dispatch import apply
from ..sbp import broadcast
from ..tensor import Tensor
from .creation import tensor


_scalars = {}  # (value, dtype, placement) -> a 0-d broadcast tensor, reused


def as_tensor(value, like):
    """A Python/numpy scalar or array as a tensor next to `like` (global: broadcast, same placement).
    The dtype follows numpy's rule for a Python scalar next to an array of like's dtype."""
    if isinstance(value, Tensor):
        return value
    scalar = isinstance(value, (bool, int, float))
    if scalar and like._placement is not None:
        key = (value, type(value), like._dtype.np, like._placement)
        found = _scalars.get(key)
        if found is not None:
            return found
    array = np.asarray(value)
    if array.ndim == 0 and isinstance(value, (bool, int, float, np.generic)):
        dt = np.result_type(like.dtype.np, value) if not isinstance(value, np.generic) else array.dtype
        array = np.asarray(value, dtype=dt)
    if like.is_global:
        # a Python scalar is taken on trust (checking it would cost a collective per op); an
        # array is checked like gt.tensor's data: ranks that pass different values raise
        t = tensor(array, placement=like.placement, sbp=(broadcast,) * like.placement.ndim, check_meta=not scalar)
        if scalar and len(_scalars) < 4096:
            _scalars[key] = t
        return t
    return Tensor(array_module(like._local).asarray(array))


def tensors(*values):
    """The values as tensors, scalars placed next to the first tensor among them."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if like is None:
        return [Tensor(np.asarray(v)) for v in values]
    return [as_tensor(v, like) for v in values]


def dims_arg(dim, ndim, axis=None):
    """dim (int, tuple or None; Paddle's axis too) as a sorted tuple of non-negative dims, or None."""
    dim = axis if dim is None else dim
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"dim {d} is out of range for a {ndim}-D tensor")
    return tuple(sorted(d % max(ndim, 1) for d in dims))


__all__ = ["apply", "as_tensor", "tensors", "dims_arg"]
