"""Front helpers shared by the op families: argument normalisation, type promotion and calling the
dispatcher."""
import math

import numpy as np

from .. import dtype as _dtype
from ..backends.devices import array_module
from ..dispatch import apply
from ..errors import wrap_dim
from ..dtype import DIM, SCALAR, ZERO, scalar_dtype
from ..sbp import broadcast
from ..tensor import Tensor
from ..creation import _made, full, host_array, tensor


_scalars = {}  # (value, type, dtype name, placement) -> a 0-d broadcast tensor, reused


_C_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def c_floats(*arrays):
    """Whether the C++ kernels take these pieces: numpy arrays of one dtype, float32 or float64
    (other dtypes and GPU pieces take the numpy / cupy steps)."""
    first = arrays[0].dtype
    return all(type(a) is np.ndarray and a.dtype == first for a in arrays) and first in _C_FLOATS


def _scalar(value, dt, like):
    """A Python/numpy scalar as a 0-d tensor of dtype dt next to `like` (global: broadcast on its
    placement; taken on trust, as checking it would cost a collective per op)."""
    placement = like._placement
    if placement is None:
        local = like._local
        array = np.asarray(value, dt.np)
        return _made(Tensor(array if type(local) is np.ndarray else array_module(local).asarray(array), None, dt))
    key = (value, type(value), dt.name, placement)
    if value == 0 and type(value) is float and math.copysign(1.0, value) < 0:
        key += ("-0",)  # -0.0 == 0.0: keep their tensors apart
    found = _scalars.get(key)
    if found is not None:
        return found
    t = tensor(np.asarray(value, dt.np), placement=placement, sbp=(broadcast,) * placement.ndim, check_meta=False)
    if len(_scalars) < 4096 and value == value:  # a NaN never finds itself: not kept
        _scalars[key] = t
    return t


def as_tensor(value, like):
    """A Python/numpy scalar or array as a tensor next to `like` (global: broadcast, same placement).
    A scalar takes the dtype PyTorch gives it next to `like` (dtype.combine: an int next to a float
    tensor takes the tensor's dtype, a float next to an integer tensor the default float dtype);
    data (lists, arrays) takes gt.tensor's dtype (Python floats: the default float dtype)."""
    if isinstance(value, Tensor):
        return value
    dt = scalar_dtype(value)
    if dt is not None:
        return _scalar(value, _dtype.combine(((like._dtype, DIM if like._global_shape else ZERO), (dt, SCALAR))), like)
    return _next_to(host_array(value), like, check=True)  # checked like gt.tensor's data: ranks that differ raise


def constant(array, like):
    """An array every rank computes alike from global facts (shapes, static arguments: an index, a
    kernel's weights) as a tensor next to `like` (global: broadcast, same placement), taken on trust:
    as_tensor's check of user data would cost a collective per call."""
    return _next_to(array, like, check=False)


def constant_full(shape, value, like, dtype=None):
    """constant(np.full(shape, value, dtype or like's dtype), like), filled where it lives: on a
    device a Python number is written there, with np.full's bits (an upload waits for the stream)."""
    dt = like._dtype if dtype is None else _dtype.to_dtype(dtype)
    where = {"placement": like.placement, "sbp": (broadcast,) * like.placement.ndim} if like.is_global else \
        {"device": like.device}
    return full(tuple(shape), value, dtype=dt, **where)


def _next_to(array, like, check):
    """array as a tensor next to `like`: global, broadcast on its placement (its data checked alike on
    every rank when `check`), or local on like's device."""
    if like.is_global:
        return tensor(array, placement=like.placement, sbp=(broadcast,) * like.placement.ndim, check_meta=check)
    return _made(Tensor(array_module(like._local).asarray(array)))


