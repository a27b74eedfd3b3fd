"""paddle.nn.functional: globaltensor's functional ops, with Paddle's meanings where they differ
(linear's weight is [in_features, out_features], dropout's third parameter is axis, gelu's
approximate is a bool); activations in .activation, losses in .loss."""
from .... import ops as _ops
from ....nn import functional as _F
from ....nn.functional import layer_norm  # noqa: F401
from . import activation, loss  # noqa: F401 - paddle.nn.functional.activation / .loss
from .activation import *  # noqa: F401,F403 - Paddle's activations
from .activation import __all__ as _activations
from .loss import *  # noqa: F401,F403 - Paddle's losses
from .loss import __all__ as _losses

__all__ = ["dropout", "embedding", "layer_norm", "linear", "conv1d", "conv2d", "max_pool2d", "avg_pool2d",
           "adaptive_avg_pool2d", "batch_norm", "one_hot", "normalize", "cosine_similarity", "label_smooth"] \
    + _activations + _losses


def embedding(x, weight, padding_idx=None, max_norm=None, norm_type=2.0, sparse=False, scale_grad_by_freq=False,
              name=None):
    """Rows of weight at the ids x (Paddle's argument order); sparse=True: a row gradient (SelectedRows)."""
    return _ops.embedding(x, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)


def linear(x, weight, bias=None, name=None):
    """x @ weight + bias, weight [in_features, out_features] (Paddle's layout)."""
    return _ops.linear_in_out(x, weight, bias)


def dropout(x, p=0.5, axis=None, training=True, mode="upscale_in_train", name=None):
    if axis is not None or mode != "upscale_in_train":
        raise NotImplementedError("dropout: axis= and mode='downscale_in_infer' are not supported")
    from ....scope import recorder
    rec = recorder()
    if not hasattr(rec, "dropout"):
        return _ops.dropout(x, p, training)
    with rec.dropout(x) as done:  # static mode's recorder: one dropout op of the program, gone for_test
        return done(_ops.dropout(x, p, training))


def _nchw(data_format, name):
    if data_format not in ("NCHW", "NCL"):
        raise NotImplementedError(f"{name}: data_format={data_format!r}; channels come first (NCHW / NCL) here")


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, data_format="NCL", name=None):
    _nchw(data_format, "conv1d")
    return _F.conv1d(x, weight, bias, stride, padding, dilation, groups)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, data_format="NCHW", name=None):
    _nchw(data_format, "conv2d")
    return _F.conv2d(x, weight, bias, stride, padding, dilation, groups)


def max_pool2d(x, kernel_size, stride=None, padding=0, return_mask=False, ceil_mode=False, data_format="NCHW",
               name=None):
    _nchw(data_format, "max_pool2d")
    if return_mask or ceil_mode:
        raise NotImplementedError("max_pool2d: return_mask=True and ceil_mode=True are not supported")
    return _F.max_pool2d(x, kernel_size, stride, padding)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True, divisor_override=None,
               data_format="NCHW", name=None):
    """Paddle's exclusive=True leaves the padding out of each window's count; windows here count it
    (exclusive=False), so padding with exclusive=True is refused."""
    _nchw(data_format, "avg_pool2d")
    if ceil_mode or divisor_override is not None or (exclusive and padding not in (0, (0, 0), [0, 0])):
        raise NotImplementedError("avg_pool2d: ceil_mode, divisor_override and padding with exclusive=True "
                                  "are not supported (pass exclusive=False to count the padding)")
    return _F.avg_pool2d(x, kernel_size, stride, padding)


def adaptive_avg_pool2d(x, output_size, data_format="NCHW", name=None):
    _nchw(data_format, "adaptive_avg_pool2d")
    return _F.adaptive_avg_pool2d(x, output_size)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.9, epsilon=1e-05,
               data_format="NCHW", use_global_stats=None, name=None):
    """Paddle's momentum keeps that share of the running statistics (PyTorch's is 1 - it), and the
    running variance takes the batch's biased variance (Paddle's formula, PyTorch's is unbiased).
    In static mode one batch_norm op of the program (its moving statistics updated at each run)."""
    _nchw(data_format, "batch_norm")
    training = training and not use_global_stats  # use_global_stats: the running statistics, also in training
    from ....scope import recorder
    rec = recorder()
    if hasattr(rec, "batch_norm") and rec.knows(x):
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: static mode needs running_mean and running_var (the moving statistics)")
        return rec.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, epsilon)
    return _ops.batch_norm(x, running_mean, running_var, weight, bias, training, 1.0 - momentum, epsilon,
                           unbiased_running_var=False)


# --- more of paddle.nn.functional 2.0, composites of differentiable ops

def one_hot(x, num_classes, name=None):
    """float32 rows of zeros with a one at each label of x (any shape; a new last dim)."""
    return _ops.cast(_ops.unsqueeze(x, -1) == _ops.arange(num_classes), "float32")


def normalize(x, p=2, axis=1, epsilon=1e-12, name=None):
    """x divided by its p-norm along axis (at least epsilon)."""
    return x / _ops.maximum(_ops.norm(x, p, axis, keepdim=True), epsilon)


def cosine_similarity(x1, x2, axis=1, eps=1e-8):
    dot = (x1 * x2).sum(axis)
    return dot / _ops.maximum(_ops.norm(x1, 2, axis) * _ops.norm(x2, 2, axis), eps)


def label_smooth(label, prior_dist=None, epsilon=0.1, name=None):
    """(1 - epsilon) label + epsilon times the prior (uniform over the last dim by default)."""
    prior = 1.0 / label.shape[-1] if prior_dist is None else prior_dist
    return (1.0 - epsilon) * label + epsilon * prior



def _install_paddle_types():
    from ..._composites import install
    install(globals(), "paddle.nn.functional")  # F.silu records as silu in static mode (graph/blocks.py)


_install_paddle_types()
