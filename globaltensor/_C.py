"""flow._C: OneFlow's functional namespace (functional_api.yaml's names and signatures) over our ops; the C++ extension is globaltensor._native.

Most names are our op of the same name, called as OneFlow calls it (SAME_CALL below: data, one
row per source). The rest are thin functions with OneFlow's signature: its own ops (slice,
slice_update, split_like, the *_like ops, bias_add, arg_sort, the softmax / sparse cross
entropies: ops/oneflow_functional.py, ops/oneflow_losses.py) and OneFlow's argument order where
ours differs (matmul's transposes, losses taking reduction third, smooth_l1_loss, normal, pad).
"""
from . import ops as _ops
from .errors import DTypeError, ShapeError
from .nn import functional as _F
from .tensor import device as _device
from .ops.oneflow_functional import (arg_sort, bias_add, broadcast_like, dtype_text, fused_mlp, one_hot,  # noqa: F401
                                     pixel_shuffle, reduce_sum_like, reshape_like, shape_text, slice, slice_update,
                                     split_like, throw_error)
from .ops.oneflow_losses import (check_smooth_l1, softmax_cross_entropy, softmax_cross_entropy_grad,  # noqa: F401
                                 sparse_cross_entropy, sparse_softmax_cross_entropy)

# OneFlow's functional names whose OneFlow call (positional order, keywords) is ours as it stands.
SAME_CALL = {
    _ops: (
        "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "amax", "amin", "argmax", "argmin", "argwhere", "asin",
        "asinh", "atan", "atanh", "atleast_1d", "atleast_2d", "atleast_3d", "baddbmm", "bitwise_and", "bitwise_not",
        "bitwise_or", "bitwise_xor", "broadcast_to", "cast", "ceil", "chunk", "clamp", "clamp_max", "clamp_min",
        "clip", "clone", "column_stack", "concat", "conj", "cos", "cosh", "cumprod", "cumsum", "diag", "diagonal",
        "div", "dot", "dstack", "erf", "erfc", "exp", "exp2", "expand", "expm1", "flatten", "flip", "floor",
        "floor_divide", "fmod", "frac", "full_like", "gather_nd", "greater", "greater_equal", "hsplit", "hstack",
        "imag", "index_select", "isfinite", "isinf", "isnan", "lerp", "less", "less_equal", "log", "log10", "log1p",
        "log2", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "logsumexp", "masked_fill",
        "max", "maximum", "median", "min", "minimum", "mm", "movedim", "mul", "multinomial", "narrow", "negative",
        "nonzero", "norm", "not_equal", "ones_like", "permute", "pow", "real", "reciprocal", "repeat_interleave",
        "reshape", "roll", "round", "rsqrt", "scatter", "select", "sign", "sin", "sinh", "sort", "split", "sqrt",
        "square", "squeeze", "stack", "std", "sub", "swapaxes", "swapdims", "t", "tan", "tensor_split", "tensordot",
        "tile", "topk", "transpose", "tril", "triu", "trunc", "unbind", "unique", "unsqueeze", "var", "vsplit",
        "vstack", "where", "zeros_like",
    ),
    _F: (
        "adaptive_avg_pool2d", "celu", "cosine_similarity", "dropout", "elu", "gelu", "glu", "hardshrink",
        "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "log_softmax", "logsigmoid", "mish",
        "pairwise_distance", "prelu", "relu", "rrelu", "scaled_dot_product_attention", "selu", "sigmoid", "silu",
        "softmax", "softplus", "softshrink", "softsign", "tanh", "threshold",
    ),
}
for _source, _names in SAME_CALL.items():
    for _name in _names:
        globals()[_name] = getattr(_source, _name)

# Ours beside the table (OneFlow's own ops and argument orders): the names a user finds here.
OWN = ("arg_sort", "bias_add", "broadcast_like", "cross_entropy", "ctc_loss", "fused_mlp", "l1_loss", "matmul",
       "mse_loss", "nll_loss", "normal", "normalization", "normalize", "one_hot", "pad", "pixel_shuffle",
       "triplet_margin_loss", "reduce_sum_like", "reshape_like", "slice", "slice_update", "smooth_l1_loss", "softmax_cross_entropy",
       "softmax_cross_entropy_grad", "sparse_cross_entropy", "sparse_softmax_cross_entropy", "split_like",
       "throw_error")
__all__ = sorted({n for names in SAME_CALL.values() for n in names} | set(OWN))


def matmul(a, b, transpose_a=False, transpose_b=False, alpha=1.0):
    """alpha * op(a) @ op(b), op transposing the last two dims where asked."""
    if a.ndim < 1:
        raise ShapeError("Tensor a's dim should >= 1")
    if b.ndim < 1:
        raise ShapeError("Tensor b's dim should >= 1")
    if transpose_a:
        a = _ops.transpose(a, -2, -1)
    if transpose_b:
        b = _ops.transpose(b, -2, -1)
    out = _ops.matmul(a, b)
    return out if alpha == 1.0 else out * alpha


def _reduction(reduction):
    """OneFlow's check of a loss's reduction."""
    if reduction not in ("none", "sum", "mean"):
        raise ShapeError("Reduction should be none, sum or mean.")
    return reduction


