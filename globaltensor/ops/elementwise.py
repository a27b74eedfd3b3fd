"""Element-wise ops: the unary and binary tables (kernel, linearity for the P rows, derivative) and others.

Besides the tables: where, clip, cast, clone, masked_fill (Paddle's scale, add_n, ...: elementwise_extras).
Complex inputs: the conjugate Wirtinger rule (see _unary_backward; complex_ops.py has the complex-only ops).
Derivatives are written with gt ops, so their collectives are inserted by the dispatcher.
x: the input, y: the output, g: the gradient of the output.
"""
import math

import numpy as np

from .. import _native

from ..registry import rules
from ._front import apply, c_floats, cast_to, kind, own_tensor, promoted, promoted_pair, result_dtype, tensors
from .edge_kernels import power_kernel, sign_kernel
from ..registry import op
from .. import dtype as _dtype
from ..backends import devices
from ..tensor import Tensor
from ..errors import DTypeError, ShapeError

_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_kernel(x):
    if isinstance(x, (float, int, np.generic)):  # a 0-dim piece may come as a scalar
        x = np.asarray(x)
    dtype = x.dtype if _dtype.to_dtype(x.dtype).is_floating else np.float64
    if not isinstance(x, np.ndarray) and not devices.simulated():  # cupy: no Python callbacks on the GPU
        from cupyx.scipy.special import erf
        return erf(x.astype(dtype))
    if c_floats(x):  # libm's erf in one C++ loop: math.erf's values
        out = np.empty(x.shape, x.dtype)
        _native.erf(out, np.ascontiguousarray(x))
        return out
    return _erf(x).astype(dtype)




def _zeros(x, y, g):
    """A piecewise constant op's gradient: zeros (as PyTorch), not none."""
    return g * 0.0


def _sqrt_pi_exp(x):
    return (-(x * x)).exp() * (2.0 / math.sqrt(math.pi))


# name: (kernel, linear, derivative (x, y, g) -> dx or None for a zero/undefined gradient)
UNARY = {
    "abs": (np.abs, None, lambda x, y, g: _abs_grad(x, y, g)),
    "acos": (np.arccos, None, lambda x, y, g: -g / sqrt(1 - x * x)),
    "asin": (np.arcsin, None, lambda x, y, g: g / sqrt(1 - x * x)),
    "atan": (np.arctan, None, lambda x, y, g: g / (1 + x * x)),
    "ceil": (np.ceil, None, _zeros),
    "cos": (np.cos, None, lambda x, y, g: -g * sin(x)),
    "cosh": (np.cosh, None, lambda x, y, g: g * sinh(x)),
    "erf": (_erf_kernel, None, lambda x, y, g: g * _sqrt_pi_exp(x)),
    "exp": (np.exp, None, lambda x, y, g: g * y),
    "floor": (np.floor, None, _zeros),
    "log": (np.log, None, lambda x, y, g: g / x),
    "log10": (np.log10, None, lambda x, y, g: g / (x * math.log(10))),
    "log1p": (np.log1p, None, lambda x, y, g: g / (1 + x)),
    "log2": (np.log2, None, lambda x, y, g: g / (x * math.log(2))),
    "reciprocal": (np.reciprocal, None, lambda x, y, g: -g * y * y),
    "round": (np.round, None, _zeros),
    "rsqrt": (lambda x: 1 / np.sqrt(x), None, lambda x, y, g: g * y * y * y * -0.5),
    "sign": (sign_kernel, None, _zeros),
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
    "conj": (np.conj, "unary", lambda x, y, g: conj(g) if g._dtype.is_complex else g),
    "real": (np.real, "unary", lambda x, y, g: cast(g, x.dtype) if x._dtype.is_complex else g),
    "imag": (lambda x: np.zeros_like(np.real(x)) if not np.iscomplexobj(x) else np.imag(x), "unary",
             lambda x, y, g: g * 0.0 if not x._dtype.is_complex else cast(g, x.dtype) * 1j),
    "relu": (lambda x: np.maximum(x, x.dtype.type(0)), None, lambda x, y, g: apply("relu_backward", [g, x])),
    "sigmoid": (lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype), None, lambda x, y, g: g * y * (1 - y)),
}

# Dtypes of unary ops on integer and bool inputs, as PyTorch: these give the default float dtype
# (the input is cast to it before the kernel) ...
FLOAT_RESULT = frozenset({"acos", "asin", "atan", "cos", "cosh", "erf", "exp", "log", "log10", "log1p", "log2",
                          "reciprocal", "rsqrt", "sin", "sinh", "sqrt", "tan", "tanh", "sigmoid"})
