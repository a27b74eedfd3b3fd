"""PyTorch's and OneFlow's everyday names that the families lack: aliases of ops of equal
semantics (sub, mul, eq, clamp, ...), a few element-wise primitives (expm1, exp2, asinh, acosh,
atanh, trunc, fmod, logaddexp: tables, SBP rows and derivatives as in elementwise.py), and
composites of existing ops (which take their SBP rows and gradients from the ops they use)."""
import builtins
import collections
import math

import numpy as np

from .. import dtype as _dtype
from ..registry import op, rules
from ..tensor import Tensor
from ._front import apply, cast_to, promoted_pair, tensors
from .elementwise import (_binary_backward, _unary_backward, _zeros, abs, acos, asin, atan, cast, clip, divide, equal, exp,
                          greater_equal, greater_than, isinf, isnan, less_equal, less_than, log, maximum, minimum,
                          mod, multiply, neg, not_equal, pow, sign, sqrt, subtract, where)  # noqa: A004
from .reduction import amax, amin, mean, sum  # noqa: A004
from .reduction_composites import std, var
from .sorting import sort

# --- primitives: name -> (kernel, derivative (x, y, g)); integer and bool inputs give the default float dtype
_FLOAT_UNARY = {
    "expm1": (np.expm1, lambda x, y, g: g * (y + 1)),
    "exp2": (np.exp2, lambda x, y, g: g * y * math.log(2)),
    "asinh": (np.arcsinh, lambda x, y, g: g / sqrt(x * x + 1)),
    "acosh": (np.arccosh, lambda x, y, g: g / sqrt(x * x - 1)),
    "atanh": (np.arctanh, lambda x, y, g: g / (1 - x * x)),
}


def _float_unary(name, kernel, derivative):
    op(name, rules.elementwise(None), _unary_backward(derivative))(kernel)

    def front(input):
        (input,) = tensors(input)
        if not input._dtype.is_floating and not input._dtype.is_complex:
            input = cast_to(input, _dtype.get_default_dtype())
        return apply(name, [input])
    front.__name__ = name
    front.__doc__ = f"Element-wise {name} (integer and bool inputs give the default float dtype)."
    return front


for _name, _spec in _FLOAT_UNARY.items():
    globals()[_name] = _float_unary(_name, *_spec)

op("trunc", rules.elementwise(None), _unary_backward(_zeros))(np.trunc)


def trunc(input):
    """Element-wise rounding towards zero (gradient 0, as PyTorch); keeps the dtype."""
    (input,) = tensors(input)
    if input._dtype is _dtype.bool:
        raise TypeError("trunc: not supported for bool tensors (as in PyTorch)")
    return input if not input._dtype.is_floating else apply("trunc", [input])


op("fmod", rules.elementwise(None), _binary_backward(
    (lambda a, b, y, g: g, lambda a, b, y, g: -g * divide(a, b, rounding_mode="trunc"))))(np.fmod)
op("logaddexp", rules.elementwise(None), _binary_backward(
    (lambda a, b, y, g: g * exp(a - y), lambda a, b, y, g: g * exp(b - y))))(np.logaddexp)


def fmod(input, other):
    """C's fmod: the remainder of division rounded towards zero (the sign of input)."""
    return apply("fmod", promoted_pair(input, other, "nobool", "fmod"))


def logaddexp(input, other):
    """log(exp(input) + exp(other)), computed stably."""
    return apply("logaddexp", promoted_pair(input, other, "float", "logaddexp"))


# --- aliases: PyTorch's names of ops with equal semantics
sub, mul, div, true_divide, remainder, negative, absolute = subtract, multiply, divide, divide, mod, neg, abs
eq, ne, ge, gt, le, lt, greater, less = (equal, not_equal, greater_equal, greater_than, less_equal, less_than,
                                         greater_than, less_than)
fix, sgn = trunc, sign
arcsinh, arccosh, arctanh = globals()["asinh"], globals()["acosh"], globals()["atanh"]
arccos, arcsin, arctan = acos, asin, atan


