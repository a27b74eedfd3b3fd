"""Normalisations: layer_norm, and BatchNorm's per-channel passes (sums, affine), with backwards.

Each is one primitive forward and one backward, with a C++ pass per row (layer_norm) or per
channel (BatchNorm's) for float32/float64 pieces on the CPU; batch_norm itself is ops/batch_norm_train.py."""
import numpy as np

from .. import _native
from ..backends.devices import array_module
from ..registry import rules
from ._front import apply, c_floats, tensors
from .reduction import _float
from ..registry import op
from ..creation import zeros_like
from ..errors import ShapeError

B, P, S = rules.B, rules.P, rules.split


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last len(normalized_shape) dims, then * weight + bias:
    one primitive (a C++ pass per row for float32/float64 on the CPU)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    input = tensors(input)[0]
    if tuple(input.shape[input.ndim - len(shape):]) != shape or len(shape) > input.ndim:
        raise ShapeError(f"Given normalized_shape={shape}, expected input with shape [*, "
                         f"{''.join(f'{n},' for n in shape)}], but got input of size {input.shape} (layer_norm: "
                         f"normalized_shape must be the end of the input's shape)")
    if not input.dtype.is_floating and not input.dtype.is_complex:  # complex: the op refuses it
        input = _float(input)
    extra = [t for t in (weight, bias) if t is not None]
    ins = tensors(input, *extra) if extra else [input]
    static = {"ndims": len(shape), "eps": float(eps), "has_weight": weight is not None, "has_bias": bias is not None}
    return apply("layer_norm", ins, static, multi=True)[0]


def _layer_norm_rows(s, o, st):
    """x (..., *normalized) (, weight, bias of the normalized shape) -> y, mean, rstd.
    all B -> B, B, B
    x split on a leading dim d, weight and bias B -> S(d), S(d), S(d)   rows are normalised alone
    No P row: the normalisation is not linear."""
    lead, extra = len(s[0]) - st["ndims"], len(s) - 1
    return [((B,) * len(s), (B,) * 3)] + [((S(d),) + (B,) * extra, (S(d),) * 3) for d in range(lead)]


def _layer_norm_meta(s, dt, st):
    x = tuple(s[0])
    stats = x[:len(x) - st["ndims"]] + (1,) * st["ndims"]
    for t in s[1:]:
        if tuple(t) != x[len(x) - st["ndims"]:]:
            raise ValueError(f"layer_norm: weight and bias must have the normalized shape {x[len(x) - st['ndims']:]}, "
                             f"got {tuple(t)}")
    return [x, stats, stats], [dt[0]] * 3


def _layer_norm_backward(ctx, g, *_):
    x, st = ctx.inputs[0], ctx.static
    w = ctx.inputs[1] if st["has_weight"] else None
    ins = [g, x, ctx.outputs[1], ctx.outputs[2]] + ([w] if w is not None else [])
    dx, dw, db = apply("layer_norm_backward", ins, {"ndims": st["ndims"]}, multi=True)
    grads = [dx if x.requires_grad else None]
    for flag, t, grad in (("has_weight", w, dw), ("has_bias", ctx.inputs[-1], db)):
        if st[flag]:
            grads.append(grad if t.requires_grad else None)
    return tuple(grads)


