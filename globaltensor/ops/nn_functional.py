"""nn.functional: composites of registered primitives (their SBP rows and gradients come with
them), plus embedding as a primitive with its own rows."""
import builtins

import numpy as np

from .. import _C
from ..backends import cuda_kernels
from ..backends.devices import array_module
from . import rules
from ._front import apply, c_floats, tensors
from .elementwise import exp, gelu, log, relu, sigmoid  # noqa: F401 - part of this family
from .reduction import _as, _float, logsumexp, max, mean, sum  # noqa: A004
from .registry import op
from ..creation import rand, zeros_like

B, P, S = rules.B, rules.P, rules.split


def _softmax_backward(ctx, g):
    """y * (g - sum(g * y)) along dim."""
    y, dim = ctx.outputs[0], ctx.static["dim"]
    return (y * (g - sum(g * y, dim, keepdim=True)),)


@op("softmax", rules.along_dims(lambda i, o, st: [(d, d) for d in range(len(i)) if d != st["dim"]]),
    _softmax_backward, meta=lambda s, dt, st: ([tuple(s[0])], [dt[0]]))
def _softmax(x, dim=-1):
    """One primitive: exp(x - max) / sum(exp(x - max)) along dim, in two passes of numpy over x
    (slices along the other dims are independent, so their splits pass through)."""
    xp = array_module(x)
    e = x - x.max(axis=dim, keepdims=True)
    xp.exp(e, out=e)
    e /= e.sum(axis=dim, keepdims=True)
    return e


def softmax(input, dim=-1, *, dtype=None):
    """exp(x - max) / sum(exp(x - max)) along dim (in dtype when given)."""
    input = _as(input, dtype)
    dim = dim % input.ndim
    if input.shape[dim] == 0:  # nothing to normalise (and no max of an empty dim)
        return input * 1
    if not input.dtype.is_floating:
        input = _float(input)
    return apply("softmax", [input], {"dim": dim})


def log_softmax(input, dim=-1, *, dtype=None):
    """x - logsumexp(x) along dim (in dtype when given)."""
    input = _as(input, dtype)
    dim = dim % input.ndim
    if input.shape[dim] == 0:
        return input * 1
    return input - logsumexp(input, dim, keepdim=True)


def dropout(input, p=0.5, training=True):
    """Zero each element with probability p and scale the rest by 1 / (1 - p). The mask comes
    from the sharding-invariant generator, so it does not depend on the layout."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0:
        return input
    from ..sbp import broadcast
    if input.is_global:
        u = rand(*input.shape, dtype=input.dtype, placement=input.placement, sbp=tuple(
            s if s is not P else broadcast for s in input.sbp))
    else:
        u = rand(*input.shape, dtype=input.dtype)
    keep = (u >= p).astype(input.dtype)
    return input * keep * (1.0 / (1.0 - p)) if p < 1 else input * 0.0


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last len(normalized_shape) dims, then * weight + bias:
    one primitive (a C++ pass per row for float32/float64 on the CPU)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    input = tensors(input)[0]
    if tuple(input.shape[input.ndim - len(shape):]) != shape or len(shape) > input.ndim:
        raise ValueError(f"layer_norm: normalized_shape {shape} is not the end of the input's shape "
                         f"{tuple(input.shape)}")
    if not input.dtype.is_floating:
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
        _C.layer_norm(y, mean, rstd, x, None if w is None else np.ascontiguousarray(w, x.dtype),
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
        _C.layer_norm_backward(dx, dw, db, np.ascontiguousarray(g), np.ascontiguousarray(x),
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


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalise each channel (dim 1) by the batch's mean and (biased) variance in training,
    updating running_mean / running_var in place (the unbiased variance, by momentum), or by the
    running statistics otherwise; then * weight + bias (PyTorch's F.batch_norm). Two passes
    over x: the per-channel sums (on a batch split over ranks they are partial: the statistics
    are the global batch's, SyncBatchNorm by construction) and x * a + b per channel."""
    from ..autograd import no_grad
    from .elementwise import rsqrt
    input = tensors(input)[0]
    c = input.shape[1] if input.ndim >= 2 else 0
    if input.ndim < 2 or c == 0:
        raise ValueError(f"batch_norm expects [N, C, ...] input with C > 0, got shape {tuple(input.shape)}")
    if not input.dtype.is_floating:
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
        s1, s2 = apply("channel_sums", [input], multi=True)
        mean = s1 * (1.0 / count)
        var = (s2 * (1.0 / count) - mean * mean).clip(0, None)
        if running_mean is not None and running_var is not None:
            with no_grad():
                m = momentum
                running_mean.mul_(1 - m).add_((mean * m).astype(running_mean.dtype))
                running_var.mul_(1 - m).add_((var * (m * count / builtins.max(count - 1, 1))).astype(running_var.dtype))
    else:
        mean, var = running_mean, running_var
    scale = rsqrt(var + eps)
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale if bias is None else bias - mean * scale
    return apply("channel_affine", [input, scale.astype(input.dtype), shift.astype(input.dtype)])


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
        _C.channel_sums(s1, s2, np.ascontiguousarray(x))
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
        _C.channel_affine(y, np.ascontiguousarray(x), np.ascontiguousarray(a), np.ascontiguousarray(b))
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
        _C.channel_affine_backward(dx, sum_g, sum_gx, np.ascontiguousarray(g), np.ascontiguousarray(x),
                                   np.ascontiguousarray(a))
        return dx, sum_g, sum_gx
    dims = (0,) + tuple(range(2, x.ndim))
    wide = g.astype(np.float64)
    return (g * _per_channel(a, x)).astype(x.dtype, copy=False), wide.sum(axis=dims), (wide * x).sum(axis=dims)


