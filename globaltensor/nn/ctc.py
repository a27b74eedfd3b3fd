"""CTCLoss and ctc_loss: the forward (alpha) recursion over time in log space, as composites of registered ops."""
import numpy as np

from .. import ops
from ..dtype import float32 as gt_float32
from ..ops._front import constant, constant_full
from ..tensor import Tensor
from .module import Module
from ..errors import bad_reduction

__all__ = ["ctc_loss", "CTCLoss"]

_NEG = -1e30  # log(0) stand-in: finite, so logsumexp of impossible paths has no NaN gradient


def _host(values):
    return np.asarray(values.numpy() if isinstance(values, Tensor) else values).astype(np.int64)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """-log of the probability of the targets summed over all their alignments (PyTorch's ctc_loss: log_probs
    (T, N, C) or (T, C); targets padded (N, S) or concatenated; 'mean' divides by the target lengths first)."""
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = ops.unsqueeze(log_probs, 1)
    steps, batch, _ = log_probs.shape
    in_len = _host(input_lengths).reshape(-1)
    tg_len = _host(target_lengths).reshape(-1)
    flat = _host(targets)
    if log_probs.is_global:  # one check of the host data every constant below comes from (taken on trust)
        from ..boxing.metadata import check_same_data
        check_same_data(np.concatenate([in_len, tg_len, flat.reshape(-1)]), log_probs.placement,
                         "ctc_loss (targets and lengths)")
    if unbatched:
        flat = flat.reshape(1, -1)
    longest = int(tg_len.max(initial=0))
    padded = np.full((batch, longest), blank, np.int64)
    offset = 0
    for n in range(batch):
        row = flat[n, :tg_len[n]] if flat.ndim == 2 else flat[offset:offset + tg_len[n]]
        offset += tg_len[n]
        padded[n, :tg_len[n]] = row
    width = 2 * longest + 1
    ext = np.full((batch, width), blank, np.int64)
    ext[:, 1::2] = padded
    skip = np.zeros((batch, width), bool)  # s - 2 -> s allowed: a label differing from the one two back
    skip[:, 3::2] = padded[:, 1:] != padded[:, :-1]
    start = np.full((batch, width), _NEG, np.float32)
    start[:, :2] = 0.0
    dt = log_probs.dtype
    index = constant(np.broadcast_to(ext, (steps, batch, width)).copy(), log_probs)
    emit = ops.gather(log_probs, 2, index)  # (T, N, width)
    neg_col = constant_full((batch, 1), _NEG, log_probs, gt_float32).astype(dt)
    neg_two = constant_full((batch, 2), _NEG, log_probs, gt_float32).astype(dt)
    skip_t = constant(skip, log_probs)
    alpha = emit[0] + constant(start, log_probs).astype(dt)
    for t in range(1, steps):
        one = ops.concat([neg_col, alpha[:, :-1]], 1)
        two = ops.where(skip_t, ops.concat([neg_two, alpha[:, :-2]], 1), _NEG)
        new = ops.logsumexp(ops.stack([alpha, one, two], 0), 0) + emit[t]
        live = constant((t < in_len).reshape(batch, 1), log_probs)
        alpha = ops.where(live, new, alpha)
    last = np.stack([2 * tg_len, np.maximum(2 * tg_len - 1, 0)], 1)
    ends = ops.gather(alpha, 1, constant(last, log_probs))
    end_mask = constant(np.where(tg_len[:, None] > 0, [[0.0, 0.0]], [[0.0, _NEG]]).astype(np.float32), log_probs)
    losses = -ops.logsumexp(ends + end_mask.astype(dt), 1)
    impossible = losses > 1e29
    losses = ops.where(impossible, 0.0 if zero_infinity else float("inf"), losses)
    if reduction == "mean":
        return ops.mean(losses / constant(np.maximum(tg_len, 1).astype(np.float32), log_probs).astype(dt))
    if reduction == "sum":
        return ops.sum(losses)
    if reduction == "none":
        return ops.reshape(losses, ()) if unbatched else losses
    raise bad_reduction("ctc_loss", reduction)


class CTCLoss(Module):
    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__()
        self.blank, self.reduction, self.zero_infinity = blank, reduction, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                        self.zero_infinity)
