"""batch_norm; its training step as primitives: the batch's statistics, the normalisation, its backward.

Forward: batch_norm_stats (per channel sum / count and sum of squares / count, partial on a
batch-split input) -> one all_reduce of that [2, C] vector -> batch_norm_apply. Backward:
batch_norm_backward (dx's g * scale part, the partial [2, C] gradients of the statistics, dweight,
dbias) -> one all_reduce -> batch_norm_backward_input (dx). On a channel-split input nothing is
reduced. The kernels make the numpy calls of the per-channel composite this replaced (ops/norms.py
before issue 35's s7), in its order, so the results are its bits (on 2 ranks: a sum of two partials
has one order; on more ranks the collective's order can round the last bit differently)."""
import builtins

import numpy as np

from .. import sbp as sbp_mod
from ..registry import op, rules
from ._front import apply, tensors
from .norms import _channel_affine, _channel_affine_backward_kernel, _channel_sums
from .reduction import _float

B, P, S = rules.B, rules.P, rules.split


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5,
               unbiased_running_var=True):
    """Normalise each channel (dim 1) by the batch's mean and (biased) variance in training,
    updating running_mean / running_var in place (by momentum, with the unbiased variance as
    PyTorch, or with the biased one as Paddle: unbiased_running_var=False), or by the
    running statistics otherwise; then * weight + bias (PyTorch's F.batch_norm). Training is
    ops/batch_norm_train.py: two passes over x, the per-channel sums (on a batch split over ranks
    they are partial and all-reduced once: the statistics are the global batch's, SyncBatchNorm by
    construction) and x * a + b per channel."""
    from .elementwise import rsqrt
    input = tensors(input)[0]
    c = input.shape[1] if input.ndim >= 2 else 0
    if input.ndim < 2 or c == 0:
        raise ValueError(f"batch_norm expects [N, C, ...] input with C > 0, got shape {tuple(input.shape)}")
    if not input.dtype.is_floating and not input.dtype.is_complex:  # complex: the op refuses it
        input = _float(input)
    count = input.numel() // c
    if momentum is None:
        raise ValueError("batch_norm: momentum=None (a cumulative average) is not supported; give a float")
    if not training and (running_mean is None or running_var is None):
        raise ValueError("batch_norm: evaluation (training=False) needs running_mean and running_var")
    if training:
        if count < 2:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input size "
                             f"{tuple(input.shape)}")
        y, mean, var = batch_norm_train(input, weight, bias, eps, count)
        if running_mean is not None and running_var is not None:
            share = momentum * count / builtins.max(count - 1, 1) if unbiased_running_var else momentum
            update_running(running_mean, running_var, mean, var, momentum, share)
        return y
    mean, var = running_mean, running_var
    scale = rsqrt(var + eps)
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale if bias is None else bias - mean * scale
    return apply("channel_affine", [input, scale.astype(input.dtype), shift.astype(input.dtype)])


def batch_norm_train(input, weight, bias, eps, count):
    """y, batch mean, batch (biased) variance of an [N, C, ...] input: two ops and one collective
    of 2C floats on a batch-split input (none on a channel-split one)."""
    from ..autograd import no_grad
    with no_grad():  # the statistics' gradient is batch_norm_apply's backward's (it adds the dx they make)
        st = _whole(apply("batch_norm_stats", [input], {"count": count}), input)
    extra = [t for t in (weight, bias) if t is not None]
    static = {"eps": float(eps), "count": count, "has_weight": weight is not None, "has_bias": bias is not None}
    return apply("batch_norm_apply", [input, st] + extra, static, multi=True)


def update_running(running_mean, running_var, mean, var, momentum, share):
    """running_mean = running_mean * (1 - momentum) + mean * momentum (in its dtype), running_var
    likewise with var * share: one op for both, each tensor then takes its new value in place."""
    from ..autograd import no_grad
    static = {"keep": 1 - momentum, "momentum": momentum, "share": share}
    with no_grad():
        new_mean, new_var = apply("batch_norm_running", [running_mean, running_var, mean, var], static, multi=True)
        for t, new in ((running_mean, new_mean), (running_var, new_var)):
            if new.is_global and (new.placement != t.placement or new.sbp != t.sbp):
                new = new.to_global(placement=t.placement, sbp=t.sbp)
            t._become(new)  # written into its piece, as the composite's mul_ and add_ did


