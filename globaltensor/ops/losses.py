"""Losses: cross_entropy, nll_loss (class weights, ignore_index, label smoothing) and mse_loss.

Composites of registered ops, except mse_loss's mean, one primitive (S, S -> P)."""
import builtins

import numpy as np

from ..backends.devices import array_module
from ..registry import rules
from ._front import apply, tensors
from .reduction import mean, sum  # noqa: A004
from ..registry import op
from .activations import log_softmax
from ..errors import bad_reduction
from ..dispatch import amp_entry

B, P, S = rules.B, rules.P, rules.split


def legacy_reduction(size_average, reduce, reduction, what="loss"):
    """PyTorch's deprecated size_average=/reduce= as a reduction (both None: reduction, checked)."""
    if size_average is None and reduce is None:
        if reduction not in ("none", "mean", "sum"):
            raise bad_reduction(what, reduction)
        return reduction
    if reduce is False:
        return "none"
    return "mean" if size_average is not False else "sum"


@amp_entry("cross_entropy")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Negative log-likelihood of integer class targets under log_softmax(input) (classes on
    dim 1), as PyTorch: class weights (the mean divides by the weights of the counted targets),
    targets equal to ignore_index count for nothing, label_smoothing mixes in the uniform
    distribution over the classes; a float target of input's shape holds class probabilities."""
    from .shape import reshape
    reduction = legacy_reduction(size_average, reduce, reduction, "cross_entropy")
    if reduction not in ("none", "mean", "sum"):
        raise bad_reduction("cross_entropy", reduction)
    input, target = tensors(input, target)
    logp = log_softmax(input, 1)
    if weight is not None:
        weight = tensors(input, weight)[1]
    if target.dtype.is_floating and tuple(target.shape) == tuple(input.shape):
        return _soft_cross_entropy(logp, target, weight, label_smoothing, reduction)
    losses, counted, valid = _nll_terms(logp, target, weight, ignore_index)
    if label_smoothing:
        if weight is None:
            smooth = -sum(logp, 1)
        else:
            shape = [1] * input.ndim
            shape[1] = input.shape[1]
            smooth = -sum(logp * reshape(weight, shape), 1)
        losses = losses * (1.0 - label_smoothing) + smooth * valid * (label_smoothing / input.shape[1])
    return _nll_reduced(losses, counted, reduction)


def _soft_cross_entropy(logp, target, weight, label_smoothing, reduction):
    """PyTorch's class-probability targets: -sum_c weight_c * target_c * log p_c per sample (label
    smoothing mixes the uniform distribution into the targets); the mean is over the samples."""
    from .shape import reshape
    classes = logp.shape[1]
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    terms = logp * target
    if weight is not None:
        terms = terms * reshape(weight, (1, classes) + (1,) * (logp.ndim - 2))
    losses = -sum(terms, 1)
    if reduction == "none":
        return losses
    total = sum(losses)
    return total if reduction == "sum" else total / max(losses.numel(), 1)


def _nll_terms(logp, target, weight, ignore_index):
    """(losses, counted, valid): -logp[n, target[n]] weighted by its class weight, targets equal
    to ignore_index counting for nothing (classes on dim 1)."""
    from .gather_scatter import gather, index_select
    from .shape import reshape, squeeze, unsqueeze
    safe = target.clip(0, None)
    valid = (target != ignore_index).astype(logp.dtype)
    counted = valid if weight is None else \
        reshape(index_select(weight, 0, reshape(safe, -1)), tuple(target.shape)) * valid
    return -squeeze(gather(logp, 1, unsqueeze(safe, 1)), 1) * counted, counted, valid


def _nll_reduced(losses, counted, reduction):
    """PyTorch's reductions of weighted NLL terms: the mean divides by the counted weights."""
    if reduction == "none":
        return losses
    if reduction == "sum":
        return sum(losses)
    return sum(losses) / sum(counted)


@amp_entry("nll_loss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[n, target[n]] of log-probabilities (classes on dim 1), weighted, ignore_index counting
    for nothing; the mean divides by the weights of the counted targets, as PyTorch."""
    reduction = legacy_reduction(size_average, reduce, reduction, "nll_loss")
    if reduction not in ("none", "mean", "sum"):
        raise bad_reduction("nll_loss", reduction)
    input, target = tensors(input, target)
    if weight is not None:
        weight = tensors(input, weight)[1]
    losses, counted, _ = _nll_terms(input, target, weight, ignore_index)
    return _nll_reduced(losses, counted, reduction)


def _mse_rows(in_shapes, out_shapes, static):
    """mean((x - y)^2) over all elements: pieces split alike give partial sums of the mean
    (each divides by the global count): S(d), S(d) -> P; B, B -> B."""
    rows = [((B, B), (B,))]
    rows += [((S(d), S(d)), (P,)) for d in range(len(in_shapes[0])) if in_shapes[0][d] == in_shapes[1][d]]
    return rows


def _mse_backward(ctx, g):
    x, y = ctx.inputs
    d = (x - y) * (g * (2.0 / builtins.max(ctx.static["count"], 1)))
    return (d if x.requires_grad else None), (-d if y.requires_grad else None)


def _mse_meta(s, dt, st):
    if tuple(s[0]) != tuple(s[1]):
        raise ValueError(f"mse_mean: x {tuple(s[0])} and y {tuple(s[1])} need one shape")
    return [()], [rules.result_dtype(*dt)]


@op("mse_mean", _mse_rows, _mse_backward, meta=_mse_meta)
def _mse_mean(x, y, count=1):
    d = x - y
    total = np.sum(d * d)
    return array_module(d).asarray(total / count if count else total * np.nan,  # mean of nothing: nan
                                   dtype=np.result_type(x.dtype, y.dtype))


@amp_entry("mse_loss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or none) of the squared differences; the mean is one primitive."""
    reduction = legacy_reduction(size_average, reduce, reduction, "mse_loss")
    input, target = tensors(input, target)
    if reduction == "mean" and tuple(input.shape) == tuple(target.shape) and input.dtype.is_floating:
        return apply("mse_mean", [input, target], {"count": input.numel()})
    d = input - target
    if reduction == "none":
        return d * d
    return mean(d * d) if reduction == "mean" else sum(d * d)
