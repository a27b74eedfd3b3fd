"""Complex numbers: complex, view_as_real / view_as_complex, polar, angle, is_complex, x.real / x.imag.

Gradients follow PyTorch's convention (conjugate Wirtinger): the gradient of a real loss L with
respect to z = x + iy is dL/dx + i dL/dy. A holomorphic op's backward is then g * conj(f'(z))
(elementwise.py applies it to every op of its tables), real(z)'s is g, imag(z)'s is i g.
"""
import numpy as np

from .. import dtype as _dtype
from ..backends.devices import array_module
from ..registry import op, rules
from ..tensor import Tensor
from ._front import apply, cast_to, tensors
from .elementwise import RAW_BINARY, cast, conj, cos, imag, real, sin, sum_to  # noqa: F401 - conj: re-exported

_mul, _add = RAW_BINARY["multiply"], RAW_BINARY["add"]


def is_complex(input):
    """Whether the tensor's dtype is complex (complex64 or complex128)."""
    return input.dtype.is_complex


def _complex_meta(s, dt, st):
    base = np.result_type(dt[0].np, dt[1].np)
    if base not in (np.float32, np.float64):
        raise TypeError(f"complex: real and imag must be float32 or float64 tensors of one dtype, got "
                        f"{dt[0]!r} and {dt[1]!r}")
    return [rules.broadcast_shape(s)], [_dtype.to_dtype(base).to_complex()]


# complex(r1 + r2, i1 + i2) = complex(r1, i1) + complex(r2, i2): P, P -> P
@op("complex", rules.elementwise("sum"),
    lambda ctx, g: (sum_to(real(g), ctx.inputs[0].shape), sum_to(imag(g), ctx.inputs[1].shape)), meta=_complex_meta)
def _complex(re, im):
    xp = array_module(re)
    out = xp.empty(np.broadcast_shapes(re.shape, im.shape), np.result_type(re.dtype, im.dtype, np.complex64))
    out.real[...] = re  # not re + 1j * im: 1j * inf would be nan + inf j
    out.imag[...] = im
    return out


def complex(real, imag):  # noqa: A001 - torch.complex
    """real + i imag (float32 parts give complex64, float64 parts complex128), broadcast."""
    re, im = tensors(real, imag)
    if re.dtype != im.dtype:
        raise TypeError(f"complex: real and imag must have one dtype, got {re.dtype!r} and {im.dtype!r}")
    return apply("complex", [re, im])


def _last_dims(in_shape, out_shape, static):
    return [(d, d) for d in range(min(len(in_shape), len(out_shape)))]


def _keep_dims(in_shape, out_shape, static):
    return [(d, d) for d in range(len(in_shape) - 1)]


def _as_real_meta(s, dt, st):
    if not dt[0].is_complex:
        raise TypeError(f"view_as_real: takes a complex tensor, got {dt[0]!r}")
    return [tuple(s[0]) + (2,)], [dt[0].to_real()]


@op("view_as_real", rules.along_dims(_last_dims, linear=True), lambda ctx, g: view_as_complex(g),
    meta=_as_real_meta)
def _view_as_real(x):
    return array_module(x).ascontiguousarray(x).view(np.dtype(x.dtype.char.lower())).reshape(x.shape + (2,))


def view_as_real(input):
    """The complex tensor as real pairs: shape (..., 2), [..., 0] the real and [..., 1] the imaginary
    parts (float32 for complex64). A copy of the piece where numpy cannot view it."""
    return apply("view_as_real", tensors(input))


def _as_complex_meta(s, dt, st):
    if dt[0].np not in (np.float32, np.float64) or not s[0] or s[0][-1] != 2:
        raise TypeError(f"view_as_complex: takes a float32 or float64 tensor whose last dim has size 2, got "
                        f"{dt[0]!r} of shape {tuple(s[0])}")
    return [tuple(s[0])[:-1]], [dt[0].to_complex()]


@op("view_as_complex", rules.along_dims(_keep_dims, linear=True), lambda ctx, g: view_as_real(g),
    meta=_as_complex_meta)
def _view_as_complex(x):
    return array_module(x).ascontiguousarray(x).view(np.result_type(x.dtype, np.complex64)).reshape(x.shape[:-1])


def view_as_complex(input):
    """A float tensor of shape (..., 2) as complex numbers of shape (...) (the inverse of view_as_real)."""
    return apply("view_as_complex", tensors(input))


def polar(abs, angle):  # noqa: A002 - torch.polar's names
    """abs * (cos(angle) + i sin(angle)): float parts give complex64 / complex128."""
    r, theta = tensors(abs, angle)
    return complex(_mul(r, cos(theta)), _mul(r, sin(theta)))


def _angle_backward(ctx, g):
    """d angle: for z = x + iy, (-y, x) / |z|^2, i.e. g * i z / |z|^2 (0 at z = 0; real inputs: 0)."""
    x = ctx.inputs[0]
    if not x.dtype.is_complex:
        return (_mul(g, 0.0),)
    r2 = _add(_mul(real(x), real(x)), _mul(imag(x), imag(x)))
    safe = RAW_BINARY["divide"](x, _add(r2, cast(RAW_BINARY["equal"](r2, 0), r2.dtype)))
    return (_mul(_mul(cast(g, x.dtype), 1j), safe),)


@op("angle", rules.elementwise(), _angle_backward)
def _angle(x):
    if np.iscomplexobj(x):
        return np.angle(x)
    return np.where(x < 0, np.pi, 0.0).astype(x.dtype if x.dtype.kind == "f" else np.float32)


def angle(input):
    """The argument of each element (atan2(imag, real)), real dtype; for real inputs pi where
    negative, else 0 (as PyTorch)."""
    (input,) = tensors(input)
    if not (input.dtype.is_complex or input.dtype.is_floating):
        input = cast_to(input, _dtype.get_default_dtype())
    return apply("angle", [input])


class Part(Tensor):
    """The real or imaginary part of a complex tensor: a tensor that answers a call with itself, so
    PyTorch's attribute x.real and Paddle's method x.real() give the same tensor."""

    __slots__ = ()

    def __call__(self, name=None):
        return self


def _part(name):
    def get(self):
        out = real(self) if name == "real" else imag(self)
        out.__class__ = Part
        return out
    get.__doc__ = (f"The {name} part (PyTorch's x.{name}, an attribute; Paddle's x.{name}() too): a real tensor "
                   f"of the matching precision; differentiable (x.real of a real tensor: a copy, as Paddle's).")
    return property(get)


Tensor.real, Tensor.imag = _part("real"), _part("imag")
Tensor.is_complex = is_complex
