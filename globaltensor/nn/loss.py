"""Losses beyond MSE and cross-entropy, as composites of registered ops (PyTorch's formulas and
signatures): L1, smooth L1, NLL, BCE with logits, KL divergence."""
from .. import ops
from ..ops.losses import legacy_reduction, nll_loss
from .module import Module

__all__ = ["l1_loss", "smooth_l1_loss", "nll_loss", "binary_cross_entropy_with_logits", "kl_div", "L1Loss",
           "SmoothL1Loss", "NLLLoss", "BCEWithLogitsLoss", "KLDivLoss"]


def _reduce(losses, reduction, name):
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "none":
        return losses
    raise ValueError(f"{name}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _reduce(ops.abs(input - target), legacy_reduction(size_average, reduce, reduction), "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (d = input - target)."""
    d = ops.abs(input - target)
    losses = d - 0.5 * beta if beta == 0 else ops.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(losses, legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """max(x, 0) - x y + log(1 + exp(-|x|)), stable for large |x|; pos_weight scales the positive term."""
    if pos_weight is None:
        losses = ops.maximum(input, input * 0) - input * target + ops.log1p(ops.exp(-ops.abs(input)))
    else:
        log_sig = -(ops.maximum(-input, input * 0) + ops.log1p(ops.exp(-ops.abs(input))))  # log sigmoid(x)
        losses = -(pos_weight * target * log_sig + (1 - target) * (log_sig - input))
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, legacy_reduction(size_average, reduce, reduction), "binary_cross_entropy_with_logits")


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log target - input), input holding log-probabilities (0 where target is 0);
    reduction="batchmean" divides the sum by the batch size."""
    if log_target:
        losses = ops.exp(target) * (target - input)
    else:
        losses = ops.where(target > 0, target * (ops.log(ops.where(target > 0, target, target * 0 + 1)) - input),
                           target * 0)
    if reduction == "batchmean":
        return losses.sum() / input.shape[0]
    return _reduce(losses, legacy_reduction(size_average, reduce, reduction), "kl_div")


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction) if reduction != "batchmean" else reduction


class L1Loss(_Loss):
    def forward(self, input, target):
        return l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class NLLLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def forward(self, input, target):
        return nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, input, target):
        return binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                pos_weight=self.pos_weight)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