# ... these refuse bool (PyTorch has no kernel for it; numpy's would give bool or float16) ...
NO_BOOL = frozenset({"abs", "ceil", "floor", "round", "neg", "relu"})
# ... square of bool is int64; the rest keep the input's dtype or give bool (isfinite, isinf, isnan, logical_not).

# name: (kernel, linear, (d/da, d/db) as functions of (a, b, y, g); None: no gradient)
BINARY = {
    "add": (np.add, "sum", (lambda a, b, y, g: g, lambda a, b, y, g: g)),
    "subtract": (np.subtract, "sum", (lambda a, b, y, g: g, lambda a, b, y, g: -g)),
    "multiply": (np.multiply, "each", (lambda a, b, y, g: g * b, lambda a, b, y, g: g * a)),
    "divide": (np.true_divide, "first", (lambda a, b, y, g: g / b, lambda a, b, y, g: -g * y / b)),
    "floor_divide": (np.floor_divide, None, None),
    "mod": (np.mod, None, (lambda a, b, y, g: g, lambda a, b, y, g: -g * floor_divide(a, b))),
    # as PyTorch: d/da is 0 where b == 0, d/db is 0 where a == 0 (not 0 * inf, 0 * log(0))
    "pow": (power_kernel, None, (lambda a, b, y, g: g * where(b == 0, 0.0, b * pow(a, b - 1)),
                             lambda a, b, y, g: g * y * log(where(a == 0, 1.0, a)))),
    # ties share the gradient evenly (PyTorch; what central differences give)
    "maximum": (np.maximum, None, (lambda a, b, y, g: _share(g, a > b, a == b), lambda a, b, y, g: _share(g, a < b, a == b))),
    "minimum": (np.minimum, None, (lambda a, b, y, g: _share(g, a < b, a == b), lambda a, b, y, g: _share(g, a > b, a == b))),
    "equal": (np.equal, None, None), "not_equal": (np.not_equal, None, None),
    "greater_equal": (np.greater_equal, None, None), "greater_than": (np.greater, None, None),
    "less_equal": (np.less_equal, None, None), "less_than": (np.less, None, None),
    "logical_and": (np.logical_and, None, None), "logical_or": (np.logical_or, None, None),
    "logical_xor": (np.logical_xor, None, None),
}


def _share(g, wins, ties):
    """g where an operand wins, g / 2 where it ties, 0 elsewhere (maximum/minimum's backward)."""
    return g * (cast(wins, g.dtype) + cast(ties, g.dtype) * 0.5)


# Ops whose complex derivative is not the holomorphic rule g * conj(f'(z)) (or that refuse complex)
NOT_HOLOMORPHIC = frozenset({"abs", "conj", "real", "imag", "isfinite", "isinf", "isnan", "logical_not"})


def _abs_grad(x, y, g):
    """g * sign(x); for complex x, g * x / |x| (0 where x = 0), PyTorch's sgn."""
    if not x._dtype.is_complex:
        return g * sign(x)
    return cast(g, x.dtype) * (x / where(y == 0, 1.0, y))


def _unary_backward(derivative, holomorphic=True):
    """derivative(x, y, g) = g * f'(x); for complex inputs of a holomorphic op, PyTorch's
    conjugate Wirtinger rule g * conj(f'(x)) = conj(derivative(x, y, conj(g)))."""
    def backward(ctx, g):
        x = ctx.inputs[0]
        if holomorphic and x._dtype.is_complex:
            return conj(derivative(x, ctx.outputs[0], conj(g)))
        return derivative(x, ctx.outputs[0], g)
    return backward


def _binary_backward(derivatives):
    """Only the inputs that require grad get one (a constant operand costs no ops)."""
    da_fn, db_fn = derivatives

    def backward(ctx, g):
        a, b = ctx.inputs
        y = ctx.outputs[0]
        if a._dtype.is_complex or b._dtype.is_complex:  # one dtype (promoted): the conjugate Wirtinger rule (see unary)
            gc = conj(g)
            da = sum_to(conj(da_fn(a, b, y, gc)), a.shape) if a.requires_grad else None
            db = sum_to(conj(db_fn(a, b, y, gc)), b.shape) if b.requires_grad else None
            return da, db
        da = sum_to(da_fn(a, b, y, g), a.shape) if a.requires_grad else None
        db = sum_to(db_fn(a, b, y, g), b.shape) if b.requires_grad else None
        return da, db
    return backward


def sum_to(g, shape):
    """g summed over the dims numpy broadcasting added, back to `shape` (None stays None)."""
    if g is None or tuple(g.shape) == tuple(shape):
        return g
    lead = len(g.shape) - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return g.sum(dims, keepdim=True).reshape(shape)  # methods: reduction and shape come after this family


