"""Element-wise ops: unary and binary tables (kernel, linearity for the P rows, derivative).

Derivatives are written with gt ops, so their collectives are inserted by the dispatcher.
x: the input, y: the output, g: the gradient of the output.
"""
import math

import numpy as np

from . import rules
from ._front import apply, cast_to, kind, own_tensor, promoted, promoted_pair, result_dtype, tensors
from .registry import op
from .. import dtype as _dtype
from ..backends import devices
from ..tensor import Tensor

_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_kernel(x):
    dtype = x.dtype if _dtype.to_dtype(x.dtype).is_floating else np.float64
    if not isinstance(x, np.ndarray) and not devices.simulated():  # cupy: no Python callbacks on the GPU
        from cupyx.scipy.special import erf
        return erf(x.astype(dtype))
    return _erf(x).astype(dtype)


def _sqrt_pi_exp(x):
    from . import exp
    return exp(-(x * x)) * (2.0 / math.sqrt(math.pi))


# name: (kernel, linear, derivative (x, y, g) -> dx or None for a zero/undefined gradient)
UNARY = {
    "abs": (np.abs, None, lambda x, y, g: g * sign(x)),
    "acos": (np.arccos, None, lambda x, y, g: -g / sqrt(1 - x * x)),
    "asin": (np.arcsin, None, lambda x, y, g: g / sqrt(1 - x * x)),
    "atan": (np.arctan, None, lambda x, y, g: g / (1 + x * x)),
    "ceil": (np.ceil, None, None),
    "cos": (np.cos, None, lambda x, y, g: -g * sin(x)),
    "cosh": (np.cosh, None, lambda x, y, g: g * sinh(x)),
    "erf": (_erf_kernel, None, lambda x, y, g: g * _sqrt_pi_exp(x)),
    "exp": (np.exp, None, lambda x, y, g: g * y),
    "floor": (np.floor, None, None),
    "log": (np.log, None, lambda x, y, g: g / x),
    "log10": (np.log10, None, lambda x, y, g: g / (x * math.log(10))),
    "log1p": (np.log1p, None, lambda x, y, g: g / (1 + x)),
    "log2": (np.log2, None, lambda x, y, g: g / (x * math.log(2))),
    "reciprocal": (np.reciprocal, None, lambda x, y, g: -g * y * y),
    "round": (np.round, None, None),
    "rsqrt": (lambda x: 1 / np.sqrt(x), None, lambda x, y, g: g * y * y * y * -0.5),
    "sign": (lambda x: x.copy() if x.dtype == np.bool_ else np.sign(x), None, None),
    "sin": (np.sin, None, lambda x, y, g: g * cos(x)),
    "sinh": (np.sinh, None, lambda x, y, g: g * cosh(x)),
    "sqrt": (np.sqrt, None, lambda x, y, g: g * 0.5 / y),
    "square": (np.square, None, lambda x, y, g: g * 2 * x),
    "tan": (np.tan, None, lambda x, y, g: g * (1 + y * y)),
    "tanh": (np.tanh, None, lambda x, y, g: g * (1 - y * y)),
    "neg": (np.negative, "unary", lambda x, y, g: -g),
    "isfinite": (np.isfinite, None, None),
    "isinf": (np.isinf, None, None),
    "isnan": (np.isnan, None, None),
    "logical_not": (np.logical_not, None, None),
    "conj": (np.conj, "unary", lambda x, y, g: g),
    "real": (np.real, "unary", lambda x, y, g: g),
    "imag": (lambda x: np.zeros_like(np.real(x)) if not np.iscomplexobj(x) else np.imag(x), None, None),
    "relu": (lambda x: np.maximum(x, x.dtype.type(0)), None, lambda x, y, g: g * (x > 0)),
    "sigmoid": (lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype), None, lambda x, y, g: g * y * (1 - y)),
}

# Dtypes of unary ops on integer and bool inputs, as PyTorch: these give the default float dtype
# (the input is cast to it before the kernel) ...
FLOAT_RESULT = frozenset({"acos", "asin", "atan", "cos", "cosh", "erf", "exp", "log", "log10", "log1p", "log2",
                          "reciprocal", "rsqrt", "sin", "sinh", "sqrt", "tan", "tanh", "sigmoid"})
# ... these refuse bool (PyTorch has no kernel for it; numpy's would give bool or float16) ...
NO_BOOL = frozenset({"abs", "ceil", "floor", "round", "neg", "relu"})
# ... square of bool is int64 (PyTorch); the rest keep the input's dtype (sign, square, ceil,
# floor, round, abs, neg, relu of integers) or give bool (isfinite, isinf, isnan, logical_not).

