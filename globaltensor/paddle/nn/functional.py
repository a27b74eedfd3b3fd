"""paddle.nn.functional: globaltensor's functional ops, with Paddle's meanings where they differ
(linear's weight is [in_features, out_features], dropout's third parameter is axis, gelu's
approximate is a bool)."""
from ... import ops as _ops
from ...nn import functional as _F
from ...nn.functional import cross_entropy as _cross_entropy
from ...nn.functional import embedding, layer_norm, log_softmax, mse_loss, relu  # noqa: F401
from ...ops import sigmoid, softmax, tanh  # noqa: F401

__all__ = ["cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax", "mse_loss", "relu",
           "sigmoid", "softmax", "tanh", "leaky_relu", "relu6", "elu", "selu", "softplus", "softsign", "softshrink",
           "hardshrink", "hardtanh", "hardsigmoid", "hardswish", "swish", "log_sigmoid", "tanhshrink",
           "thresholded_relu", "l1_loss", "smooth_l1_loss", "kl_div", "nll_loss", "binary_cross_entropy_with_logits",
           "conv1d", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm", "one_hot", "normalize",
           "cosine_similarity", "binary_cross_entropy", "square_error_cost", "label_smooth", "prelu"]


def linear(x, weight, bias=None, name=None):
    """x @ weight + bias, weight [in_features, out_features] (Paddle's layout)."""
    y = _ops.matmul(x, weight)
    return y if bias is None else y + bias


def dropout(x, p=0.5, axis=None, training=True, mode="upscale_in_train", name=None):
    if axis is not None or mode != "upscale_in_train":
        raise NotImplementedError("dropout: axis= and mode='downscale_in_infer' are not supported")
    return _ops.dropout(x, p, training)


def gelu(x, approximate=False, name=None):
    return _ops.gelu(x, "tanh" if approximate else "none")


def cross_entropy(input, label, weight=None, ignore_index=-100, reduction="mean", soft_label=False, axis=-1,
                  use_softmax=True, name=None):
    """Paddle's cross_entropy: a label of shape [N, 1] is the class column; use_softmax=False takes
    input as probabilities (the negative log of the labelled one)."""
    if weight is not None or soft_label or axis not in (-1, input.ndim - 1):
        raise NotImplementedError("cross_entropy: weight=, soft_label=True and an axis other than the last are not "
                                  "supported")
    if label.ndim == input.ndim and label.shape[-1] == 1:
        label = label.squeeze(-1)
    if use_softmax:
        return _cross_entropy(input, label, ignore_index=ignore_index, reduction=reduction)
    picked = -_ops.gather(input.log(), -1, label.unsqueeze(-1)).squeeze(-1)
    return {"mean": picked.mean, "sum": picked.sum}.get(reduction, lambda: picked)()


# --- activations: Paddle's formulas (paddle.nn.functional, 2.0), composites of differentiable ops

def leaky_relu(x, negative_slope=0.01, name=None):
    return _F.leaky_relu(x, negative_slope)


def relu6(x, name=None):
    return _ops.clip(x, 0.0, 6.0)


def elu(x, alpha=1.0, name=None):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return _ops.where(x > 0, x, alpha * (_ops.exp(_ops.minimum(x, 0.0)) - 1.0))


def selu(x, scale=1.0507009873554804934193349852946, alpha=1.6732632423543772848170429916717, name=None):
    return scale * elu(x, alpha)


def softplus(x, beta=1, threshold=20, name=None):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""
    bx = beta * x
    return _ops.where(bx > threshold, x, _ops.log1p(_ops.exp(_ops.minimum(bx, threshold))) / beta)


def softsign(x, name=None):
    return x / (1.0 + _ops.abs(x))


def softshrink(x, threshold=0.5, name=None):
    return _ops.where(x > threshold, x - threshold, _ops.where(x < -threshold, x + threshold, x * 0.0))


def hardshrink(x, threshold=0.5, name=None):
    return _ops.where(_ops.abs(x) > threshold, x, x * 0.0)