def _in_float32_for_bfloat16(kernel):
    """The kernel on a bfloat16 piece in float32, rounded once (as OneFlow's and PyTorch's kernels)."""
    def run(x):
        if x.dtype == _dtype.bfloat16.np:
            out = kernel(x.astype(np.float32))
            return out.astype(x.dtype) if out.dtype == np.float32 else out  # bool results (isfinite) stay bool
        return kernel(x)
    return run


def _make_unary(name, kernel, linear, derivative):
    backward = _unary_backward(derivative, name not in NOT_HOLOMORPHIC) if derivative else _zero_grad
    op(name, rules.elementwise(linear), backward)(_in_float32_for_bfloat16(kernel))

    if name in FLOAT_RESULT:
        def front(input):
            if type(input) is not Tensor:
                (input,) = tensors(input)
            if not input._dtype.is_floating and not input._dtype.is_complex:  # integer or bool: the default
                input = cast_to(input, _dtype.get_default_dtype())                # float dtype, as PyTorch
            return apply(name, [input])
        doc = "; integer and bool inputs give the default float dtype"
    elif name in NO_BOOL or name == "square":
        def front(input):
            if type(input) is not Tensor:
                (input,) = tensors(input)
            if input._dtype is _dtype.bool:
                if name == "square":
                    input = cast_to(input, _dtype.int64)
                else:
                    raise TypeError(f"{name}: not supported for bool tensors (as in PyTorch); cast to an integer "
                                    f"or float dtype first")
            return apply(name, [input])
        doc = "; keeps the input's dtype" + ("" if name == "square" else ", bool refused")
    else:
        def front(input):
            return apply(name, [input] if type(input) is Tensor else tensors(input))
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
        def front(input, other):
            # the hot path: two floating tensors of one dtype pay no promotion
            if type(input) is Tensor and type(other) is Tensor and input._dtype is other._dtype and input._dtype.is_floating:
                return apply(name, [input, other])
            return apply(name, promoted_pair(input, other, mode, name))
    elif mode in ("nobool", "subtract"):
        def front(input, other):
            if type(input) is Tensor and type(other) is Tensor and input._dtype is other._dtype and input._dtype is not _dtype.bool:
                return apply(name, [input, other])
            return apply(name, promoted_pair(input, other, mode, name))
    else:
        def front(input, other):
            if type(input) is Tensor and type(other) is Tensor and input._dtype is other._dtype:
                return apply(name, [input, other])
            return apply(name, promoted_pair(input, other, None, name))
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
RAW_BINARY = {_name: globals()[_name] for _name in BINARY}  # what the operators (x + y) call


def add(input, other, *more, alpha=1):
    """input + alpha * other, element-wise with numpy broadcasting; promoted as in PyTorch
    (torch.result_type: by category bool < integer < floating, a Python scalar never widens a
    tensor of its category). More tensors: OneFlow's add_n (same sizes, same dtype), summed."""
    if more:
        return _add_n((input, other) + more)
    return RAW_BINARY["add"](input, _times(other, alpha))


def _add_n(inputs):
    """The sum of tensors of one number of elements and one dtype (OneFlow's add_n and its words)."""
    first, *rest = inputs = tensors(*inputs)
    for t in rest:  # every check before the first add (and its collectives)
        if t.numel() != first.numel():
            raise ShapeError(f"inconsistent tensor size, expected all tensor to have the same number of elements, but "
                             f"got {first.numel()} and {t.numel()} (add of shapes {[tuple(x.shape) for x in inputs]})")
        if t.dtype != first.dtype:
            raise DTypeError(f"expected all tenser to have same type, but found {first.dtype} and {t.dtype}")
    for t in rest:
        first = RAW_BINARY["add"](first, t)
    return first


def subtract(input, other, *, alpha=1):
    """input - alpha * other (see add)."""
    return RAW_BINARY["subtract"](input, _times(other, alpha))


def _times(value, alpha):
    if alpha == 1:
        return value
    return RAW_BINARY["multiply"](value, alpha) if isinstance(value, Tensor) else value * alpha