@op("layer_norm", _layer_norm_rows, _layer_norm_backward, meta=_layer_norm_meta)
def _layer_norm(x, *affine, ndims=1, eps=1e-5, has_weight=False, has_bias=False):
    w = affine[0] if has_weight else None
    b = affine[-1] if has_bias else None
    stats = x.shape[:x.ndim - ndims] + (1,) * ndims
    if x.size == 0:  # an empty piece (rows split over more ranks than there are)
        xp = array_module(x)
        return xp.empty(x.shape, x.dtype), xp.empty(stats, x.dtype), xp.empty(stats, x.dtype)
    if c_floats(x):
        x = np.ascontiguousarray(x)
        y, mean, rstd = np.empty(x.shape, x.dtype), np.empty(stats, x.dtype), np.empty(stats, x.dtype)
        _native.layer_norm(y, mean, rstd, x, None if w is None else np.ascontiguousarray(w, x.dtype),
                      None if b is None else np.ascontiguousarray(b, x.dtype), eps)
        return y, mean, rstd
    xp = array_module(x)
    dims = tuple(range(x.ndim - ndims, x.ndim))
    mean = x.mean(axis=dims, keepdims=True, dtype=np.float32 if x.itemsize < 4 else x.dtype)
    centered = x - mean
    rstd = 1 / xp.sqrt((centered * centered).mean(axis=dims, keepdims=True) + eps)
    y = centered * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y.astype(x.dtype), mean.astype(x.dtype), rstd.astype(x.dtype)


def _layer_norm_backward_rows(s, o, st):
    """g, x, mean, rstd (, weight) -> dx, dweight, dbias.
    all B -> B, B, B
    a leading dim d split on g, x, mean, rstd; weight B -> S(d), P, P   dweight, dbias sum over rows
    g P, the rest B -> P, P, P                                       every gradient is linear in g"""
    lead, w = len(s[1]) - st["ndims"], len(s) - 4
    rows = [((B,) * len(s), (B,) * 3), ((P, B, B, B) + (B,) * w, (P,) * 3)]
    return rows + [((S(d),) * 4 + (B,) * w, (S(d), P, P)) for d in range(lead)]


def _layer_norm_backward_meta(s, dt, st):
    x = tuple(s[1])
    return [x, x[len(x) - st["ndims"]:], x[len(x) - st["ndims"]:]], [dt[1]] * 3


@op("layer_norm_backward", _layer_norm_backward_rows, meta=_layer_norm_backward_meta)
def _layer_norm_backward_kernel(g, x, mean, rstd, w=None, ndims=1):
    """dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w; dw = sum of g * xhat and
    db = sum of g over the rows."""
    norm_shape = x.shape[x.ndim - ndims:]
    if x.size == 0:  # no rows here: nothing to add to the weight's and bias's sums
        xp = array_module(x)
        return xp.empty(x.shape, x.dtype), xp.zeros(norm_shape, x.dtype), xp.zeros(norm_shape, x.dtype)
    if c_floats(x, g):
        dx, dw, db = np.empty(x.shape, x.dtype), np.empty(norm_shape, x.dtype), np.empty(norm_shape, x.dtype)
        _native.layer_norm_backward(dx, dw, db, np.ascontiguousarray(g), np.ascontiguousarray(x),
                               np.ascontiguousarray(mean), np.ascontiguousarray(rstd),
                               None if w is None else np.ascontiguousarray(w, x.dtype))
        return dx, dw, db
    dims = tuple(range(x.ndim - ndims, x.ndim))
    lead = tuple(range(x.ndim - ndims))
    wide = np.float32 if x.dtype.itemsize < 4 else x.dtype  # float16 / bfloat16 accumulate in float32
    g, xhat = g.astype(wide), (x.astype(wide) - mean.astype(wide)) * rstd.astype(wide)
    rstd = rstd.astype(wide)
    gw = g if w is None else g * w.astype(wide)
    dx = rstd * (gw - gw.mean(axis=dims, keepdims=True) - xhat * (gw * xhat).mean(axis=dims, keepdims=True))
    return dx.astype(x.dtype), (g * xhat).sum(axis=lead).astype(x.dtype), g.sum(axis=lead).astype(x.dtype)


def _channel_sums_meta(s, dt, st):
    return [(s[0][1],), (s[0][1],)], [np.dtype(np.float64)] * 2


def _channel_sums_backward(ctx, g1, g2):
    x = ctx.inputs[0]
    zeros_c = lambda: zeros_like(ctx.outputs[0])  # noqa: E731
    g1 = zeros_c() if g1 is None else g1
    g2 = zeros_c() if g2 is None else g2
    return (apply("channel_affine", [x, (g2 * 2.0).astype(x.dtype), g1.astype(x.dtype)]),)