def hardtanh(x, min=-1.0, max=1.0, name=None):  # noqa: A002 - Paddle's names
    return _ops.clip(x, min, max)


def hardsigmoid(x, slope=0.1666667, offset=0.5, name=None):
    return _ops.clip(x * slope + offset, 0.0, 1.0)


def hardswish(x, name=None):
    return x * _ops.clip(x + 3.0, 0.0, 6.0) / 6.0


def swish(x, name=None):
    return x * _ops.sigmoid(x)


def log_sigmoid(x, name=None):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|."""
    return _ops.minimum(x, 0.0) - _ops.log1p(_ops.exp(-_ops.abs(x)))


def tanhshrink(x, name=None):
    return x - _ops.tanh(x)


def thresholded_relu(x, threshold=1.0, name=None):
    return _ops.where(x > threshold, x, x * 0.0)


# --- losses, convolution and pooling with Paddle's parameters

def l1_loss(input, label, reduction="mean", name=None):
    return _F.l1_loss(input, label, reduction=reduction)


def smooth_l1_loss(input, label, reduction="mean", delta=1.0, name=None):
    """Paddle's smooth L1 is the Huber loss: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta);
    that is delta times PyTorch's smooth L1 with beta = delta."""
    return delta * _F.smooth_l1_loss(input, label, reduction=reduction, beta=delta)


def kl_div(input, label, reduction="mean", name=None):
    return _F.kl_div(input, label, reduction=reduction)


def nll_loss(input, label, weight=None, ignore_index=-100, reduction="mean", name=None):
    return _F.nll_loss(input, label, weight=weight, ignore_index=ignore_index, reduction=reduction)


def binary_cross_entropy_with_logits(logit, label, weight=None, reduction="mean", pos_weight=None, name=None):
    return _F.binary_cross_entropy_with_logits(logit, label, weight=weight, reduction=reduction, pos_weight=pos_weight)


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
    """Paddle's momentum keeps that share of the running statistics (PyTorch's is 1 - it)."""
    _nchw(data_format, "batch_norm")
    training = training and not use_global_stats  # use_global_stats: the running statistics, also in training
    return _F.batch_norm(x, running_mean, running_var, weight, bias, training, 1.0 - momentum, epsilon)


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


def _reduce(loss, reduction, name):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def binary_cross_entropy(input, label, weight=None, reduction="mean", name=None):
    """-(label log(input) + (1 - label) log(1 - input)), the logs clipped at -100 as Paddle's."""
    loss = -(label * _ops.clip(_ops.log(input), -100.0) + (1.0 - label) * _ops.clip(_ops.log(1.0 - input), -100.0))
    return _reduce(loss if weight is None else loss * weight, reduction, "binary_cross_entropy")


def square_error_cost(input, label):
    return (input - label) ** 2


def label_smooth(label, prior_dist=None, epsilon=0.1, name=None):
    """(1 - epsilon) label + epsilon times the prior (uniform over the last dim by default)."""
    prior = 1.0 / label.shape[-1] if prior_dist is None else prior_dist
    return (1.0 - epsilon) * label + epsilon * prior


def prelu(x, weight, data_format="NCHW", name=None):
    """max(x, 0) + weight min(x, 0), weight one value or one per channel (dim 1)."""
    _nchw(data_format if x.ndim > 2 else "NCHW", "prelu")
    w = weight if weight.numel() == 1 or x.ndim < 2 else weight.reshape([-1] + [1] * (x.ndim - 2))
    return _ops.maximum(x, 0.0) + w * _ops.minimum(x, 0.0)


def relu_(x, name=None):
    return x.relu_()


def softmax_(x, axis=-1, dtype=None, name=None):
    return x.copy_(softmax(x, axis))


def elu_(x, alpha=1.0, name=None):
    return x.copy_(elu(x, alpha))


def _recordable_all():
    from ..static.program import recordable
    for name in __all__:
        globals()[name] = recordable(globals()[name])


_recordable_all()