def _linear_rows(in_shapes, out_shapes, static):
    """x (..., k), w (n, k), b (n): y = x @ w.T + b.
    batch S(d) on x -> S(d)                     rows of y come from rows of x
    w S(0), b S(0) -> S(last)                   column parallel: y[..., n1] = x @ w[n1].T + b[n1]
    x S(last), w S(1), b P -> P                 row parallel: sum over k pieces; b added once
    x P, b P / w P, b P -> P                    bilinear, the bias split into summands too
    """
    nd = len(in_shapes[0])
    has_b = len(in_shapes) == 3
    rows = [((B,) * len(in_shapes), (B,))]
    rows += [((S(d), B) + ((B,) if has_b else ()), (S(d),)) for d in range(nd - 1)]
    rows.append(((B, S(0)) + ((S(0),) if has_b else ()), (S(nd - 1),)))
    rows.append(((S(nd - 1), S(1)) + ((P,) if has_b else ()), (P,)))
    rows.append(((P, B) + ((P,) if has_b else ()), (P,)))
    rows.append(((B, P) + ((P,) if has_b else ()), (P,)))
    return rows


def _linear_backward(ctx, g):
    from .reduction import sum as _sum
    from .shape import reshape
    x, w = ctx.inputs[0], ctx.inputs[1]
    dx = None  # the first layer's input needs none
    if x.requires_grad:  # dx in x's memory order (a hint: element-wise ops on mixed orders run ~10x
        # slower); the order of a piece is a fact of this rank, so it may steer only the kernel
        dx = apply("matmul", [g, w], order="F" if x.ndim == 2 and _fortran_order(x._local) else None)
    g2, x2 = reshape(g, (-1, g.shape[-1])), reshape(x, (-1, x.shape[-1]))
    if len(ctx.inputs) == 3 and w.requires_grad and ctx.inputs[2].requires_grad and \
            not isinstance(g._local, np.ndarray):  # on GPUs: dw and db in one cuBLASLt call
        return (dx,) + tuple(apply("linear_weight_grad", [g2, x2], multi=True))
    dw = apply("matmul", [g2.T, x2], out=ctx.dest(1)) if w.requires_grad else None
    if len(ctx.inputs) == 2:
        return dx, dw
    return dx, dw, (_sum(g2, 0) if ctx.inputs[2].requires_grad else None)


def _linear_weight_grad_meta(s, dt, st):
    (m, n), (m2, k) = s
    if m != m2:
        raise ValueError(f"linear_weight_grad: g {tuple(s[0])} and x {tuple(s[1])} need the same rows")
    return [(n, k), (n,)], [rules.result_dtype(*dt), np.sum(np.zeros(0, dt[0].np), axis=0).dtype]


@op("linear_weight_grad", lambda s, o, st: [
    ((B, B), (B, B)),
    ((S(0), S(0)), (P, P)),  # rows split: g[m1].T @ x[m1] + g[m2].T @ x[m2] = g.T @ x; the row sums add up
    ((S(1), B), (S(0), S(0))),  # g's columns n1: dw[n1] = g[:, n1].T @ x, db[n1] = sum of g[:, n1]
    ((B, S(1)), (S(1), B)),  # x's columns k1: dw[:, k1] = g.T @ x[:, k1]; db needs g alone
    ((P, B), (P, P)),  # linear in g
    ((B, P), (P, B))], meta=_linear_weight_grad_meta)  # linear in x; db from g alone
