"""paddle.nn.functional's losses: Paddle's names, label shapes and reductions over the core's losses."""
from .... import ops as _ops
from ....nn import functional as _F
from ....nn import loss_fns as _losses

__all__ = ["cross_entropy", "softmax_with_cross_entropy", "mse_loss", "l1_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "nll_loss", "kl_div", "smooth_l1_loss", "square_error_cost", "log_loss",
           "sigmoid_focal_loss", "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "soft_margin_loss",
           "multi_label_soft_margin_loss", "multi_label_margin_loss", "multi_margin_loss", "ctc_loss",
           "poisson_nll_loss", "gaussian_nll_loss", "dice_loss"]


def _reduce(loss, reduction, name):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def _soft_cross_entropy(logp, label, weight, axis, reduction):
    """-sum(label * log p) along axis (kept, as Paddle's [N, 1]); a weight scales each row by
    sum(label * weight), and the mean divides by the sum of those."""
    loss = -(label * logp).sum(axis, keepdim=True)
    if weight is None:
        return _reduce(loss, reduction, "cross_entropy")
    shape = [1] * logp.ndim
    shape[axis] = -1
    row_weight = (label * _ops.reshape(weight, shape)).sum(axis, keepdim=True)
    loss = loss * row_weight
    return loss.sum() / row_weight.sum() if reduction == "mean" else _reduce(loss, reduction, "cross_entropy")


def _hard_cross_entropy(logp, label, weight, ignore_index, axis, reduction):
    """-log p of each labelled class; Paddle's mean: over the labels not ignored when ignore_index >= 0
    or with a weight (weighted), over every label otherwise (an ignored one counts as a zero loss)."""
    keep_dim = label.ndim == logp.ndim
    index = label if keep_dim else _ops.unsqueeze(label, axis)
    valid = index != ignore_index
    safe = _ops.where(valid, index, 0)
    loss = _ops.where(valid, -_ops.gather(logp, axis, safe), 0.0)
    weights = None
    if weight is not None:
        weights = _ops.where(valid, _ops.reshape(_ops.index_select(weight, 0, _ops.reshape(safe, [-1])), safe.shape),
                             0.0)
        loss = loss * weights
    if not keep_dim:
        loss = _ops.squeeze(loss, axis)
    if reduction != "mean":
        return _reduce(loss, reduction, "cross_entropy")
    if weights is not None:
        return loss.sum() / weights.sum()
    if ignore_index >= 0:
        return loss.sum() / _ops.cast(valid, loss.dtype).sum()
    return loss.mean()


def cross_entropy(input, label, weight=None, ignore_index=-100, reduction="mean", soft_label=False, axis=-1,
                  use_softmax=True, label_smoothing=0.0, name=None):
    """Paddle's cross_entropy along `axis`: hard labels of input's shape with 1 at axis ([N, 1]: the
    loss keeps that dim) or without it; soft_label=True: probabilities of input's shape; use_softmax
    =False takes input as probabilities; label_smoothing mixes the one-hot label with uniform."""
    axis = axis % input.ndim
    logp = _ops.log_softmax(input, axis) if use_softmax else _ops.log(input)
    if label_smoothing > 0.0 and not soft_label:
        classes = input.shape[axis]
        index = label if label.ndim == input.ndim else _ops.unsqueeze(label, axis)
        shape = [1] * input.ndim
        shape[axis] = classes
        one_hot = _ops.cast(index == _ops.reshape(_ops.arange(classes), shape), input.dtype)
        label, soft_label = one_hot, True
    if soft_label:
        if label_smoothing > 0.0:
            label = label * (1.0 - label_smoothing) + label_smoothing / input.shape[axis]
        return _soft_cross_entropy(logp, label, weight, axis, reduction)
    return _hard_cross_entropy(logp, label, weight, ignore_index, axis, reduction)


def softmax_with_cross_entropy(logits, label, soft_label=False, ignore_index=-100, numeric_stable_mode=True,
                               return_softmax=False, axis=-1):
    """The unreduced loss with the class dim kept (size 1); with return_softmax, (loss, softmax)."""
    if label.ndim < logits.ndim and not soft_label:
        label = _ops.unsqueeze(label, axis)
    loss = cross_entropy(logits, label, ignore_index=ignore_index, reduction="none", soft_label=soft_label, axis=axis)
    return (loss, _ops.softmax(logits, axis)) if return_softmax else loss


def mse_loss(input, label, reduction="mean", name=None):
    return _F.mse_loss(input, label, reduction=reduction)


def l1_loss(input, label, reduction="mean", name=None):
    return _F.l1_loss(input, label, reduction=reduction)


def binary_cross_entropy(input, label, weight=None, reduction="mean", name=None):
    """-(label log(input) + (1 - label) log(1 - input)), the logs clipped at -100."""
    return _losses.binary_cross_entropy(input, label, weight=weight, reduction=reduction)


def binary_cross_entropy_with_logits(logit, label, weight=None, reduction="mean", pos_weight=None, name=None):
    return _F.binary_cross_entropy_with_logits(logit, label, weight=weight, reduction=reduction, pos_weight=pos_weight)


def nll_loss(input, label, weight=None, ignore_index=-100, reduction="mean", name=None):
    return _F.nll_loss(input, label, weight=weight, ignore_index=ignore_index, reduction=reduction)


