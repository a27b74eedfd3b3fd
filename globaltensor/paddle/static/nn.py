"""paddle.static.nn: fc, embedding, conv2d, batch_norm of static programs (their parameters named as Paddle's)."""
import itertools
import math

from ... import ops as _ops
from ..nn.parameter import create_parameter as _create_parameter
from ..toplevel import ParamAttr
from .norm import record_batch_norm
from .param_init import create_deferred
from .program import default_main_program

__all__ = ["fc", "embedding", "sparse_embedding", "conv2d", "batch_norm"]

_ACTIVATIONS = {None: None, "tanh": _ops.tanh, "relu": _ops.relu, "sigmoid": _ops.sigmoid,
                "softmax": lambda x: _ops.softmax(x, -1)}
_counters = {}  # layer kind -> itertools.count (Paddle's unique names: fc_0, fc_1, ...)


def _unique(kind):
    return f"{kind}_{next(_counters.setdefault(kind, itertools.count()))}"


def _parameter(shape, attr, name, is_bias, default_initializer=None):
    """A new parameter, or the program's parameter of the ParamAttr's name (Paddle's static
    create_parameter returns the block's existing one: every layer naming it shares it)."""
    attr = ParamAttr._to_attr(attr)
    named = default_main_program().named_params
    found = named.get(attr.name) if getattr(attr, "name", None) else None
    if found is not None:
        if list(found.shape) != [int(n) for n in shape]:
            raise ValueError(f"Variable {attr.name!r} has been created before. The previous shape is "
                             f"{tuple(found.shape)}, the new shape is {tuple(int(n) for n in shape)}. They are not "
                             f"matched. (a ParamAttr name is one parameter of the program)")
        return found
    p = create_deferred(_create_parameter, shape, attr, name, is_bias, default_initializer)  # filled at startup
    if getattr(attr, "name", None):
        named[attr.name] = p
    return p


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
    """Rows of a [vocab, dim] table (embedding_k.w_0, or param_attr's name: one table however many
    lookups name it) at the ids of input (lookup_table_v2). is_sparse / is_distributed: in a
    parameter-server job (fleet's minimize) the table becomes a sparse table on the servers, as
    Paddle's PS passes make it (static/sparse.py's to_sparse_tables); in one process a dense parameter."""
    from ..nn import functional as F
    from .sparse import note_sparse_candidate
    program = default_main_program()
    w = _parameter(list(size), param_attr, f"{_unique('embedding')}.w_0", False)
    start = len(program.instrs)
    out = F.embedding(input, w, padding_idx=padding_idx, sparse=is_sparse)
    if is_sparse or is_distributed:
        note_sparse_candidate(program, program.instrs[start:], w, ParamAttr._to_attr(param_attr), padding_idx,
                              is_distributed)
    return out


def sparse_embedding(input, size, padding_idx=None, is_test=False, entry=None, table_class="MemorySparseTable",
                     param_attr=None, dtype="float32", slot=None):
    """Rows of a parameter-server table at the int64 ids of input (output shape: input's + [dim]).
    A table's rows are made on first pull, seeded by (program seed, table name, id); tables of one
    name (param_attr) are one table. Attached to a client (fleet, the pserver transpiler) the batch's
    unique rows are pulled from the servers and their summed gradients pushed; otherwise a local
    table with the same rows. Records Paddle's lookup_table (is_distributed). See static/sparse.py."""
    from .sparse import record_sparse_embedding
    return record_sparse_embedding(default_main_program(), input, size, padding_idx, is_test, entry, table_class,
                                   param_attr, dtype, slot)


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
    names = (moving_mean_name or f"{prefix}.w_1", moving_variance_name or f"{prefix}.w_2")
    out = record_batch_norm(default_main_program(), input, _ops.zeros(c), _ops.ones(c), scale, shift, not is_test,
                            momentum, epsilon, names)
    return _activate(out, act)
