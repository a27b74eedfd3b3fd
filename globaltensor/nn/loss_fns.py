"""PyTorch's functional losses beyond NLL/MSE/L1 (bce, huber, margin, triplet, poisson, gaussian, ...) as composites,
and OneFlow's sparse_softmax_cross_entropy."""
import math

from .. import ops
from ..ops.losses import legacy_reduction
from ..ops.oneflow_losses import sparse_softmax_cross_entropy as _sparse_softmax_ce
from .activation_fns import logsigmoid
from .distance import pairwise_distance
from ..errors import bad_reduction
from ..dispatch import amp_entry

__all__ = ["reduced", "binary_cross_entropy", "huber_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "hinge_embedding_loss", "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss", "poisson_nll_loss", "gaussian_nll_loss", "multi_margin_loss",
           "multilabel_margin_loss", "sparse_softmax_cross_entropy"]


def reduced(losses, reduction, name, size_average=None, reduce=None):
    """losses reduced as PyTorch's reduction= ("mean", "sum", "none"; the legacy flags win when given)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean":
        return ops.mean(losses)
    if reduction == "sum":
        return ops.sum(losses)
    if reduction == "none":
        return losses
    raise bad_reduction(name, reduction)


def _positive(x):
    """max(x, 0) with the gradient of x only where x > 0."""
    return ops.where(x > 0, x, 0.0)


def _class_index(x, dim):
    """A tensor like x holding each element's index along dim (as x's dtype): laid out as x is."""
    return ops.cumsum(ops.ones_like(x), dim) - 1


def _clamped_log(x):
    """log(x) clamped below at -100 (PyTorch's binary_cross_entropy), 0 and negatives giving -100."""
    positive = x > 0
    logs = ops.log(ops.where(positive, x, 1.0))
    return ops.where(positive & (logs > -100), logs, -100.0)


@amp_entry("binary_cross_entropy")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(y log x + (1 - y) log(1 - x)), each log clamped at -100; weight scales each element."""
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                         f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size.")
    losses = -(target * _clamped_log(input) + (1 - target) * _clamped_log(1 - input))
    if weight is not None:
        losses = losses * weight
    return reduced(losses, reduction, "binary_cross_entropy", size_average, reduce)


@amp_entry("huber_loss")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere (d = input - target)."""
    d = input - target
    a = ops.abs(d)
    losses = ops.where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta)
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise ValueError("Weights and input must have the same size.")
        losses = losses * weight
    return reduced(losses, reduction, "huber_loss")


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y x))."""
    return reduced(ops.log1p(ops.exp(-input * target)), reduction, "soft_margin_loss", size_average, reduce)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(y log sigmoid(x) + (1 - y) log sigmoid(-x)), weighted, averaged over the classes (the last dim)."""
    losses = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        losses = losses * weight
    last = input.ndim - 1
    losses = ops.sum(losses, last) * (1.0 / input.shape[last])
    return reduced(losses, reduction, "multilabel_soft_margin_loss", size_average, reduce)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where y == 1, max(0, margin - x) where y == -1 (both where y is neither)."""
    margins = ops.where(target != 1, _positive(margin - input), 0.0)
    selves = ops.where(target != -1, input, 0.0)
    return reduced(margins + selves, reduction, "hinge_embedding_loss", size_average, reduce)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -y (x1 - x2) + margin)."""
    return reduced(_positive(-target * (input1 - input2) + margin), reduction, "margin_ranking_loss",
                   size_average, reduce)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where y == 1, max(0, cos(x1, x2) - margin) where y == -1 (PyTorch's 1e-12 in the norms)."""
    dim = 1 if input1.ndim == 2 else 0
    dot = ops.sum(input1 * input2, dim)
    squares = (ops.sum(input1 * input1, dim) + 1e-12) * (ops.sum(input2 * input2, dim) + 1e-12)
    cos = dot / ops.sqrt(squares)
    losses = ops.where(target == 1, 1 - cos, 0.0) + ops.where(target == -1, _positive(cos - margin), 0.0)
    return reduced(losses, reduction, "cosine_embedding_loss", size_average, reduce)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0), d the p-norm distance (swap: d(a, n) is min(d(a, n), d(p, n)))."""
    def distance(x1, x2):
        return pairwise_distance(x1, x2, p, eps)
    return triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=distance, margin=margin,
                                             swap=swap, reduction=legacy_reduction(size_average, reduce, reduction))


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) for any distance function (default: pairwise_distance)."""
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: expected margin to be greater than 0, got {margin}")
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_swap = distance(positive, negative)
        d_neg = ops.where(d_swap < d_neg, d_swap, d_neg)
    return reduced(_positive(d_pos - d_neg + margin), reduction, "triplet_margin_loss")


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(x) - y x (log_input), x - y log(x + eps) otherwise; full adds Stirling's term where y > 1."""
    if log_input:
        losses = ops.exp(input) - target * input
    else:
        losses = input - target * ops.log(input + eps)
    if full:
        big = target > 1
        y = ops.where(big, target, 1.0)
        stirling = y * ops.log(y) - y + ops.log(y * (2 * math.pi)) * 0.5
        losses = losses + ops.where(big, stirling, 0.0)
    return reduced(losses, reduction, "poisson_nll_loss", size_average, reduce)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log var + (x - y)^2 / var) (+ 0.5 log 2 pi with full); var clamped below at eps, one dim short
    of input or broadcastable over one dim (homoscedastic), or a float."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = ops.full_like(input, float(var))
    else:
        if bool(ops.any(var < 0)):
            raise ValueError("var has negative entry/entries")
        in_shape, var_shape = tuple(input.shape), tuple(var.shape)
        if var_shape != in_shape:
            if in_shape[:-1] == var_shape:
                var = ops.unsqueeze(var, -1)
            elif not (len(in_shape) == len(var_shape)
                      and sum(b for a, b in zip(in_shape, var_shape) if a != b) == 1):
                raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise bad_reduction("gaussian_nll_loss", reduction)
    # PyTorch clamps a copy of var without recording it: the gradient is that of the unclamped var
    var = var + ops.where(var < eps, eps - var, 0.0).detach()
    d = input - target
    losses = (ops.log(var) + d * d / var) * 0.5
    if full:
        losses = losses + 0.5 * math.log(2 * math.pi)
    return reduced(losses, reduction, "gaussian_nll_loss")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    """sum over i != y of max(0, margin - x[y] + x[i])^p (times weight[y]), divided by the classes."""
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    one_d = input.ndim <= 1
    if one_d:
        input, target = ops.reshape(input, (1, -1)), ops.reshape(target, (1,))
    target_col = ops.unsqueeze(target, 1)
    picked = ops.gather(input, 1, target_col)
    z = _positive(margin - picked + input)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * ops.unsqueeze(ops.index_select(weight, 0, target), 1)
    other = _class_index(input, 1) != ops.cast(target_col, input.dtype)
    losses = ops.sum(ops.where(other, z, 0.0), 1) * (1.0 / input.shape[1])
    if one_d:
        losses = ops.reshape(losses, ())
    return reduced(losses, reduction, "multi_margin_loss", size_average, reduce)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over the target classes j (target's entries up to the first -1) and the other classes i of
    max(0, 1 - (x[j] - x[i])), divided by the classes."""
    one_d = input.ndim <= 1
    if one_d:
        input, target = ops.reshape(input, (1, -1)), ops.reshape(target, (1, -1))
    classes = input.shape[1]
    valid = ops.cumsum(ops.cast(target == -1, input.dtype), 1) == 0  # (N, J): before the first -1
    index = ops.where(valid, target, 0)
    picked = ops.gather(input, 1, index)  # x[y_j]
    hits = ops.unsqueeze(ops.cast(index, input.dtype), 2) == ops.unsqueeze(_class_index(input, 1), 1)  # (N, J, C)
    is_target = ops.sum(ops.cast(hits & ops.unsqueeze(valid, 2), input.dtype), 1) > 0  # (N, C)
    z = _positive(1 - ops.unsqueeze(picked, 2) + ops.unsqueeze(input, 1))  # (N, J, C)
    keep = ops.unsqueeze(valid, 2) & ops.unsqueeze(~is_target, 1)
    losses = ops.sum(ops.where(keep, z, 0.0), (1, 2)) * (1.0 / classes)
    if one_d:
        losses = ops.reshape(losses, ())
    return reduced(losses, reduction, "multilabel_margin_loss", size_average, reduce)


def sparse_softmax_cross_entropy(labels, logits):
    """OneFlow's (TensorFlow's) order, labels first: -log_softmax(logits)[..., labels], classes on
    the last dim, one loss per label (flow._C.sparse_softmax_cross_entropy(logits, labels))."""
    return _sparse_softmax_ce(logits, labels)