def kl_div(input, label, reduction="mean", log_target=False, name=None):
    """label * (log(label) - input); 'batchmean' divides the sum by the batch size."""
    return _F.kl_div(input, label, reduction=reduction, log_target=log_target)


def smooth_l1_loss(input, label, reduction="mean", delta=1.0, is_huber=True, name=None):
    """is_huber (Paddle's default): the Huber loss, 0.5 d^2 where |d| < delta, else delta (|d| - 0.5
    delta); is_huber=False: PyTorch's smooth L1 with beta = delta (the Huber loss / delta)."""
    plain = _F.smooth_l1_loss(input, label, reduction=reduction, beta=delta)
    return delta * plain if is_huber and delta != 1.0 else plain  # delta 1: Paddle's one huber_loss


def square_error_cost(input, label):
    return _ops.square(input - label)  # Paddle's elementwise_sub then square


def log_loss(input, label, epsilon=0.0001, name=None):
    """-(label log(input + epsilon) + (1 - label) log(1 - input + epsilon)), unreduced."""
    return -(label * _ops.log(input + epsilon) + (1.0 - label) * _ops.log(1.0 - input + epsilon))


def sigmoid_focal_loss(logit, label, normalizer=None, alpha=0.25, gamma=2.0, reduction="sum", name=None):
    """alpha_t (1 - p_t)^gamma BCE(logit, label), p_t the probability of the true side; divided by
    normalizer when given; summed by default (Paddle's)."""
    p = _ops.sigmoid(logit)
    bce = _F.binary_cross_entropy_with_logits(logit, label, reduction="none")
    p_t = p * label + (1.0 - p) * (1.0 - label)
    alpha_t = alpha * label + (1.0 - alpha) * (1.0 - label)
    loss = alpha_t * (1.0 - p_t) ** gamma * bce
    if normalizer is not None:
        loss = loss / normalizer
    return _reduce(loss, reduction, "sigmoid_focal_loss")


def margin_ranking_loss(input, other, label, margin=0.0, reduction="mean", name=None):
    return _losses.margin_ranking_loss(input, other, label, margin, reduction=reduction)


def hinge_embedding_loss(input, label, margin=1.0, reduction="mean", name=None):
    return _losses.hinge_embedding_loss(input, label, margin, reduction=reduction)


def cosine_embedding_loss(input1, input2, label, margin=0, reduction="mean", name=None):
    return _losses.cosine_embedding_loss(input1, input2, label, margin, reduction=reduction)


def triplet_margin_loss(input, positive, negative, margin=1.0, p=2, epsilon=1e-06, swap=False, reduction="mean",
                        name=None):
    return _losses.triplet_margin_loss(input, positive, negative, margin, p, epsilon, swap, reduction=reduction)


def triplet_margin_with_distance_loss(input, positive, negative, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean", name=None):
    return _losses.triplet_margin_with_distance_loss(input, positive, negative, distance_function=distance_function,
                                                     margin=margin, swap=swap, reduction=reduction)


def soft_margin_loss(input, label, reduction="mean", name=None):
    return _losses.soft_margin_loss(input, label, reduction=reduction)


def multi_label_soft_margin_loss(input, label, weight=None, reduction="mean", name=None):
    return _losses.multilabel_soft_margin_loss(input, label, weight, reduction=reduction)


def multi_label_margin_loss(input, label, reduction="mean", name=None):
    return _losses.multilabel_margin_loss(input, label, reduction=reduction)


def multi_margin_loss(input, label, p=1, margin=1.0, weight=None, reduction="mean", name=None):
    return _losses.multi_margin_loss(input, label, p, margin, weight, reduction=reduction)


def ctc_loss(log_probs, labels, input_lengths, label_lengths, blank=0, reduction="mean", norm_by_times=False,
             zero_infinity=False):
    """Paddle's log_probs are unscaled logits [T, N, C] (its warpctc takes their log-softmax first);
    'mean' divides each loss by its label length, then averages (PyTorch's rule)."""
    if norm_by_times:
        raise NotImplementedError("ctc_loss(norm_by_times=True) is not supported (it scales only the gradient)")
    return _F.ctc_loss(_ops.log_softmax(log_probs, -1), labels, input_lengths, label_lengths, blank, reduction,
                       zero_infinity)


def poisson_nll_loss(input, label, log_input=True, full=False, epsilon=1e-08, reduction="mean", name=None):
    return _losses.poisson_nll_loss(input, label, log_input, full, eps=epsilon, reduction=reduction)


def gaussian_nll_loss(input, label, variance, full=False, epsilon=1e-06, reduction="mean", name=None):
    return _losses.gaussian_nll_loss(input, label, variance, full, epsilon, reduction)


def dice_loss(input, label, epsilon=1e-05, name=None):
    """1 - 2 |X n Y| / (|X| + |Y|) per sample, averaged: input probabilities [N, ..., C], label the
    class indices [N, ..., 1]."""
    classes = input.shape[-1]
    one_hot = _ops.cast(label == _ops.reshape(_ops.arange(classes), [1] * (label.ndim - 1) + [classes]), input.dtype)
    dims = list(range(1, input.ndim))
    inter = (input * one_hot).sum(dims)
    return (1.0 - 2.0 * inter / (input.sum(dims) + one_hot.sum(dims) + epsilon)).mean()
