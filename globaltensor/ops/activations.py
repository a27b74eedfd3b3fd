"""Activations outside the unary table: gelu, stanh, softmax and log_softmax; relu's gradient.

gelu exact is one fused primitive with its backward (the tanh approximation a composite);
softmax is one primitive along a dim (its splits along the other dims pass through), log_softmax
a composite over logsumexp."""
import math

import numpy as np

from .. import _native
from .. import dtype as _dtype
from ..registry import rules
from ._front import apply, c_floats, tensors
from .elementwise import _erf_kernel, exp, tanh
from .reduction import _as, _float, sum  # noqa: A004
from .reduction_composites import logsumexp
from ..registry import op
from ..backends import devices
from ..backends.devices import array_module
from ..errors import wrap_dim
from ..dispatch import amp_entry


def stanh(input, scale_a=0.67, scale_b=1.7159):
    """scale_b * tanh(scale_a * x)."""
    return tanh(input * scale_a) * scale_b


def gelu(input, approximate="none"):
    """x * Phi(x), exact (approximate="none") or with the tanh approximation ("tanh")."""
    if not isinstance(approximate, str) or approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if approximate == "tanh":
        return 0.5 * input * (1 + tanh(math.sqrt(2 / math.pi) * (input + 0.044715 * input * input * input)))
    (input,) = tensors(input)
    if not input.dtype.is_floating and not input.dtype.is_complex:  # complex: the op refuses it
        input = input.astype(_dtype.get_default_dtype())
    return apply("gelu", [input])


@op("gelu", rules.elementwise(linear=None), lambda ctx, g: apply("gelu_backward", [g, ctx.inputs[0]]))
def _gelu(x):
    """x * Phi(x) in one C++ pass (float32 through glibc's vector erff, within an ulp of erf); on
    other arrays the composite's steps."""
    if c_floats(x):
        out = np.empty(x.shape, x.dtype)
        _native.gelu(out, np.ascontiguousarray(x))
        return out
    return (x * 0.5 * (1 + _erf_kernel(x * (1 / math.sqrt(2))))).astype(x.dtype, copy=False)


def _gelu_double_backward(ctx, gg):
    """d/dg = gelu'(x) gg (gelu_backward again); d/dx = g gelu''(x) gg, gelu'' = phi(x) (2 - x^2)."""
    g, x = ctx.inputs
    phi = exp(x * x * -0.5) * (1 / math.sqrt(2 * math.pi))
    return apply("gelu_backward", [gg, x]), gg * g * phi * (2 - x * x)


@op("gelu_backward", lambda s, o, st: rules.elementwise()(s, o, st) + [((rules.P, rules.B), (rules.P,))],  # linear in g
    _gelu_double_backward, meta=lambda s, dt, st: ([rules.broadcast_shape([s[0], s[1]])], [dt[1]]))
def _gelu_backward(g, x):
    """g * (Phi(x) + x * phi(x)) in one C++ pass."""
    if c_floats(g, x) and g.shape == x.shape:
        out = np.empty(x.shape, x.dtype)
        _native.gelu_backward(out, np.ascontiguousarray(g), np.ascontiguousarray(x))
        return out
    xp = devices.array_module(x)
    cdf = 0.5 * (1 + _erf_kernel(x * (1 / math.sqrt(2))))
    return (g * (cdf + x * xp.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi)))).astype(x.dtype, copy=False)


@op("relu_backward", lambda s, o, st: rules.elementwise()(s, o, st) + [((rules.P, rules.B), (rules.P,))],  # linear in g
    lambda ctx, gg: (apply("relu_backward", [gg, ctx.inputs[1]]), None),
    meta=lambda s, dt, st: ([rules.broadcast_shape([s[0], s[1]])], [dt[0]]))
def _relu_backward(g, x):
    """g * (x > 0) in one C++ pass for float32/float64 pieces of one dtype, shape and memory order
    (the output in that order: a column-major linear's gradient stays so); numpy's compare, cast
    and multiply otherwise: the same bits."""
    if c_floats(g, x) and g.dtype == x.dtype and g.shape == x.shape:
        if g.flags.c_contiguous and x.flags.c_contiguous:
            out = np.empty(x.shape, x.dtype)
            _native.relu_backward(out, g, x)
            return out
        if g.flags.f_contiguous and x.flags.f_contiguous:
            out = np.empty(x.shape, x.dtype, order="F")
            _native.relu_backward(out.T, g.T, x.T)
            return out
    return g * (x > 0)


def _softmax_backward(ctx, g):
    """y * (g - sum(g * y)) along dim."""
    y, dim = ctx.outputs[0], ctx.static["dim"]
    return (y * (g - sum(g * y, dim, keepdim=True)),)


@op("softmax", rules.along_dims(lambda i, o, st: [(d, d) for d in range(len(i)) if d != st["dim"]]),
    _softmax_backward, meta=lambda s, dt, st: ([tuple(s[0])], [dt[0]]))
def _softmax(x, dim=-1):
    """One primitive: exp(x - max) / sum(exp(x - max)) along dim, in two passes of numpy over x
    (slices along the other dims are independent, so their splits pass through)."""
    xp = array_module(x)
    e = x - x.max(axis=dim, keepdims=True)
    xp.exp(e, out=e)
    e /= e.sum(axis=dim, keepdims=True)
    return e


def softmax(input, dim=-1, *, dtype=None):
    """exp(x - max) / sum(exp(x - max)) along dim (in dtype when given)."""
    input = _as(input, dtype)
    dim = wrap_dim(dim, input.ndim)
    if input.shape[dim] == 0:  # nothing to normalise (and no max of an empty dim)
        return input * 1
    if not input.dtype.is_floating and not input.dtype.is_complex:  # complex: the op refuses it
        input = _float(input)
    return apply("softmax", [input], {"dim": dim})


@amp_entry("log_softmax")
def log_softmax(input, dim=-1, *, dtype=None):
    """x - logsumexp(x) along dim (in dtype when given)."""
    input = _as(input, dtype)
    dim = wrap_dim(dim, input.ndim)
    if input.shape[dim] == 0:
        return input * 1
    return input - logsumexp(input, dim, keepdim=True)