@op("batch_norm_running", lambda s, o, st: [((B,) * 4, (B, B)), ((S(0),) * 4, (S(0), S(0)))],
    meta=lambda s, dt, st: ([tuple(s[0]), tuple(s[1])], [dt[0], dt[1]]))
def _batch_norm_running(rm, rv, mean, var, keep=0.9, momentum=0.1, share=0.1):
    """rm * keep + (mean * momentum) cast to rm's dtype; rv * keep + (var * share) cast to rv's
    dtype: the in-place mul_ then add_ of the composite, in its order. Per channel: any split alike."""
    return (rm * rm.dtype.type(keep) + (mean * mean.dtype.type(momentum)).astype(rm.dtype),
            rv * rv.dtype.type(keep) + (var * var.dtype.type(share)).astype(rv.dtype))


def _whole(t, input):
    """t (a per-channel vector, channels on its last dim) whole on every rank: its partial sums added
    by one all_reduce, unless the input's channels are split on that mesh axis (t stays split)."""
    if not t.is_global:
        return t
    want = tuple(s if s == sbp_mod.split(t.ndim - 1) and x == sbp_mod.split(1) else sbp_mod.broadcast
                 for s, x in zip(t.sbp, input.sbp))
    return t if want == tuple(t.sbp) else t.to_global(placement=t.placement, sbp=want)


def _not_channels(nd):
    return [0] + list(range(2, nd))


@op("batch_norm_stats", lambda s, o, st: [((B,), (B,)), ((S(1),), (S(1),))] +
    [((S(d),), (P,)) for d in _not_channels(len(s[0]))],
    meta=lambda s, dt, st: ([(2, s[0][1])], [np.dtype(np.float64)]))
def _batch_norm_stats(x, count=1):
    """[sum of x / count, sum of x * x / count] per channel (dim 1), float64.
    x split off the channels -> P (sums over row pieces); x S(1) -> S(1); B -> B."""
    s1, s2 = _channel_sums(x)
    return np.stack([s1 * (1.0 / count), s2 * (1.0 / count)])


def _statistics(st, w, eps):
    """mean, the variance before its clip, rsqrt(var + eps), the per-channel scale (float64)."""
    mean = st[0]
    v = st[1] - mean * mean
    rs = 1 / np.sqrt(np.clip(v, 0, None) + eps)
    return mean, v, rs, rs if w is None else rs * w.astype(np.float64)


def _apply_rows(s, o, st):
    """x, st (, weight, bias) -> y, mean, var.
    all B -> B, B, B
    x S(1), st S(1), weight, bias S(0) -> S(1), S(0), S(0)   channel pieces alone
    x split off the channels, the rest B -> split alike, B, B"""
    extra = len(s) - 2
    rows = [((B,) * len(s), (B,) * 3), ((S(1), S(1)) + (S(0),) * extra, (S(1), S(0), S(0)))]
    return rows + [((S(d), B) + (B,) * extra, (S(d), B, B)) for d in _not_channels(len(s[0]))]


def _apply_backward(ctx, g, *_):
    x, st = ctx.inputs[0], ctx.inputs[1]
    affine = ctx.inputs[2:]
    s = ctx.static
    dx1, part, dw, db = apply("batch_norm_backward", [g, x, st] + list(affine),
                              {"eps": s["eps"], "has_weight": s["has_weight"], "has_bias": s["has_bias"]}, multi=True)
    dx = None
    if x.requires_grad:
        dx = apply("batch_norm_backward_input", [dx1, x, _whole(part, x), st], {"count": s["count"]})
    grads = [dx, None]
    if s["has_weight"]:
        grads.append(dw if affine[0].requires_grad else None)
    if s["has_bias"]:
        grads.append(db if affine[-1].requires_grad else None)
    return tuple(grads)