# --- element-wise composites
def clamp(input, min=None, max=None):  # noqa: A002 - PyTorch's names
    """Values limited to [min, max]; a bound may be a number, a tensor (broadcast) or None."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = input if min is None else maximum(input, min)
        return out if max is None else minimum(out, max)
    if min is None and max is None:
        raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
    return clip(input, min, max)


def clamp_min(input, min):  # noqa: A002
    """clamp(input, min=min)."""
    return clamp(input, min=min)


def clamp_max(input, max):  # noqa: A002
    """clamp(input, max=max)."""
    return clamp(input, max=max)


def rsub(input, other, alpha=1):
    """other - alpha * input (PyTorch's reflected subtraction)."""
    return subtract(other, input if alpha == 1 else multiply(input, alpha))


def frac(input):
    """input - trunc(input): the fractional part, with input's sign."""
    return subtract(input, trunc(input))


def logaddexp2(input, other):
    """log2(2 ** input + 2 ** other), computed stably."""
    ln2 = math.log(2)
    return divide(logaddexp(multiply(input, ln2), multiply(other, ln2)), ln2)


def hypot(input, other):
    """sqrt(input ** 2 + other ** 2), element-wise, scaled by the larger magnitude so that no square
    overflows or underflows (hypot(1e30, 1e-40) in float32 is 1e30, not inf)."""
    a, b = abs(input), abs(other)
    big, small = maximum(a, b), minimum(a, b)
    ratio = where(equal(big, 0), 0.0, divide(small, where(equal(big, 0), 1.0, big)))
    return multiply(big, sqrt(1 + ratio * ratio))


def xlogy(input, other):
    """input * log(other), 0 where input is 0 (even where other is 0); as PyTorch, the gradient
    for input is log(other) there too where other > 0."""
    (x, y) = tensors(input, other)
    safe = not_equal(x, 0) | greater_than(y, 0)
    return where(safe, multiply(x, log(where(safe, y, 1.0))), 0.0)


def lerp(input, end, weight):
    """input + weight * (end - input)."""
    return input + multiply(weight, subtract(end, input))


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2."""
    return input + multiply(multiply(tensor1, tensor2), value)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2."""
    return input + multiply(divide(tensor1, tensor2), value)


def float_power(input, exponent):
    """pow in float64 (as PyTorch's float_power)."""
    a, b = (cast(v, "float64") if isinstance(v, Tensor) else v for v in (input, exponent))
    return pow(a, b)


def erfc(input):
    """1 - erf(input), computed as such (math.erfc: no cancellation where erf(x) is near 1)."""
    return apply("erfc", tensors(input))


def logit(input, eps=None):
    """log(p / (1 - p)), p = input clamped to [eps, 1 - eps] when eps is given; integers are taken
    as floats first (1 - p in int8 would wrap)."""
    (input,) = tensors(input)
    if not (input._dtype.is_floating or input._dtype.is_complex):
        input = cast(input, _dtype.get_default_dtype())
    p = input if eps is None else clip(input, eps, 1 - eps)
    return log(divide(p, 1 - p))


def deg2rad(input):
    """Degrees to radians."""
    return multiply(input, math.pi / 180)


def rad2deg(input):
    """Radians to degrees."""
    return multiply(input, 180 / math.pi)


def fmax(input, other):
    """maximum, but a nan loses to a number (nan only where both are)."""
    (a, b) = tensors(input, other)
    return where(isnan(b), a, where(isnan(a), b, maximum(a, b)))


def fmin(input, other):
    """minimum, but a nan loses to a number (nan only where both are)."""
    (a, b) = tensors(input, other)
    return where(isnan(b), a, where(isnan(a), b, minimum(a, b)))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| element-wise (equal infinities are close)."""
    (a, b) = tensors(input, other)
    close = equal(a, b) | less_equal(abs(a - b), atol + rtol * abs(b))
    return close | (isnan(a) & isnan(b)) if equal_nan else close


def isposinf(input):
    """input == +inf."""
    return isinf(input) & greater_than(input, 0)


def isneginf(input):
    """input == -inf."""
    return isinf(input) & less_than(input, 0)


def nan_to_num(input, nan=None, posinf=None, neginf=None):
    """nan, +inf and -inf replaced by nan, posinf and neginf (defaults, as torch's: 0, the dtype's extremes)."""
    (input,) = tensors(input)
    if not input._dtype.is_floating:
        return input
    big = float(np.finfo(input._dtype.np).max)
    out = where(isnan(input), 0.0 if nan is None else nan, input)
    out = where(isposinf(input), big if posinf is None else posinf, out)
    return where(isneginf(input), -big if neginf is None else neginf, out)


def resolve_conj(input):
    """input itself (real tensors carry no lazy conjugation)."""
    return input


resolve_neg = resolve_conj


# --- reductions written with the reductions
def count_nonzero(input, dim=None):
    """The number of non-zero values over dim (all when None), int64."""
    return sum(not_equal(input, 0), dim)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum with nan taken as 0."""
    (input,) = tensors(input)
    return sum(where(isnan(input), 0.0, input) if input._dtype.is_floating else input, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """mean over the values that are not nan."""
    (input,) = tensors(input)
    return nansum(input, dim, keepdim, dtype=dtype) / sum(~isnan(input), dim, keepdim)


_aminmax = collections.namedtuple("aminmax", ["min", "max"])
_kthvalue = collections.namedtuple("kthvalue", ["values", "indices"])


def aminmax(input, *, dim=None, keepdim=False):
    """(amin, amax) over dim."""
    return _aminmax(amin(input, dim, keepdim), amax(input, dim, keepdim))


def var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """(var, mean) over dim."""
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """(std, mean) over dim."""
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest value along dim (1-based) and its index."""
    values, indices = sort(input, dim)
    dim = dim % builtins.max(input.ndim, 1)
    at = (builtins.slice(None),) * dim + (builtins.slice(k - 1, k) if keepdim else k - 1,)
    return _kthvalue(values[at], indices[at])


def msort(input):
    """sort(input, 0).values."""
    return sort(input, 0)[0]


def cumprod(input, dim, *, dtype=None):
    """The running product along dim; a composite (the lower-triangular products), so its gradient
    is exact where values are 0."""
    from .shape import unsqueeze
    from .reduction import prod
    (input,) = tensors(input)
    if dtype is not None:
        input = cast(input, dtype)
    dim = dim % builtins.max(input.ndim, 1)
    if input.ndim == 0:
        return input * 1
    n = input.shape[dim]
    lower = np.tril(np.ones((n, n), bool)).reshape((n, n) + (1,) * (input.ndim - dim - 1))
    rows = where(tensors(input, lower)[1], unsqueeze(input, dim), 1)  # [..., i, j, ...]: x[j] for j <= i
    return prod(rows, dim + 1)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p over dim, eps) (nn.functional.normalize)."""
    from .reduction_composites import norm
    return divide(input, clip(norm(input, p, dim, keepdim=True), eps))




EVERYDAY = [
    "absolute", "acosh", "addcdiv", "addcmul", "aminmax", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
    "arctanh", "asinh", "atanh", "clamp", "clamp_max", "clamp_min", "count_nonzero", "cumprod", "deg2rad", "div",
    "eq", "erfc", "exp2", "expm1", "fix", "float_power", "fmax", "fmin", "fmod", "frac", "ge", "greater", "gt",
    "hypot", "isclose", "isneginf", "isposinf", "kthvalue", "le", "lerp", "less", "logaddexp", "logaddexp2",
    "logit", "lt", "msort", "mul", "nan_to_num", "nanmean", "nansum", "ne", "negative", "rad2deg", "remainder",
    "resolve_conj", "resolve_neg", "rsub", "sgn", "std_mean", "sub", "true_divide", "trunc", "var_mean", "xlogy"
]
METHODS = [
    "absolute", "acosh", "addcdiv", "addcmul", "aminmax", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
    "arctanh", "asinh", "atanh", "clamp", "clamp_max", "clamp_min", "count_nonzero", "cumprod", "deg2rad", "div",
    "eq", "erfc", "exp2", "expm1", "fix", "float_power", "fmax", "fmin", "fmod", "frac", "ge", "greater", "gt",
    "hypot", "isclose", "isneginf", "isposinf", "kthvalue", "le", "lerp", "less", "logaddexp", "logaddexp2",
    "logit", "lt", "msort", "mul", "nan_to_num", "nanmean", "nansum", "ne", "negative", "rad2deg", "remainder",
    "resolve_conj", "resolve_neg", "sgn", "sub", "true_divide", "trunc", "xlogy"
]  # those torch.Tensor has