def own_tensor(value, like=None):
    """value as a tensor of its own dtype (a scalar: bool, int64 or the default float dtype; data:
    gt.tensor's), next to `like` when given (global: broadcast on its placement)."""
    if isinstance(value, Tensor):
        return value
    dt = scalar_dtype(value)
    if like is None:
        return _made(Tensor(np.asarray(value, dt.np) if dt is not None else host_array(value)))
    return _scalar(value, dt, like) if dt is not None else as_tensor(value, like)


def tensors(*values):
    """The values as tensors, scalars placed next to the first tensor among them (no promotion:
    each keeps its dtype; see `promoted` for the ops that combine their inputs' dtypes)."""
    for v in values:  # all tensors already (a layer's input, weight, bias): no generator frames
        if not isinstance(v, Tensor):
            break
    else:
        return list(values)
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if like is None:
        return [_made(Tensor(host_array(v))) for v in values]
    return [as_tensor(v, like) for v in values]


# --- type promotion ------------------------------------------------------------------------------
# The result dtype of a combination of operand kinds, (dtype name, priority) each, with the op's
# mode, is computed once and kept: a repeated mixed-dtype op pays one dict lookup, plus a cast of
# each input whose dtype differs. Modes: None (the promoted dtype), "float" (true division: the
# default float dtype when the promoted one is not floating), "nobool" (floor_divide, mod, pow:
# PyTorch refuses two bool operands), "subtract" (PyTorch refuses any bool operand, a Python bool
# too). Every input of the key is a global fact, so every rank decides alike.
_results = {}


def kind(v):
    """(DType, priority) of a Tensor or a scalar; None for other data."""
    if isinstance(v, Tensor):
        return v._dtype, (DIM if v._global_shape else ZERO)
    dt = scalar_dtype(v)
    return None if dt is None else (dt, SCALAR)


def result_dtype(kinds, mode=None, name="op"):
    """The dtype the inputs of an op are cast to before its kernel (see _results)."""
    key = (tuple((dt.name, p) for dt, p in kinds), mode, _dtype._default[0].name)
    found = _results.get(key)
    if found is None:
        found = _dtype.combine(kinds)
        if mode == "float" and not found.is_floating and not found.is_complex:
            found = _dtype.get_default_dtype()
        elif (mode == "nobool" and found.np.kind == "b") or (
                mode == "subtract" and any(dt.np.kind == "b" for dt, _ in kinds)):
            raise TypeError(f"{name}: not supported for bool operands (as in PyTorch); cast to an integer dtype "
                            f"first" + (" (to invert a mask, use logical_not)" if mode == "subtract" else ""))
        _results[key] = found
    return found


def cast_to(t, dt):
    """t as dtype dt (t itself when it has it); the cast is differentiable (its gradient comes back
    in t's dtype)."""
    if t._dtype is dt or t._dtype == dt:
        return t
    return apply("cast", [t], {"dtype": dt.np})


def promoted(*values, mode=None, like=None, name="op"):
    """The values as tensors of one dtype, PyTorch's result type of theirs (dtype.combine):
    tensors are cast (differentiably), scalars made in that dtype next to `like` (default: the
    first tensor among the values). Only global facts decide it (dtypes, global ranks, scalar
    kinds), so every rank casts alike."""
    values = list(values)
    if like is None:
        like = next((v for v in values if isinstance(v, Tensor)), None)
    kinds = []
    for i, v in enumerate(values):
        k = kind(v)
        if k is None:  # data: a tensor as gt.tensor makes it
            v = values[i] = as_tensor(v, like) if like is not None else _made(Tensor(host_array(v)))
            like = like if like is not None else v
            k = kind(v)
        kinds.append(k)
    dt = result_dtype(kinds, mode, name)
    if like is None:  # scalars only: local 0-d tensors
        return [_made(Tensor(np.asarray(v, dt.np))) for v in values]
    return [cast_to(v, dt) if isinstance(v, Tensor) else _scalar(v, dt, like) for v in values]


_PY_SCALARS = frozenset({bool, int, float})
_pairs = {}  # (dtype name or scalar type, priority, the same for the other operand, mode, default) -> DType