@op("batch_norm_apply", _apply_rows, _apply_backward,
    meta=lambda s, dt, st: ([tuple(s[0]), (s[0][1],), (s[0][1],)], [dt[0], np.dtype(np.float64), np.dtype(np.float64)]))
def _batch_norm_apply(x, st, *affine, eps=1e-5, count=1, has_weight=False, has_bias=False):
    """y = x * scale[c] + shift[c], scale = rsqrt(var + eps) * weight, shift = bias - mean * scale."""
    w = affine[0] if has_weight else None
    mean, v, rs, scale = _statistics(st, w, eps)
    shift = affine[-1].astype(np.float64) - mean * scale if has_bias else -mean * scale
    return _channel_affine(x, scale.astype(x.dtype), shift.astype(x.dtype)), mean.copy(), np.clip(v, 0, None)


def _backward_rows(s, o, st):
    """g, x, st (, weight, bias) -> dx's g * scale part, the statistics' gradients [2, C], dweight, dbias.
    all B -> B, B, B, B
    g, x, st S(1), weight, bias S(0) -> S(1), S(1), S(0), S(0)
    g, x split off the channels, the rest B -> split alike, P, P, P   sums over rows"""
    extra = len(s) - 3
    rows = [((B,) * len(s), (B,) * 4), ((S(1),) * 3 + (S(0),) * extra, (S(1), S(1), S(0), S(0)))]
    return rows + [((S(d), S(d), B) + (B,) * extra, (S(d), P, P, P)) for d in _not_channels(len(s[1]))]


def _backward_meta(s, dt, st):
    c, extra = s[1][1], list(dt[3:])
    w_dt = extra[0] if st["has_weight"] else dt[1]
    b_dt = extra[-1] if st["has_bias"] else dt[1]
    return [tuple(s[1]), (2, c), (c,), (c,)], [dt[1], np.dtype(np.float64), w_dt, b_dt]


@op("batch_norm_backward", _backward_rows, meta=_backward_meta)
def _batch_norm_backward(g, x, st, *affine, eps=1e-5, has_weight=False, has_bias=False):
    """The composite's gradient arithmetic: through the casts of scale and shift to x's dtype,
    shift = bias - mean * scale, scale = rs * weight, rs = rsqrt(clip(v) + eps)."""
    w = affine[0] if has_weight else None
    mean, v, rs, scale = _statistics(st, w, eps)
    dx1, sum_g, sum_gx = _channel_affine_backward_kernel(g, x, scale.astype(x.dtype))
    g_shift = sum_g.astype(x.dtype).astype(np.float64)
    g_scale = sum_gx.astype(x.dtype).astype(np.float64) + -g_shift * mean
    db = g_shift.astype(affine[-1].dtype) if has_bias else np.zeros_like(g_shift, x.dtype)
    dw = (g_scale * rs).astype(w.dtype) if has_weight else np.zeros_like(g_shift, x.dtype)
    g_rs = g_scale if w is None else g_scale * w.astype(np.float64)
    g_var = g_rs * rs * rs * rs * -0.5 * ((v >= 0) * (v <= np.inf)).astype(np.float64)
    return dx1, np.stack([-g_shift * scale, g_var]), dw, db


@op("batch_norm_backward_input", lambda s, o, st: [((B,) * 4, (B,)), ((S(1),) * 4, (S(1),))] +
    [((S(d), S(d), B, B), (S(d),)) for d in _not_channels(len(s[1]))],
    meta=lambda s, dt, st: ([tuple(s[1])], [dt[1]]))
def _batch_norm_backward_input(dx1, x, grads, st, count=1):
    """dx = dx1 + x * a[c] + b[c]: the statistics' whole gradients (mean's, the variance's) through
    var = e2 - mean * mean, mean = s1 / count, e2 = s2 / count, d s2 = 2 x d x."""
    g_var, mean = grads[1], st[0]
    g_mm = -g_var * mean
    g_mean = grads[0] + g_mm + g_mm
    a = (g_var * (1.0 / count) * 2.0).astype(x.dtype)
    return dx1 + _channel_affine(x, a, (g_mean * (1.0 / count)).astype(x.dtype))