# name: (kernel, linear, (d/da, d/db) as functions of (a, b, y, g); None: no gradient)
BINARY = {
    "add": (np.add, "sum", (lambda a, b, y, g: g, lambda a, b, y, g: g)),
    "subtract": (np.subtract, "sum", (lambda a, b, y, g: g, lambda a, b, y, g: -g)),
    "multiply": (np.multiply, "each", (lambda a, b, y, g: g * b, lambda a, b, y, g: g * a)),
    "divide": (np.true_divide, "first", (lambda a, b, y, g: g / b, lambda a, b, y, g: -g * y / b)),
    "floor_divide": (np.floor_divide, None, None),
    "mod": (np.mod, None, (lambda a, b, y, g: g, lambda a, b, y, g: -g * floor_divide(a, b))),
    "pow": (np.power, None, (lambda a, b, y, g: g * b * pow(a, b - 1), lambda a, b, y, g: g * y * log(a))),
    "maximum": (np.maximum, None, (lambda a, b, y, g: g * (a >= b), lambda a, b, y, g: g * (a < b))),
    "minimum": (np.minimum, None, (lambda a, b, y, g: g * (a <= b), lambda a, b, y, g: g * (a > b))),
    "equal": (np.equal, None, None), "not_equal": (np.not_equal, None, None),
    "greater_equal": (np.greater_equal, None, None), "greater_than": (np.greater, None, None),
    "less_equal": (np.less_equal, None, None), "less_than": (np.less, None, None),
    "logical_and": (np.logical_and, None, None), "logical_or": (np.logical_or, None, None),
    "logical_xor": (np.logical_xor, None, None),
}


def _unary_backward(derivative):
    def backward(ctx, g):
        return derivative(ctx.inputs[0], ctx.outputs[0], g)
    return backward


def _binary_backward(derivatives):
    """Only the inputs that require grad get one (a constant operand costs no ops)."""
    da_fn, db_fn = derivatives

    def backward(ctx, g):
        a, b = ctx.inputs
        y = ctx.outputs[0]
        da = sum_to(da_fn(a, b, y, g), a.shape) if a.requires_grad else None
        db = sum_to(db_fn(a, b, y, g), b.shape) if b.requires_grad else None
        return da, db
    return backward


def sum_to(g, shape):
    """g summed over the dims numpy broadcasting added, back to `shape` (None stays None)."""
    if g is None or tuple(g.shape) == tuple(shape):
        return g
    from .reduction import sum as _sum
    lead = len(g.shape) - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    out = _sum(g, dims, keepdim=True)
    from .shape import reshape
    return reshape(out, shape)


def _make_unary(name, kernel, linear, derivative):
    op(name, rules.elementwise(linear), _unary_backward(derivative) if derivative else _zero_grad)(kernel)

    if name in FLOAT_RESULT:
        def front(x):
            if type(x) is not Tensor:
                (x,) = tensors(x)
            if not x._dtype.is_floating:  # integer or bool: the default float dtype, as PyTorch
                x = cast_to(x, _dtype.get_default_dtype())
            return apply(name, [x])
        doc = "; integer and bool inputs give the default float dtype"
    elif name in NO_BOOL or name == "square":
        def front(x):
            if type(x) is not Tensor:
                (x,) = tensors(x)
            if x._dtype is _dtype.bool:
                if name == "square":
                    x = cast_to(x, _dtype.int64)
                else:
                    raise TypeError(f"{name}: not supported for bool tensors (as in PyTorch); cast to an integer "
                                    f"or float dtype first")
            return apply(name, [x])
        doc = "; keeps the input's dtype" + ("" if name == "square" else ", bool refused")
    else:
        def front(x):
            return apply(name, [x] if type(x) is Tensor else tensors(x))
        doc = ""
    front.__name__ = name
    front.__doc__ = f"Element-wise {name} (numpy semantics{doc})."
    return front


# How each binary op's inputs are promoted (_front.result_dtype's modes): true division gives a
# floating dtype; PyTorch refuses two bool operands of floor_divide, mod and pow, and any bool
# operand of subtract; the rest take the promoted dtype
# (comparisons and logical ops compare in it and give bool).
_MODES = {"divide": "float", "subtract": "subtract", "floor_divide": "nobool", "mod": "nobool", "pow": "nobool"}


def _make_binary(name, kernel, linear, derivative):
    op(name, rules.elementwise(linear), _binary_backward(derivative) if derivative else _zero_grad)(kernel)
    mode = _MODES.get(name)

    if mode == "float":
        def front(x, y):
            # the hot path: two floating tensors of one dtype pay no promotion
            if type(x) is Tensor and type(y) is Tensor and x._dtype is y._dtype and x._dtype.is_floating:
                return apply(name, [x, y])
            return apply(name, promoted_pair(x, y, mode, name))
    elif mode in ("nobool", "subtract"):
        def front(x, y):
            if type(x) is Tensor and type(y) is Tensor and x._dtype is y._dtype and x._dtype is not _dtype.bool:
                return apply(name, [x, y])
            return apply(name, promoted_pair(x, y, mode, name))
    else:
        def front(x, y):
            if type(x) is Tensor and type(y) is Tensor and x._dtype is y._dtype:
                return apply(name, [x, y])
            return apply(name, promoted_pair(x, y, None, name))
    front.__name__ = name
    front.__doc__ = (f"Element-wise {name} with numpy broadcasting; the inputs are promoted as in PyTorch "
                     f"(torch.result_type: by category bool < integer < floating, a Python scalar never widens "
                     f"a tensor of its category)" + (", integers give the default float dtype" if mode == "float"
                                                     else "") + ".")
    return front


