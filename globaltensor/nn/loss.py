"""PyTorch's losses beyond MSE and cross-entropy (L1, NLL, BCE, KL, Huber, margins, ...): functions and modules."""
from .. import ops
from ..ops.losses import legacy_reduction, nll_loss
from . import loss_fns as fns
from .distance import CosineSimilarity, PairwiseDistance  # noqa: F401 - re-exported
from .module import Module
from ..errors import bad_reduction
from ..dispatch import amp_entry

__all__ = ["l1_loss", "smooth_l1_loss", "nll_loss", "binary_cross_entropy_with_logits", "kl_div", "L1Loss",
           "SmoothL1Loss", "NLLLoss", "BCEWithLogitsLoss", "KLDivLoss", "NLLLoss2d", "BCELoss", "HuberLoss",
           "SoftMarginLoss", "MultiLabelSoftMarginLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
           "CosineEmbeddingLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "PoissonNLLLoss",
           "GaussianNLLLoss", "MultiMarginLoss", "MultiLabelMarginLoss"]


def _reduce(losses, reduction, name):
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "none":
        return losses
    raise bad_reduction(name, reduction)


@amp_entry("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _reduce(ops.abs(input - target), legacy_reduction(size_average, reduce, reduction), "l1_loss")


@amp_entry("smooth_l1_loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (d = input - target)."""
    d = ops.abs(input - target)
    losses = d - 0.5 * beta if beta == 0 else ops.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(losses, legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")


@amp_entry("binary_cross_entropy_with_logits")
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


@amp_entry("kl_div")
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

    def _weights(self, **weights):
        """Class weights as buffers (PyTorch's: in the state_dict, moved with the module); None stays out."""
        for name, value in weights.items():
            self.register_buffer(name, value)


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
        self._weights(weight=weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self._weights(weight=weight, pos_weight=pos_weight)

    def forward(self, input, target):
        return binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                pos_weight=self.pos_weight)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated name of NLLLoss for (N, C, H, W) inputs."""


class BCELoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight

    def forward(self, input, target):
        return fns.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class HuberLoss(_Loss):
    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return fns.huber_loss(input, target, self.reduction, self.delta)


class SoftMarginLoss(_Loss):
    def forward(self, input, target):
        return fns.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight

    def forward(self, input, target):
        return fns.multilabel_soft_margin_loss(input, target, self.weight, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input, target):
        return fns.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return fns.margin_ranking_loss(input1, input2, target, self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return fns.cosine_embedding_loss(input1, input2, target, self.margin, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return fns.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                       reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return fns.triplet_margin_with_distance_loss(anchor, positive, negative,
                                                     distance_function=self.distance_function,
                                                     margin=self.margin, swap=self.swap, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return fns.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                    reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return fns.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class MultiMarginLoss(_Loss):
    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p, self.margin, self.weight = p, margin, weight

    def forward(self, input, target):
        return fns.multi_margin_loss(input, target, self.p, self.margin, self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    def forward(self, input, target):
        return fns.multilabel_margin_loss(input, target, reduction=self.reduction)
