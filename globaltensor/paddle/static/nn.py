"""paddle.static.nn: fc, the fully connected layer of static programs."""
import math

from ... import ops as _ops
from ..nn import _create_parameter
from .program import default_main_program, record

__all__ = ["fc"]

_ACTIVATIONS = {None: None, "tanh": _ops.tanh, "relu": _ops.relu, "sigmoid": _ops.sigmoid,
                "softmax": lambda x: _ops.softmax(x, -1)}


def _parameter(shape, bias):
    p = _create_parameter(shape, is_bias=bias)  # Xavier uniform (a bias: zeros), as Paddle's default
    default_main_program().parameters.append(p)
    return p


def fc(x, size, num_flatten_dims=1, weight_attr=None, bias_attr=None, activation=None, name=None):
    """activation(sum over the inputs of flatten(x_i) @ W_i + b): each input flattened to 2-D at
    num_flatten_dims; W_i [features_i, size] and b [size] are new parameters of the program."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"fc: activation {activation!r}; supported: {sorted(a for a in _ACTIVATIONS if a)}")
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    weights = [_parameter((math.prod(v.shape[num_flatten_dims:]), size), False) for v in xs]
    bias = None if bias_attr is False else _parameter((size,), True)
    return record(_fc, (xs, weights, bias, activation, num_flatten_dims), {}, label="fc")


def _fc(xs, weights, bias, activation, num_flatten_dims):
    out = None
    for x, w in zip(xs, weights):
        flat = x.reshape(list(x.shape[:num_flatten_dims]) + [-1]) if x.ndim != num_flatten_dims + 1 else x
        term = _ops.matmul(flat, w)
        out = term if out is None else out + term
    if bias is not None:
        out = out + bias
    act = _ACTIVATIONS[activation]
    return out if act is None else act(out)
