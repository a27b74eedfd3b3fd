"""paddle.static.nn: fc, embedding, conv2d, batch_norm of static programs (their parameters named as Paddle's)."""
import itertools
import math

from ... import ops as _ops
from ..nn.parameter import create_parameter as _create_parameter
from ..toplevel import ParamAttr
from .program import default_main_program

__all__ = ["fc", "embedding", "sparse_embedding", "conv2d", "batch_norm"]

_ACTIVATIONS = {None: None, "tanh": _ops.tanh, "relu": _ops.relu, "sigmoid": _ops.sigmoid,
                "softmax": lambda x: _ops.softmax(x, -1)}
_counters = {}  # layer kind -> itertools.count (Paddle's unique names: fc_0, fc_1, ...)


def _unique(kind):
    return f"{kind}_{next(_counters.setdefault(kind, itertools.count()))}"


def _parameter(shape, attr, name, is_bias, default_initializer=None):
    attr = ParamAttr._to_attr(attr)
    return _create_parameter(shape, attr=attr, name=attr.name or name, is_bias=is_bias,
                             default_initializer=default_initializer)


def _activate(out, activation):
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation {activation!r}; supported: {sorted(a for a in _ACTIVATIONS if a)}")
    act = _ACTIVATIONS[activation]
    return out if act is None else act(out)


