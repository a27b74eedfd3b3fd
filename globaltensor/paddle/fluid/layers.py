"""fluid.layers: Paddle 1.x's layer functions of static programs (data, fc, losses, reductions)."""
from ... import ops as _ops
from .. import static as _static
from ..nn import functional as _F

__all__ = ["data", "fc", "square_error_cost", "mean", "cross_entropy", "embedding", "relu", "tanh", "sigmoid",
           "softmax", "reduce_mean", "reduce_sum", "elementwise_add", "elementwise_sub", "elementwise_mul",
           "reshape", "concat", "matmul", "softmax_with_cross_entropy", "conv2d", "batch_norm"]


def _static_mode():
    """fluid layers record into static programs: static mode is on while they are used (Paddle 1.x's default)."""
    if not _static.in_static_mode():
        from .. import enable_static
        enable_static()


def data(name, shape, append_batch_size=True, dtype="float32", lod_level=0, type=None, stop_gradient=True):
    """A placeholder; append_batch_size (1.x's default) puts a -1 batch dim in front of shape."""
    _static_mode()
    dims = [None if d in (None, -1) else int(d) for d in shape]
    if append_batch_size and (not dims or dims[0] is not None):
        dims = [None] + dims
    return _static.data(name, dims, dtype, lod_level)


def fc(input, size, num_flatten_dims=1, param_attr=None, bias_attr=None, act=None, name=None):
    """act(flatten(input) @ W + b): fluid's spelling of static.nn.fc (param_attr, act)."""
    return _static.nn.fc(input, size, num_flatten_dims, weight_attr=param_attr, bias_attr=bias_attr,
                         activation=act, name=name)


def embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None, param_attr=None,
              dtype="float32"):
    """1.x's lookup_table: ids of shape [..., 1] give rows of shape [..., size[1]] (the 1 dropped)."""
    if input.shape and input.shape[-1] == 1:
        input = _ops.squeeze(input, -1)
    return _static.nn.embedding(input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype)


def _as(paddle_op):
    return _static.default_main_program().hint(paddle_op)


def square_error_cost(input, label):
    """(input - label) ** 2, element-wise (Paddle's elementwise_sub and square)."""
    with _as("elementwise_sub"):
        diff = input - label
    with _as("square"):
        return diff * diff


def mean(x, name=None):
    """The mean of every element (a 0-D value, as Paddle 2.x's mean; one reduce_mean op)."""
    with _as("reduce_mean"):
        return _ops.mean(x)


def cross_entropy(input, label, soft_label=False, ignore_index=-100):
    """-log(input[label]) per row (input holds probabilities, as 1.x's cross_entropy), shape [N, 1]."""
    return _F.cross_entropy(input, label, soft_label=soft_label, ignore_index=ignore_index, reduction="none",
                            use_softmax=False)


def softmax_with_cross_entropy(logits, label, soft_label=False, ignore_index=-100, axis=-1):
    return _F.softmax_with_cross_entropy(logits, label, soft_label=soft_label, ignore_index=ignore_index, axis=axis)


def relu(x, name=None):
    return _ops.relu(x)


def tanh(x, name=None):
    return _ops.tanh(x)


def sigmoid(x, name=None):
    return _ops.sigmoid(x)


def softmax(input, axis=-1, name=None, use_cudnn=False):
    return _ops.softmax(input, axis)


def reduce_mean(input, dim=None, keep_dim=False, name=None):
    return _ops.mean(input, dim, keep_dim)


def reduce_sum(input, dim=None, keep_dim=False, name=None):
    return _ops.sum(input, dim, keep_dim)


def elementwise_add(x, y, axis=-1, act=None, name=None):
    return x + y


def elementwise_sub(x, y, axis=-1, act=None, name=None):
    return x - y


def elementwise_mul(x, y, axis=-1, act=None, name=None):
    return x * y


def reshape(x, shape, actual_shape=None, act=None, inplace=False, name=None):
    return _ops.reshape(x, list(shape))


def concat(input, axis=0, name=None):
    return _ops.concat(list(input), axis)


def matmul(x, y, transpose_x=False, transpose_y=False, alpha=1.0, name=None):
    from .. import matmul as paddle_matmul
    out = paddle_matmul(x, y, transpose_x, transpose_y)
    return out if alpha == 1.0 else out * alpha


def conv2d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=None, param_attr=None,
           bias_attr=None, use_cudnn=True, act=None, name=None, data_format="NCHW"):
    return _static.nn.conv2d(input, num_filters, filter_size, stride, padding, dilation, groups or 1, param_attr,
                             bias_attr, use_cudnn, act, name, data_format)


def batch_norm(input, act=None, is_test=False, momentum=0.9, epsilon=1e-05, param_attr=None, bias_attr=None,
               data_layout="NCHW", name=None, **kwargs):
    return _static.nn.batch_norm(input, act, is_test, momentum, epsilon, param_attr, bias_attr, data_layout, name)
