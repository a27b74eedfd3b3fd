"""paddle.nn.initializer: Paddle's parameter initializers (fans of a [in, out] weight), filling in place."""
import math

import numpy as np

from ... import creation as _creation
from ... import ops as _ops
from ...autograd import no_grad as _no_grad
from ...sbp import without_partial as _without_partial

__all__ = ["Initializer", "Constant", "Normal", "TruncatedNormal", "Uniform", "XavierNormal", "XavierUniform",
           "KaimingNormal", "KaimingUniform", "Assign", "Orthogonal", "Dirac", "Bilinear", "set_global_initializer",
           "calculate_gain"]

_GLOBAL = {"weight": None, "bias": None}  # set_global_initializer's choices


def _where(param):
    """The keywords that make a new tensor laid out as param (a Partial one: its reduced value's layout)."""
    if param.is_global:
        return {"dtype": param.dtype, "placement": param.placement, "sbp": _without_partial(param.sbp)}
    return {"dtype": param.dtype}


def _fill(param, value):
    """param's values replaced in place by value (a tensor of param's shape and layout, or an array)."""
    if not hasattr(value, "_local"):
        value = _creation.tensor(np.asarray(value), check_meta=False, **_where(param))
    if tuple(value.shape) != tuple(param.shape):
        raise ValueError(f"an initializer's value of shape {list(value.shape)} for a parameter of shape "
                         f"{list(param.shape)}")
    with _no_grad():
        if param.is_global and tuple(value.sbp) != tuple(param.sbp):
            value = value.to_global(placement=param.placement, sbp=param.sbp)
        param._local[...] = value._local


def _fans(shape):
    """Paddle's fans: a matrix is [in, out] (fan_in = shape[0]); a kernel is [out, in, k...] (times its
    receptive field); a vector has its length as both; a scalar 1."""
    shape = list(shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


_DRAWS = {"constant": lambda param, a, b: _creation.full(tuple(param.shape), a, **_where(param)),
          "uniform": lambda param, a, b: _creation.uniform(tuple(param.shape), a, b, **_where(param)),
          "normal": lambda param, a, b: _creation.normal(a, b, tuple(param.shape), **_where(param))}


class Initializer:
    """A callable that fills a parameter in place (init(param) returns None, as Paddle's dygraph)."""

    def __call__(self, param, block=None):
        _fill(param, self._value(param))

    def forward(self, param, block=None):
        return self(param, block)

    def _draw(self, param):
        """(kind, a, b) when the fill is one draw of the sharding-invariant generator: ("constant",
        value, 0), ("uniform", low, high), ("normal", mean, std); None for any other fill. Static
        mode defers such a draw to the startup program (paddle/static/param_init.py)."""
        return None

    def _value(self, param):
        spec = self._draw(param)
        if spec is None:
            raise NotImplementedError
        return _DRAWS[spec[0]](param, *spec[1:])

    def __repr__(self):
        args = ", ".join(f"{k.lstrip('_')}={v!r}" for k, v in vars(self).items() if not k.startswith("__"))
        return f"{type(self).__name__}({args})"


class Constant(Initializer):
    """value everywhere."""

    def __init__(self, value=0.0):
        self._value_ = float(value)

    def _draw(self, param):
        return "constant", self._value_, 0.0


class Normal(Initializer):
    """N(mean, std^2), from the sharding-invariant generator."""

    def __init__(self, mean=0.0, std=1.0, name=None):
        self._mean, self._std = float(mean), float(std)

    def _draw(self, param):
        return "normal", self._mean, self._std


class TruncatedNormal(Normal):
    """N(mean, std^2) limited to [a, b] (bounds in the values' units, as Paddle's): values outside are
    drawn again (64 rounds; what is still outside then is clipped)."""

    def __init__(self, mean=0.0, std=1.0, a=-2.0, b=2.0, name=None):
        super().__init__(mean, std)
        self._a, self._b = float(a), float(b)

    def _draw(self, param):
        return None  # draws again by value

    def _value(self, param):
        x = _DRAWS["normal"](param, self._mean, self._std)
        for _ in range(64):
            outside = (x < self._a) | (x > self._b)
            if not bool(outside.any()):
                return x
            x = _ops.where(outside, _DRAWS["normal"](param, self._mean, self._std), x)
        return _ops.clip(x, self._a, self._b)


class Uniform(Initializer):
    """U[low, high)."""

    def __init__(self, low=-1.0, high=1.0, name=None):
        if low > high:
            raise ValueError(f"Uniform: low ({low}) must not be greater than high ({high})")
        self._low, self._high = float(low), float(high)

    def _draw(self, param):
        return "uniform", self._low, self._high


class XavierUniform(Initializer):
    """U[-l, l), l = gain sqrt(6 / (fan_in + fan_out)); fans from the shape unless given."""

    def __init__(self, fan_in=None, fan_out=None, gain=1.0, name=None):
        self._fan_in, self._fan_out, self._gain = fan_in, fan_out, float(gain)

    def _scale(self, param, numerator):
        fan_in, fan_out = _fans(param.shape)
        fan_in = fan_in if self._fan_in is None else self._fan_in
        fan_out = fan_out if self._fan_out is None else self._fan_out
        return self._gain * math.sqrt(numerator / (fan_in + fan_out)) if fan_in + fan_out else 0.0

    def _draw(self, param):
        limit = self._scale(param, 6.0)
        return "uniform", -limit, limit


class XavierNormal(XavierUniform):
    """N(0, std^2), std = gain sqrt(2 / (fan_in + fan_out))."""

    def _draw(self, param):
        return "normal", 0.0, self._scale(param, 2.0)


class KaimingNormal(Initializer):
    """N(0, std^2), std = gain / sqrt(fan_in), gain = calculate_gain(nonlinearity, negative_slope);
    mode='fan_out' uses the fan out."""

    def __init__(self, fan_in=None, negative_slope=0.0, nonlinearity="relu", mode="fan_in"):
        if mode not in ("fan_in", "fan_out"):
            raise ValueError(f"The mode of KaimingNormal/KaimingUniform should be 'fan_in' or 'fan_out', got {mode!r}")
        if mode == "fan_out" and fan_in is not None:
            raise ValueError("The mode of KaimingNormal/KaimingUniform is 'fan_out', but fan_in is set. Please set "
                             "fan_in to None.")
        self._fan_in, self._negative_slope, self._nonlinearity, self._mode = fan_in, negative_slope, nonlinearity, mode

    def _fan_and_gain(self, param):
        fan_in, fan_out = _fans(param.shape)
        fan = fan_out if self._mode == "fan_out" else fan_in if self._fan_in is None else self._fan_in
        return fan, calculate_gain(self._nonlinearity, self._negative_slope)

    def _draw(self, param):
        fan, gain = self._fan_and_gain(param)
        return "normal", 0.0, gain / math.sqrt(fan) if fan else 0.0


class KaimingUniform(KaimingNormal):
    """U[-l, l), l = gain sqrt(3 / fan_in)."""

    def _draw(self, param):
        fan, gain = self._fan_and_gain(param)
        limit = gain * math.sqrt(3.0 / fan) if fan else 0.0
        return "uniform", -limit, limit


class Assign(Initializer):
    """The given value (an array, a list or a tensor) of the parameter's shape."""

    def __init__(self, value, name=None):
        self._array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)

    def _value(self, param):
        return self._array.reshape(tuple(param.shape)) if self._array.size == param.numel() else self._array