def fc(x, size, num_flatten_dims=1, weight_attr=None, bias_attr=None, activation=None, name=None):
    """activation(sum over the inputs of flatten(x_i) @ W_i + b): each input flattened to 2-D at
    num_flatten_dims; W_i [features_i, size] (fc_k.w_i) and b [size] (fc_k.b_0) are new
    parameters (Xavier uniform; zeros). Records Paddle's mul, elementwise_add and the activation."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"fc: activation {activation!r}; supported: {sorted(a for a in _ACTIVATIONS if a)}")
    prefix = name or _unique("fc")
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    program = default_main_program()
    out = None
    for i, v in enumerate(xs):
        w = _parameter((math.prod(v.shape[num_flatten_dims:]), size), weight_attr, f"{prefix}.w_{i}", False)
        features = math.prod(v.shape[num_flatten_dims:])
        flat = v.reshape(list(v.shape[:num_flatten_dims]) + [features]) if v.ndim != num_flatten_dims + 1 else v
        with program.hint("mul"):
            term = _ops.matmul(flat, w)
        out = term if out is None else out + term
    if bias_attr is not False:
        out = out + _parameter((size,), bias_attr, f"{prefix}.b_0", True)
    return _activate(out, activation)


def embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None, param_attr=None,
              dtype="float32"):
    """Rows of a new [vocab, dim] table (embedding_k.w_0) at the ids of input (lookup_table_v2)."""
    from ..nn import functional as F
    w = _parameter(list(size), param_attr, f"{_unique('embedding')}.w_0", False)
    return F.embedding(input, w, padding_idx=padding_idx)


def sparse_embedding(input, size, padding_idx=None, is_test=False, entry=None, table_class="MemorySparseTable",
                     param_attr=None, dtype="float32", slot=None):
    raise NotImplementedError("paddle.static.nn.sparse_embedding: a parameter-server table; the parameter-server "
                              "issue (30) brings it. Use paddle.static.nn.embedding for a dense table meanwhile")


def conv2d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=1, param_attr=None,
           bias_attr=None, use_cudnn=True, act=None, name=None, data_format="NCHW"):
    """act(conv2d(input, W) + b) with new parameters W [num_filters, C/groups, kh, kw] and b [num_filters]."""
    from ..nn import functional as F
    prefix = name or _unique("conv2d")
    kh, kw = (filter_size, filter_size) if isinstance(filter_size, int) else filter_size
    channels = input.shape[1]
    from ..nn.initializer import Normal
    std = (2.0 / (kh * kw * channels)) ** 0.5  # Paddle's default for a conv filter
    w = _parameter([num_filters, channels // groups, kh, kw], param_attr, f"{prefix}.w_0", False, Normal(0.0, std))
    b = None if bias_attr is False else _parameter([num_filters], bias_attr, f"{prefix}.b_0", True)
    out = F.conv2d(input, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups,
                   data_format=data_format)
    return _activate(out, act)


def batch_norm(input, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None, bias_attr=None,
               data_layout="NCHW", name=None, moving_mean_name=None, moving_variance_name=None, **kwargs):
    """act(batch_norm(input)) as Paddle's static op, printed as one: in training the batch's
    statistics normalize it and the moving mean and variance (prefix.w_1, .w_2, state of the
    program) take momentum * moving + (1 - momentum) * the batch's (its biased variance, as
    Paddle); is_test=True, and the program of clone(for_test=True), normalize by the moving ones."""
    from ..nn.initializer import Constant
    if data_layout != "NCHW":
        raise NotImplementedError(f"static.nn.batch_norm: data_layout {data_layout!r}; only NCHW is supported")
    prefix = name or _unique("batch_norm")
    c = input.shape[1]
    scale = _parameter([c], param_attr, f"{prefix}.w_0", False, Constant(1.0))
    shift = _parameter([c], bias_attr, f"{prefix}.b_0", True)
    out = record_batch_norm(input, _ops.zeros(c), _ops.ones(c), scale, shift, not is_test, momentum, epsilon,
                            (moving_mean_name or f"{prefix}.w_1", moving_variance_name or f"{prefix}.w_2"))
    return _activate(out, act)


def record_batch_norm(input, moving_mean, moving_var, scale, shift, training, momentum, epsilon, names=None):
    """Paddle's batch_norm op recorded into the main program (static.nn.batch_norm's, and
    paddle.nn.BatchNorm*D's and F.batch_norm's in static mode): in training the batch's
    statistics normalize and moving = momentum * moving + (1 - momentum) * the batch's (biased
    variance) at each run; clone(for_test=True) swaps in the form normalizing by the moving ones.
    moving_mean/var: tensors that become state of the program (names: Paddle's, else generated)."""
    program = default_main_program()
    if names is None:
        prefix = _unique("batch_norm")
        names = (f"{prefix}.w_1", f"{prefix}.w_2")
    c = input.shape[1]
    moving = [_moving(program, t, n) for t, n in zip((moving_mean, moving_var), names)]
    axes, shape = [0] + list(range(2, input.ndim)), [1, c] + [1] * (input.ndim - 2)

    def normalized(mean, var):
        inv = _ops.rsqrt(var + epsilon)
        if scale is not None:
            inv = inv * scale
        shifted = -mean * inv if shift is None else shift - mean * inv
        return input * _ops.reshape(inv, *shape) + _ops.reshape(shifted, *shape)

    with program.hint("batch_norm"):
        if not training:
            return normalized(*moving)
        for p in (scale, shift):  # read before the training form: the inference form reads them too
            if p is not None:
                program.reg_of(p, "batch_norm")
        start = len(program.instrs)
        mean = _ops.mean(input, dim=axes)
        var = _ops.mean(_ops.square(input - _ops.reshape(mean, *shape)), dim=axes)
        out = normalized(mean, var)
        for stat, batch in zip(moving, (mean, var)):
            stat.add_((batch - stat) * (1.0 - momentum))  # the program reads it at each run and sets it after
        end = len(program.instrs)
        at_inference, test_out = program.recorded_apart(lambda: normalized(*moving))
    out_reg, test_reg = program.reg_of(out, "batch_norm"), program.reg_of(test_out, "batch_norm")
    for ins in at_inference:
        ins.outs = [out_reg if r == test_reg else r for r in ins.outs]
    program.test_switches.append((start, end, at_inference))
    return out


def _moving(program, value, name):
    """A moving statistic: a persistable tensor the program reads (before the op's training form,
    so that its inference form reads it too)."""
    program.names[program.reg_of(value, "batch_norm")] = name
    return value