def _zero_grad(ctx, *grads):
    return (None,) * len(ctx.inputs)


for _name, _spec in UNARY.items():
    globals()[_name] = _make_unary(_name, *_spec)
for _name, _spec in BINARY.items():
    globals()[_name] = _make_binary(_name, *_spec)


@op("where", lambda s, o, st: rules.elementwise()(s, o, st) + [((rules.B, rules.P, rules.P), (rules.P,))],
    lambda ctx, g: (None, sum_to(where(ctx.inputs[0], g, 0), ctx.inputs[1].shape),
                    sum_to(where(ctx.inputs[0], 0, g), ctx.inputs[2].shape)))
def _where(condition, x, y):
    return np.where(condition, x, y)


def where(condition, x, y):
    """x where condition holds, else y (numpy broadcasting); where(c, P, P) stays partial. x and y
    are promoted as in PyTorch (where(c, int tensor, 0.5) is of the default float dtype)."""
    like = next((v for v in (condition, x, y) if isinstance(v, Tensor)), None)
    condition = own_tensor(condition, like)
    if type(x) is Tensor and type(y) is Tensor and x._dtype is y._dtype:
        return apply("where", [condition, x, y])
    return apply("where", [condition, *promoted(x, y, like=condition, name="where")])


@op("clip", rules.elementwise(), lambda ctx, g: g * ((ctx.inputs[0] >= _lo(ctx)) * (ctx.inputs[0] <= _hi(ctx))))
def _clip(x, min=None, max=None):
    return np.clip(x, min, max)


def _lo(ctx):
    return -np.inf if ctx.static["min"] is None else ctx.static["min"]


def _hi(ctx):
    return np.inf if ctx.static["max"] is None else ctx.static["max"]


def clip(x, min=None, max=None):
    """Limit values to [min, max] (either may be None); the result dtype is PyTorch's (clip of an
    integer tensor to a float bound gives the default float dtype)."""
    (x,) = tensors(x)
    bounds = [b for b in (min, max) if b is not None]
    if bounds:
        x = cast_to(x, result_dtype([kind(x)] + [kind(b) for b in bounds], name="clip"))
    return apply("clip", [x], {"min": min, "max": max})


@op("cast", rules.elementwise("unary"), lambda ctx, g: cast(g, ctx.inputs[0].dtype))
def _cast(x, dtype=None):
    return x.astype(dtype)


def cast(x, dtype):
    """x converted to dtype (numpy's astype); differentiable, the gradient comes back in x's dtype."""
    return apply("cast", tensors(x), {"dtype": _dtype.to_dtype(dtype).np})


@op("scale", rules.elementwise(), lambda ctx, g: g * ctx.static["scale"])
def _scale(x, scale=1.0, bias=0.0, bias_after_scale=True):
    return (x * scale + bias if bias_after_scale else (x + bias) * scale).astype(x.dtype)


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True):
    """Paddle's scale: scale * x + bias (or (x + bias) * scale)."""
    return apply("scale", tensors(x), {"scale": scale, "bias": bias, "bias_after_scale": bias_after_scale})


def increment(x, value=1.0):
    """x + value (Paddle's increment, as a new tensor)."""
    return add(x, value)  # noqa: F821 - defined from the BINARY table


def stanh(x, scale_a=0.67, scale_b=1.7159):
    """scale_b * tanh(scale_a * x)."""
    return tanh(x * scale_a) * scale_b  # noqa: F821


def gelu(x, approximate="none"):
    """x * Phi(x), exact (erf) or with the tanh approximation."""
    if approximate == "tanh":
        return 0.5 * x * (1 + tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))  # noqa: F821
    return x * 0.5 * (1 + erf(x * (1 / math.sqrt(2))))  # noqa: F821


def add_n(inputs):
    """The sum of a list of tensors."""
    inputs = list(inputs)
    total = inputs[0]
    for t in inputs[1:]:
        total = add(total, t)  # noqa: F821
    return total


def allclose(x, y, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True (a 0-d bool tensor) when |x - y| <= atol + rtol * |y| everywhere."""
    from .reduction import all as _all
    close = less_equal(abs(x - y), atol + rtol * abs(y))  # noqa: F821
    if equal_nan:
        close = logical_or(close, logical_and(isnan(x), isnan(y)))  # noqa: F821
    return _all(close)


def equal_all(x, y):
    """True (a 0-d bool tensor) when x and y have the same shape and values."""
    from .reduction import all as _all
    if tuple(x.shape) != tuple(y.shape):
        from .creation import full
        from ..sbp import broadcast
        if x.is_local:
            return full((), False, dtype="bool")
        return full((), False, dtype="bool", placement=x.placement, sbp=(broadcast,) * x.placement.ndim)
    return _all(equal(x, y))  # noqa: F821