def divide(input, other, *, rounding_mode=None):
    """input / other: true division (integers give the default float dtype), or rounded:
    rounding_mode="floor" (floor_divide) or "trunc" (towards zero, in the promoted dtype)."""
    if rounding_mode is None:
        return RAW_BINARY["divide"](input, other)
    if rounding_mode not in ("floor", "trunc"):
        raise ValueError(f"divide: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
    floor = RAW_BINARY["floor_divide"](input, other)
    if rounding_mode == "floor":
        return floor
    a, b = tensors(input, other)
    inexact = RAW_BINARY["not_equal"](RAW_BINARY["multiply"](floor, b), a)
    opposite = RAW_BINARY["not_equal"](RAW_BINARY["less_than"](a, 0), RAW_BINARY["less_than"](b, 0))
    return RAW_BINARY["add"](floor, cast(RAW_BINARY["logical_and"](inexact, opposite), floor.dtype))


def pow(input, exponent):  # noqa: A001 - the public name
    """input ** exponent, element-wise (numpy broadcasting, PyTorch's promotion)."""
    return RAW_BINARY["pow"](input, exponent)


@op("where", lambda s, o, st: rules.elementwise()(s, o, st) + [((rules.B, rules.P, rules.P), (rules.P,))],
    lambda ctx, g: (None, sum_to(where(ctx.inputs[0], g, 0), ctx.inputs[1].shape),
                    sum_to(where(ctx.inputs[0], 0, g), ctx.inputs[2].shape)),
    meta=lambda s, dt, st: ([rules.broadcast_shape(s)], [np.result_type(dt[1].np, dt[2].np)]))
def _where(condition, x, y):
    return np.where(condition, x, y)


def where(condition, input=None, other=None):
    """input where condition holds, else other (numpy broadcasting); where(c, P, P) stays
    partial. input and other are promoted as in PyTorch (where(c, int tensor, 0.5) is of the
    default float dtype). where(condition) alone: nonzero(condition, as_tuple=True)."""
    if input is None and other is None:
        return Tensor.nonzero(condition, as_tuple=True)
    like = next((v for v in (condition, input, other) if isinstance(v, Tensor)), None)
    condition = own_tensor(condition, like)
    if condition.is_global and not condition._dtype.is_floating and rules.P in condition.sbp:
        # a partial bool/int condition: its pieces summed in int64 (no collective reduces bool)
        condition = RAW_BINARY["not_equal"](cast(condition, "int64"), 0)
    if type(input) is Tensor and type(other) is Tensor and input._dtype is other._dtype:
        return apply("where", [condition, input, other])
    return apply("where", [condition, *promoted(input, other, like=condition, name="where")])


def clone(input):
    """A copy of x with its own piece (the same layout); differentiable, as torch.clone."""
    (input,) = tensors(input)
    return cast(input, input.dtype)


def masked_fill(input, mask, value):
    """x with `value` where the bool `mask` (broadcast to x's shape) holds; x's dtype (as PyTorch)."""
    (input,) = tensors(input)
    mask = tensors(input, mask)[1]
    if mask.dtype.name != "bool":
        raise TypeError(f"masked_fill: the mask must be a bool tensor, got {mask.dtype!r}")
    out = where(mask, cast(tensors(input, value)[1], input.dtype), input)
    if tuple(out.shape) != tuple(input.shape):
        raise RuntimeError(f"masked_fill: a mask of shape {tuple(mask.shape)} does not broadcast to the tensor's shape "
                           f"{tuple(input.shape)}")
    return out


@op("clip", rules.elementwise(), lambda ctx, g: g * ((ctx.inputs[0] >= _lo(ctx)) * (ctx.inputs[0] <= _hi(ctx))))
def _clip(x, min=None, max=None):
    return np.clip(x, min, max)


def _lo(ctx):
    return -np.inf if ctx.static["min"] is None else ctx.static["min"]


def _hi(ctx):
    return np.inf if ctx.static["max"] is None else ctx.static["max"]


def clip(input, min=None, max=None):
    """Limit values to [min, max] (either may be None); the result dtype is PyTorch's (clip of an
    integer tensor to a float bound gives the default float dtype)."""
    (input,) = tensors(input)
    bounds = [b for b in (min, max) if b is not None]
    if bounds:
        input = cast_to(input, result_dtype([kind(input)] + [kind(b) for b in bounds], name="clip"))
    return apply("clip", [input], {"min": min, "max": max})


def _cast_backward(ctx, g):
    """g in the input's dtype; a real input of a complex result takes the real part (PyTorch)."""
    x = ctx.inputs[0]
    if g._dtype.is_complex and not x._dtype.is_complex:
        g = real(g)  # noqa: F821 - from the UNARY table
    return cast(g, x.dtype)


@op("cast", rules.elementwise("unary"), _cast_backward)
def _cast(x, dtype=None):
    return x.astype(dtype)


def cast(input, dtype):
    """x converted to dtype (numpy's astype); differentiable, the gradient comes back in x's dtype."""
    return apply("cast", tensors(input), {"dtype": _dtype.to_dtype(dtype).np})