def l1_loss(input, target, reduction="mean"):
    return _F.l1_loss(input, target, reduction=_reduction(reduction))


def mse_loss(input, target, reduction="mean"):
    return _F.mse_loss(input, target, reduction=_reduction(reduction))


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    return _F.nll_loss(input, target, weight=weight, ignore_index=ignore_index, reduction=_reduction(reduction))


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    return _F.cross_entropy(input, target, weight=weight, ignore_index=ignore_index, reduction=_reduction(reduction),
                            label_smoothing=label_smoothing)


def triplet_margin_loss(anchor, positive, negative, *, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction="mean"):
    return _F.triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps, swap=swap,
                                  reduction=_reduction(reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, max_target_length=0, blank=0, zero_infinity=False,
             reduction="mean"):
    """OneFlow's order (max_target_length, which PyTorch's ctc_loss reads from the targets, is unused)."""
    return _F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                       reduction=_reduction(reduction), zero_infinity=zero_infinity)


def smooth_l1_loss(logits, label, beta, reduction):
    """OneFlow's order (input, target, beta, reduction), its checks, then F.smooth_l1_loss."""
    logits, label = check_smooth_l1(logits, label, beta)
    return _F.smooth_l1_loss(logits, label, reduction=_reduction(reduction), beta=beta)


def normal(mean=0.0, std=1.0, size=None, *, out=None, placement=None, sbp=None, dtype=None, device=None,
           generator=None, requires_grad=False):
    """Normal samples of shape size (OneFlow's checks: a floating dtype; out's shape, dtype and
    device those asked for); with out, out takes the values and is returned."""
    if dtype is not None and not dtype.is_floating:
        raise NotImplementedError("Only support float and double in normal().")
    size = tuple(size) if isinstance(size, (tuple, list)) else (size,) if size is not None else None
    if out is not None:
        if size is not None and tuple(out.shape) != size:
            raise ShapeError(f"Shape of out_tensor does not match shape. Expected shape: {shape_text(size)}, "
                             f"actual shape: {shape_text(out.shape)}")
        if dtype is not None and dtype != out.dtype:
            raise DTypeError(f"data type {dtype_text(dtype)} does not match data type of out parameter "
                             f"{dtype_text(out.dtype)}")
        if device is not None and not out.is_global and _device(device) != out.device:
            raise RuntimeError(f"device type {device} does not match device type of out parameter {out.device}")
        if out.is_global:
            placement, sbp = out.placement, out.sbp
        drawn = _ops.normal(mean, std, tuple(out.shape), dtype=out.dtype, placement=placement, sbp=sbp,
                            generator=generator)
        return out.copy_(drawn)
    return _ops.normal(mean, std, size, dtype=dtype, placement=placement, sbp=sbp, device=device,
                       generator=generator, requires_grad=requires_grad)


_PAD_MODES = ("constant", "reflect", "replicate")


def pad(x, pad, mode="constant", value=0):  # noqa: A002 - OneFlow's names
    """nn.functional.pad after OneFlow's check of the mode."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Pad mode is {mode}, but only constant, reflect and replicate are valid.")
    functional_pad = getattr(_F, "pad", None)  # nn.functional.pad, where this build has it
    if functional_pad is None:
        raise NotImplementedError("flow._C.pad needs globaltensor.nn.functional.pad, which this build lacks")
    return functional_pad(x, pad, mode=mode, value=value)


def normalize(input, p=2.0, dim=1, eps=1e-12, use_l2_norm_kernel=True):
    """input / max(norm_p(input, dim), eps); OneFlow's check of dim for its L2 kernel (p = 2)."""
    if use_l2_norm_kernel and p == 2.0:
        axis = dim + input.ndim if dim < 0 else dim
        if axis < 0:
            raise ShapeError(f"Axis should >=0 but axis is {axis} now.")
        if axis > input.ndim - 1:
            raise ShapeError(f"Axis should < {input.ndim} but axis is {axis} now.")
    return _F.normalize(input, p, dim, eps)


def normalization(x, moving_mean=None, moving_variance=None, gamma=None, beta=None, axis=1, epsilon=1e-5,
                  momentum=0.9, is_training=False):
    """Batch normalization over the channel axis (OneFlow's checks), F.batch_norm's computation;
    momentum as PyTorch's (the running statistics move by momentum towards the batch's)."""
    if (moving_mean is None) != (moving_variance is None):
        raise ShapeError("Both moving_mean and moving_variance should be None or Tensor.")
    if x.ndim < 2:
        raise ShapeError("NumAxes of x should be greater or equal than 2.")
    if not is_training and moving_mean is None:
        raise ShapeError("Must have moving_mean and moving_variance in eval mode.")
    axis = axis + x.ndim if axis < 0 else axis
    moved = x if axis == 1 else _ops.movedim(x, axis, 1)
    y = _F.batch_norm(moved, moving_mean, moving_variance, gamma, beta, training=is_training, momentum=momentum,
                      eps=epsilon)
    return y if axis == 1 else _ops.movedim(y, 1, axis)