class Orthogonal(Initializer):
    """gain times a random (semi-)orthogonal matrix: dim 0 the rows, the other dims flattened the
    columns; Q of the QR of a normal draw, its columns' signs those of R's diagonal."""

    def __init__(self, gain=1.0, name=None):
        self._gain = float(gain)

    def _value(self, param):
        shape = tuple(param.shape)
        if len(shape) < 2:
            raise ValueError(f"Orthogonal: the parameter needs at least 2 dims, got shape {list(shape)}")
        rows, cols = shape[0], math.prod(shape[1:])
        draw = _creation.normal(0.0, 1.0, (max(rows, cols), min(rows, cols)), dtype="float64").numpy()
        q, r = np.linalg.qr(draw)
        q = q * np.sign(np.diag(r))
        q = q.T if rows < cols else q
        return (self._gain * q).reshape(shape).astype(str(param.dtype).split(".")[-1])


class Dirac(Initializer):
    """A convolution kernel [out, in, k...] that passes its input through: 1 at the centre of
    channel d -> d (in each of `groups` blocks of the output channels), 0 elsewhere."""

    def __init__(self, groups=1, name=None):
        if not (isinstance(groups, int) and groups > 0):
            raise ValueError(f"Dirac: groups must be a positive integer, got {groups!r}")
        self._groups = groups

    def _value(self, param):
        shape = tuple(param.shape)
        if len(shape) not in (3, 4, 5) or shape[0] % self._groups:
            raise ValueError(f"Dirac: a 3-, 4- or 5-D kernel whose dim 0 ({shape[0] if shape else None}) divides "
                             f"by groups={self._groups}; got shape {list(shape)}")
        value = np.zeros(shape)
        per_group = shape[0] // self._groups
        centre = tuple(k // 2 for k in shape[2:])
        for g in range(self._groups):
            for d in range(min(per_group, shape[1])):
                value[(g * per_group + d, d) + centre] = 1.0
        return value


class Bilinear(Initializer):
    """A [C_out, C_in, K, K] kernel of bilinear interpolation weights (upsampling by a transposed
    convolution): w(x, y) = (1 - |x / f - c|)(1 - |y / f - c|), f = ceil(K / 2), c = (2f - 1 - f % 2) / 2f."""

    def _value(self, param):
        shape = tuple(param.shape)
        if len(shape) != 4 or shape[2] != shape[3]:
            raise ValueError(f"Bilinear: a 4-D kernel with square spatial dims, got shape {list(shape)}")
        size = shape[3]
        f = math.ceil(size / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        ramp = 1 - np.abs(np.arange(size) / f - c)
        return np.broadcast_to(np.outer(ramp, ramp), shape).copy()


def set_global_initializer(weight_init, bias_init=None):
    """The initializers of every parameter made after this (a weight's, a bias's) unless its ParamAttr
    names one; set_global_initializer(None) goes back to the layers' own defaults."""
    _GLOBAL["weight"], _GLOBAL["bias"] = weight_init, bias_init


def global_initializer(is_bias):
    return _GLOBAL["bias" if is_bias else "weight"]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain of a nonlinearity (Paddle's table: tanh 5/3, relu sqrt(2), leaky_relu
    sqrt(2 / (1 + param^2)) with param 0.01 by default, selu 3/4, the linear ones 1)."""
    param = 0.01 if param is None else float(param)
    gains = {"sigmoid": 1, "linear": 1, "conv1d": 1, "conv2d": 1, "conv3d": 1, "conv1d_transpose": 1,
             "conv_transpose1d": 1, "conv2d_transpose": 1, "conv_transpose2d": 1, "conv3d_transpose": 1,
             "conv_transpose3d": 1, "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
             "leaky_relu": math.sqrt(2.0 / (1 + param ** 2)), "selu": 3.0 / 4}
    if nonlinearity not in gains:
        raise ValueError(f"nonlinearity function {nonlinearity} is not supported now.")
    return gains[nonlinearity]