@op("channel_sums", lambda s, o, st: [((B,), (B, B)), ((S(1),), (S(0), S(0)))] +
    [((S(d),), (P, P)) for d in [0] + list(range(2, len(s[0])))],
    _channel_sums_backward, meta=_channel_sums_meta)
def _channel_sums(x):
    """Per channel (dim 1): the sum and the sum of squares, in float64.
    x S(0) or a spatial S(d) -> P, P (sums over row pieces); x S(1) -> S(0), S(0) (channel pieces)."""
    c = x.shape[1]
    if c_floats(x):
        s1, s2 = np.empty(c), np.empty(c)
        _native.channel_sums(s1, s2, np.ascontiguousarray(x))
        return s1, s2
    dims = (0,) + tuple(range(2, x.ndim))
    wide = x.astype(np.float64)
    return wide.sum(axis=dims), (wide * wide).sum(axis=dims)


def _per_channel(a, x):
    return a.reshape((1, -1) + (1,) * (x.ndim - 2))


def _channel_affine_backward(ctx, g):
    x, a, b = ctx.inputs
    dx, sum_g, sum_gx = apply("channel_affine_backward", [g, x, a], multi=True)
    return (dx if x.requires_grad else None, sum_gx.astype(a.dtype) if a.requires_grad else None,
            sum_g.astype(b.dtype) if b.requires_grad else None)


@op("channel_affine", lambda s, o, st: [((B, B, B), (B,)), ((S(1), S(0), S(0)), (S(1),)), ((P, B, P), (P,))] +
    [((S(d), B, B), (S(d),)) for d in [0] + list(range(2, len(s[0])))],
    _channel_affine_backward, meta=lambda s, dt, st: ([tuple(s[0])], [dt[0]]))
def _channel_affine(x, a, b):
    """x * a[c] + b[c] per channel (dim 1), one pass.
    x split anywhere but the channels, a, b B -> split alike; x S(1), a, b S(0) -> S(1) (channel
    pieces); x P, a B, b P -> P (linear in x and b)."""
    if c_floats(x, a, b):
        y = np.empty(x.shape, x.dtype)
        _native.channel_affine(y, np.ascontiguousarray(x), np.ascontiguousarray(a), np.ascontiguousarray(b))
        return y
    return (x * _per_channel(a, x) + _per_channel(b, x)).astype(x.dtype, copy=False)


@op("channel_affine_backward", lambda s, o, st: [((B, B, B), (B, B, B)), ((S(1), S(1), S(0)), (S(1), S(0), S(0))),
                                                  ((P, B, B), (P, P, P))] +
    [((S(d), S(d), B), (S(d), P, P)) for d in [0] + list(range(2, len(s[1])))],
    meta=lambda s, dt, st: ([tuple(s[1]), (s[1][1],), (s[1][1],)], [dt[1], np.dtype(np.float64), np.dtype(np.float64)]))
def _channel_affine_backward_kernel(g, x, a):
    """dx = g * a[c]; per channel the sums of g and of g * x (float64), one pass.
    rows split anywhere but the channels -> dx split alike, the sums P; channels split -> all
    split by channel; g P -> all P (linear in g)."""
    if c_floats(g, x, a):
        c = x.shape[1]
        dx, sum_g, sum_gx = np.empty(x.shape, x.dtype), np.empty(c), np.empty(c)
        _native.channel_affine_backward(dx, sum_g, sum_gx, np.ascontiguousarray(g), np.ascontiguousarray(x),
                                   np.ascontiguousarray(a))
        return dx, sum_g, sum_gx
    dims = (0,) + tuple(range(2, x.ndim))
    wide = g.astype(np.float64)
    return (g * _per_channel(a, x)).astype(x.dtype, copy=False), wide.sum(axis=dims), (wide * x).sum(axis=dims)