def _linear_weight_grad(g, x):
    """(g.T @ x, g summed over rows) for g (m x n), x (m x k): linear's weight and bias gradients,
    in one cuBLASLt call (bias gradient epilogue) on GPUs."""
    if cuda_kernels.usable(g, x, op="linear_weight_grad"):
        return cuda_kernels.linear_weight_grad(g, x, bias_grad=True)
    return np.matmul(g.T, x), g.sum(0)


def _fortran_order(a):
    return a.flags.f_contiguous and not a.flags.c_contiguous


def _linear_meta(s, dt, st):
    x, w = tuple(s[0]), tuple(s[1])
    if len(w) != 2 or not x or x[-1] != w[1]:
        raise ValueError(f"linear: x {x} and weight {w} (out_features, in_features) do not fit")
    shape = x[:-1] + (w[0],)
    if len(s) == 3:
        shape = rules.broadcast_shape([shape, s[2]])
    return [shape], [rules.result_dtype(*dt)]


@op("linear", _linear_rows, _linear_backward, meta=_linear_meta)
def _linear(x, w, b=None):
    if cuda_kernels.usable(x, w, b, op="linear"):  # cupy pieces on a GPU: one cuBLASLt call, bias fused
        return cuda_kernels.linear(x, w, b)
    if x.ndim == 2 and 8 <= x.shape[0] <= w.shape[0] and x.shape[0] * w.shape[0] >= 1 << 16:
        y = np.matmul(w, x.T).T  # fewer rows than outputs: OpenBLAS runs this 1.1-1.7x faster than x @ w.T
    else:
        y = np.matmul(x, w.T)
    if b is not None:
        if y.dtype == np.result_type(y, b) and y.shape == np.broadcast_shapes(y.shape, b.shape):
            y += b  # y is fresh: add in place, no second output
        else:
            y = y + b
    return y


def linear(input, weight, bias=None):
    """x @ weight.T + bias (weight has shape (out_features, in_features), as in OneFlow); one
    primitive, so a layer is one dispatch forward and three in backward."""
    return apply("linear", tensors(input, weight) if bias is None else tensors(input, weight, bias))


def _embedding_rows(s, o, st):
    """indices, weight (num, dim) -> rows of weight at the indices.
    indices S(d), weight B -> S(d)           each position looks up its own row
    weight S(1) (columns) -> S(last)         each rank holds a slice of every row
    weight P -> P                            the lookup is linear in the table
    weight S(0) (rows), indices B -> P       each rank looks up the ids in its rows, zeros for
                                             the rest (the vocabulary-parallel embedding)"""
    n = len(s[0])
    return ([((B, B), (B,)), ((B, P), (P,)), ((B, S(1)), (S(n),)), ((B, S(0)), (P,))] +
            [((S(d), B), (S(d),)) for d in range(n)])


def _embedding_backward(ctx, g):
    indices, weight = ctx.inputs
    flat_idx = indices.reshape(-1)
    flat_g = g.reshape(-1, weight.shape[1])
    return None, apply("index_add", [zeros_like(weight), flat_idx, flat_g], {"dim": 0, "size": weight.shape[0]})


def _embedding_meta(s, dt, st):
    indices, weight = tuple(s[0]), tuple(s[1])
    rules.check_index_dtype("embedding", dt[0], "indices")
    if len(weight) != 2:
        raise ValueError(f"embedding: the weight must be 2-D (num_embeddings, dim), got shape {weight}")
    return [indices + weight[1:]], [dt[1]]


@op("embedding", _embedding_rows, _embedding_backward, meta=_embedding_meta, takes_offsets=True)
def _embedding(indices, weight, num=None, offsets=None):
    """The table's rows at the indices; a piece of the table (rows from offsets[1][0]) gives zeros
    for the indices outside it. Indices outside the whole table (num rows) raise IndexError."""
    from .indexing import _in_slice
    num = weight.shape[0] if num is None else num
    local, inside = _in_slice("embedding", indices, num, offsets[1][0] if offsets else 0, weight.shape[0])
    if inside is None:
        return np.take(weight, local, axis=0)
    if weight.shape[0] == 0:
        return np.zeros(indices.shape + weight.shape[1:], weight.dtype)
    return np.where(inside[..., None], np.take(weight, local, axis=0), 0).astype(weight.dtype, copy=False)