def promoted_pair(x, y, mode=None, name="op"):
    """promoted(x, y) for a binary op, cheap in the common cases (two tensors, or one and a Python
    bool/int/float): one dict lookup keyed by the operands' kinds, then a cast of each
    tensor whose dtype differs and the scalar made in the result dtype (cached when global)."""
    xt, yt = isinstance(x, Tensor), isinstance(y, Tensor)
    if xt:
        ka, pa = x._dtype.name, (DIM if x._global_shape else ZERO)
    elif yt and type(x) in _PY_SCALARS:
        ka, pa = type(x), SCALAR
    else:
        return promoted(x, y, mode=mode, name=name)
    if yt:
        kb, pb = y._dtype.name, (DIM if y._global_shape else ZERO)
    elif type(y) in _PY_SCALARS:
        kb, pb = type(y), SCALAR
    else:
        return promoted(x, y, mode=mode, name=name)
    key = (ka, pa, kb, pb, mode, _dtype._default[0].name)
    dt = _pairs.get(key)
    if dt is None:
        dt = _pairs[key] = result_dtype([kind(x), kind(y)], mode, name)
    if xt:
        if x._dtype is not dt:
            x = apply("cast", [x], {"dtype": dt.np})
        if yt:
            return [x, y if y._dtype is dt else apply("cast", [y], {"dtype": dt.np})]
        return [x, _scalar(y, dt, x)]
    return [_scalar(x, dt, y), y if y._dtype is dt else apply("cast", [y], {"dtype": dt.np})]


def dims_arg(dim, ndim):
    """dim (int, tuple or None) as a sorted tuple of non-negative dims, or None."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted(wrap_dim(d, ndim) for d in dims))


__all__ = ["apply", "as_tensor", "constant", "tensors", "own_tensor", "promoted", "promoted_pair", "result_dtype",
           "cast_to", "kind", "dims_arg", "products_in_float32"]


def float32_for_bfloat16(fn):
    """fn (a composite of registered ops, its first argument a tensor) run in float32 on a bfloat16
    input and its result rounded to bfloat16 once, as OneFlow's and PyTorch's bfloat16 kernels
    compute (each op of the composite rounding to bfloat16 would drift by an ulp or more)."""
    def run(input, *args, **kwargs):
        if isinstance(input, Tensor) and input._dtype is _dtype.bfloat16:
            out = fn(input.float(), *args, **kwargs)
            return out.bfloat16() if isinstance(out, Tensor) and out._dtype is _dtype.float32 else out
        return fn(input, *args, **kwargs)
    run.__name__, run.__qualname__, run.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    run.__wrapped__ = fn
    return run


_HALF_NP = (np.dtype(np.float16), _dtype.bfloat16.np)


def products_in_float32(kernel):
    """A product kernel (matmul, linear, conv) on float16/bfloat16 numpy pieces run in float32 and
    each result rounded once to the inputs' dtype, as PyTorch's CPU kernels accumulate (numpy's
    float16 matmul has no BLAS, ml_dtypes' bfloat16 matmul returns float32). Cupy pieces pass through."""
    def run(*arrays, **static):
        for a in arrays:  # a loop, not any() over a generator: one frame fewer per product op
            if type(a) is np.ndarray and a.dtype in _HALF_NP:
                break
        else:
            return kernel(*arrays, **static)
        want = np.result_type(*[a for a in arrays if a is not None])
        if static.get("out") is not None:
            static["out"] = None  # the caller copies a fresh result where it wanted it
        wide = [a.astype(np.float32) if a is not None and a.dtype in _HALF_NP else a for a in arrays]
        result = kernel(*wide, **static)
        if isinstance(result, tuple):
            return tuple(r.astype(want) if r.dtype == np.float32 else r for r in result)
        return result.astype(want) if result.dtype == np.float32 else result
    run.__name__, run.__qualname__, run.__doc__ = kernel.__name__, kernel.__qualname__, kernel.__doc__
    return run