def embedding(input, weight, padding_idx=None):
    """Rows of weight at the indices x. Rows: indices split -> output split alike; weight split
    by columns (S(1)) -> output split on its last dim; partial weight -> partial output. A
    table split by rows (S(0)) gives a partial output: each rank looks up the indices that
    fall in its rows and leaves zeros elsewhere (the model-parallel embedding). Indices outside
    the table raise IndexError."""
    input, weight = tensors(input, weight)
    out = apply("embedding", [input, weight], {"num": weight.shape[0]})
    if padding_idx is not None:
        out = out * (input != padding_idx).astype(out.dtype).unsqueeze(-1)
    return out


def legacy_reduction(size_average, reduce, reduction):
    """PyTorch's deprecated size_average=/reduce= as a reduction (both None: reduction)."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "mean" if size_average is not False else "sum"


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Negative log-likelihood of integer class targets under log_softmax(input) (classes on
    dim 1), as PyTorch: class weights (the mean divides by the weights of the counted targets),
    targets equal to ignore_index count for nothing, label_smoothing mixes in the uniform
    distribution over the classes."""
    from .shape import reshape
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"cross_entropy: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    input, target = tensors(input, target)
    logp = log_softmax(input, 1)
    if weight is not None:
        weight = tensors(input, weight)[1]
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


def _nll_terms(logp, target, weight, ignore_index):
    """(losses, counted, valid): -logp[n, target[n]] weighted by its class weight, targets equal
    to ignore_index counting for nothing (classes on dim 1)."""
    from .indexing import gather, index_select
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


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[n, target[n]] of log-probabilities (classes on dim 1), weighted, ignore_index counting
    for nothing; the mean divides by the weights of the counted targets, as PyTorch."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"nll_loss: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
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


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or none) of the squared differences; the mean is one primitive."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    input, target = tensors(input, target)
    if reduction == "mean" and tuple(input.shape) == tuple(target.shape) and input.dtype.is_floating:
        return apply("mse_mean", [input, target], {"count": input.numel()})
    d = input - target
    if reduction == "none":
        return d * d
    return mean(d * d) if reduction == "mean" else sum(d * d)


# --- attention heads: [batch, seq, heads * head_dim] <-> [batch, heads, seq, head_dim] --------
# A split of the features is a split of whole heads (S(2) <-> S(1)) when the heads divide
# evenly over the mesh axis; otherwise a piece is not a whole number of heads and the kernel
# says so (make num_heads a multiple of the axis size).

_HEAD_ROWS = [((B,), (B,)), ((S(0),), (S(0),)), ((S(1),), (S(2),)), ((S(2),), (S(1),)), ((P,), (P,))]


def _pieces_of_heads(name, features, head_dim):
    if features % head_dim:
        raise ValueError(f"{name}: this rank's piece has {features} features, not a whole number of heads of "
                         f"{head_dim}: split the heads over a mesh axis whose size divides num_heads")
    return features // head_dim


@op("split_heads", lambda s, o, st: _HEAD_ROWS, lambda ctx, g: merge_heads(g),
    meta=lambda s, dt, st: ([(s[0][0], s[0][2] // st["head_dim"], s[0][1], st["head_dim"])], [dt[0]]))
def _split_heads(x, head_dim=1):
    b, n, e = x.shape
    h = _pieces_of_heads("split_heads", e, head_dim)
    return array_module(x).ascontiguousarray(x.reshape(b, n, h, head_dim).transpose(0, 2, 1, 3))


def split_heads(input, num_heads):
    """[batch, seq, num_heads * head_dim] -> [batch, num_heads, seq, head_dim]; features split
    over a mesh axis become heads split over it (no communication)."""
    (input,) = tensors(input)
    if input.ndim != 3 or input.shape[2] % num_heads:
        raise ValueError(f"split_heads: a [batch, seq, features] tensor with features divisible by num_heads "
                         f"({num_heads}) is needed, got shape {tuple(input.shape)}")
    return apply("split_heads", [input], {"head_dim": input.shape[2] // num_heads})


_MERGE_ROWS = [(i, o) for o, i in _HEAD_ROWS]


@op("merge_heads", lambda s, o, st: _MERGE_ROWS, lambda ctx, g: split_heads(g, ctx.inputs[0].shape[1]),
    meta=lambda s, dt, st: ([(s[0][0], s[0][2], s[0][1] * s[0][3])], [dt[0]]))
def _merge_heads(x):
    b, h, n, d = x.shape
    return array_module(x).ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, n, h * d)


def merge_heads(input):
    """[batch, heads, seq, head_dim] -> [batch, seq, heads * head_dim] (split_heads' inverse)."""
    (input,) = tensors(input)
    if input.ndim != 4:
        raise ValueError(f"merge_heads: a [batch, heads, seq, head_dim] tensor is needed, got shape "
                         f"{tuple(input.shape)}")
    return apply("merge_heads", [input])
