"""Convolution and pooling through unfolded patches: unfold2d (im2col) and its adjoint fold2d are
the primitives (rows: batch or channels split stay split, P -> P); conv2d is a matmul of the
patches (cuBLAS on GPUs), pooling a max or mean over them."""
import math

import numpy as np

from .. import _native
from ..registry import rules
from ._front import apply, c_floats, tensors, products_in_float32
from ..registry import op
from ..backends.devices import array_module
from ..scope import current as _scope
from ..errors import ArgumentError
from .conv_patches import (_channel_major_patches, _geometry, _image_major_conv, _out_size, _windows, keep_patches,
                           take_patches)

B, P, S = rules.B, rules.P, rules.split

# [N, C, H, W] -> [N, C, kh * kw, L]: batch and channel dims pass through, so their splits do
_ROWS = [((B,), (B,)), ((S(0),), (S(0),)), ((S(1),), (S(1),)), ((P,), (P,))]


def _unfold_meta(s, dt, st):
    n, c, h, w = s[0]
    oh, ow = _geometry(h, w, st)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"unfold2d: a {h}x{w} input is smaller than the kernel {st['kernel']} (padding "
                         f"{st['padding']}, dilation {st['dilation']})")
    return [(n, c, st["kernel"][0] * st["kernel"][1], oh * ow)], [dt[0]]


@op("unfold2d", lambda s, o, st: _ROWS, lambda ctx, g: fold2d(g, ctx.inputs[0].shape[2:], **_geo(ctx.static)),
    meta=_unfold_meta)
def _unfold2d(x, kernel=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), pad_value=0.0):
    xp = array_module(x)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    oh, ow = _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)
    padded = xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value) if ph or pw else x
    out = xp.empty((n, c, kh, kw, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i, j] = padded[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
    return out.reshape(n, c, kh * kw, oh * ow)


def _geo(st):
    return {k: st[k] for k in ("kernel", "stride", "padding", "dilation")}


@op("fold2d", lambda s, o, st: _ROWS, lambda ctx, g: unfold2d_raw(g, **_geo(ctx.static)),
    meta=lambda s, dt, st: ([(s[0][0], s[0][1]) + tuple(st["size"])], [dt[0]]))
def _fold2d(cols, size=(1, 1), kernel=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """The adjoint of unfold2d: each patch element added back where it came from."""
    xp = array_module(cols)
    n, c = cols.shape[:2]
    h, w = size
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    oh, ow = _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)
    patches = cols.reshape(n, c, kh, kw, oh, ow)
    out = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw] += patches[:, :, i, j]
    return out[:, :, ph:ph + h, pw:pw + w].copy()


def _check_geometry(name, st):
    """ValueError unless strides and dilations are >= 1 and paddings >= 0 (before any collective)."""
    if min(st["stride"]) < 1 or min(st.get("dilation", (1, 1))) < 1 or min(st["padding"]) < 0 or \
            ("groups" in st and st["groups"] < 1):
        raise ValueError(f"{name}: stride and dilation must be >= 1, padding >= 0 and groups >= 1, got "
                         f"{ {k: v for k, v in st.items() if k != 'kernel'} }")


def same_padding(name, padding, kernel, stride, dilation):
    """PyTorch's string paddings as (before, after) per dim: 'valid' none, 'same' an output as large
    as the input (stride 1 only), an odd total's extra one after."""
    if padding == "valid":
        return (0,) * len(kernel), (0,) * len(kernel)
    if padding != "same":  # ArgumentError: PyTorch's nn layers raise ValueError, its F.conv* RuntimeError
        raise ArgumentError(f"{name}: invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
    if any(s != 1 for s in stride):
        raise ArgumentError(f"{name}: padding='same' is not supported for strided convolutions")
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return tuple(t // 2 for t in totals), tuple(t - t // 2 for t in totals)


def _pair(v):
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)


def unfold2d_raw(input, kernel, stride=(1, 1), padding=(0, 0), dilation=(1, 1), pad_value=0.0):
    return apply("unfold2d", [input], {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation,
                                       "pad_value": float(pad_value)})


def unfold2d(input, kernel_size, stride=1, padding=0, dilation=1, pad_value=0.0):
    """[N, C, H, W] -> [N, C, kh * kw, L]: every kernel window (L of them, row-major), each
    channel apart."""
    (input,) = tensors(input)
    if input.ndim != 4:
        raise ValueError(f"unfold2d expects a [N, C, H, W] tensor, got shape {tuple(input.shape)}")
    st = {"kernel": _pair(kernel_size), "stride": _pair(stride), "padding": _pair(padding), "dilation": _pair(dilation)}
    _unfold_meta([tuple(input.shape)], [input.dtype], st)  # a kernel larger than the padded input raises here
    return unfold2d_raw(input, st["kernel"], st["stride"], st["padding"], st["dilation"], pad_value)


def fold2d(input, output_size, kernel=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """unfold2d's adjoint: [N, C, kh * kw, L] -> [N, C, H, W], overlapping elements summed."""
    (input,) = tensors(input)
    st = {"size": tuple(int(s) for s in output_size), "kernel": _pair(kernel), "stride": _pair(stride),
          "padding": _pair(padding), "dilation": _pair(dilation)}
    oh, ow = _geometry(*st["size"], st)
    want = (st["kernel"][0] * st["kernel"][1], oh * ow)
    if input.ndim != 4 or tuple(input.shape[2:]) != want:
        raise ValueError(f"fold2d: a [N, C, {want[0]}, {want[1]}] tensor of patches is needed for output size "
                         f"{st['size']} (kernel {st['kernel']}, stride {st['stride']}, padding {st['padding']}, "
                         f"dilation {st['dilation']}), got shape {tuple(input.shape)}")
    return apply("fold2d", [input], st)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's conv2d (cross-correlation): weight [O, C / groups, kh, kw]. One primitive: the
    patches of the whole batch unfolded channel-major, then one matrix product per group."""
    input, weight = tensors(input, weight)
    if input.ndim != 4 or weight.ndim != 4:
        raise ValueError(f"conv2d expects input [N, C, H, W] and weight [O, C / groups, kh, kw], got shapes "
                         f"{tuple(input.shape)} and {tuple(weight.shape)}")
    n, c, h, w = input.shape
    o, cg, kh, kw = weight.shape
    if isinstance(padding, str):  # 'same': p + extra on both sides, then the first `extra` rows dropped
        before, after = same_padding("conv2d", padding, (kh, kw), _pair(stride), _pair(dilation))
        out = conv2d(input, weight, bias, stride, after, dilation, groups)
        return out[:, :, after[0] - before[0]:, after[1] - before[1]:] if before != after else out
    if c != cg * groups or o % groups:
        raise ValueError(f"conv2d: input {tuple(input.shape)} [N, C, H, W] with weight {tuple(weight.shape)} and "
                         f"groups={groups} do not fit")
    st = {"stride": _pair(stride), "padding": _pair(padding), "dilation": _pair(dilation), "groups": int(groups)}
    _check_geometry("conv2d", st)
    _unfold_meta([tuple(input.shape)], [input.dtype], dict(st, kernel=(kh, kw)))  # a kernel too large raises here
    ins = [input, weight] if bias is None else tensors(input, weight, bias)
    return apply("conv2d", ins, st)


def _conv_rows(s, o, st):
    """x [N, C, H, W], w [O, C/g, kh, kw] (, b [O]) -> y [N, O, oh, ow].
    x S(0), w B (, b B) -> S(0)          images are independent
    x B, w S(0), b S(0) -> S(1)          output channels come from their filters (groups=1)
    x S(1), w S(1), b P -> P             a sum over input-channel pieces; b added once (groups=1)
    x P, w B, b P / x B, w P, b P -> P   bilinear"""
    has_b = len(s) == 3
    rows = [((B,) * len(s), (B,)), ((S(0), B) + ((B,) if has_b else ()), (S(0),)),
            ((P, B) + ((P,) if has_b else ()), (P,)), ((B, P) + ((P,) if has_b else ()), (P,))]
    if st["groups"] == 1:
        rows += [((B, S(0)) + ((S(0),) if has_b else ()), (S(1),)), ((S(1), S(1)) + ((P,) if has_b else ()), (P,))]
    return rows


def _conv_meta(s, dt, st):
    (n, c, h, w), (o, cg, kh, kw) = s[0], s[1]
    oh, ow = _geometry(h, w, dict(st, kernel=(kh, kw)))
    return [(n, o, oh, ow)], [rules.result_dtype(*dt)]


def _conv_backward(ctx, g):
    x, w = ctx.inputs[0], ctx.inputs[1]
    grads = apply("conv2d_backward", [g, x, w], dict(ctx.static, need_dx=x.requires_grad), multi=True)
    wanted = [t.requires_grad for t in ctx.inputs]
    return tuple(gr if want else None for gr, want in zip(grads, wanted))


@op("conv2d", _conv_rows, _conv_backward, meta=_conv_meta)
@products_in_float32
def _conv2d(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    xp = array_module(x)
    n, o, (_, cg, kh, kw) = x.shape[0], w.shape[0], w.shape
    st = {"stride": stride, "padding": padding, "dilation": dilation}
    piece, x = x, x.astype(np.result_type(x, w), copy=False)
    both = _image_major_conv(x, w, st) if groups == 1 and c_floats(x, w) and x.dtype == w.dtype else None
    if both is None:
        cols, oh, ow = _channel_major_patches(x, kh, kw, st)
        out = xp.matmul(w.reshape(groups, o // groups, cg * kh * kw), cols.reshape(groups, cg * kh * kw, -1))
        out = xp.ascontiguousarray(out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3))  # the one copy to [N, O, oh, ow]
    else:
        out, cols = both
    if x is piece and type(cols) is np.ndarray and _scope.get().grad:  # for backward's dw: no second im2col
        keep_patches(piece, (kh, kw, stride, padding, dilation), cols)
    if b is None:
        return out
    if b.dtype == out.dtype:
        out += b.reshape(1, o, 1, 1)
        return out
    return out + b.reshape(1, o, 1, 1)


def _conv_backward_rows(s, o, st):
    """g [N, O, oh, ow], x, w -> dx, dw, db.
    g S(0), x S(0), w B -> S(0), P, P       dw and db sum over images
    g S(1), x B, w S(0) -> P, S(0), S(0)    dx sums over output-channel pieces (groups=1)
    g B, x S(1), w S(1) -> S(1), S(1), B    each input-channel piece's own (groups=1)
    g P, x B, w B -> P, P, P                every gradient is linear in g"""
    rows = [((B, B, B), (B, B, B)), ((S(0), S(0), B), (S(0), P, P)), ((P, B, B), (P, P, P))]
    if st["groups"] == 1:
        rows += [((S(1), B, S(0)), (P, S(0), S(0))), ((B, S(1), S(1)), (S(1), S(1), B))]
    return rows


def _conv_backward_backward(ctx, ggx, ggw, ggb):
    """conv2d_backward is bilinear: dx = conv_x^T(g; w), dw = conv_w^T(g; x), db = sum g. Its
    derivatives: d/dg = conv2d(ggx, w, ggb) + conv2d(x, ggw); d/dx = conv_x^T(g; ggw); d/dw =
    conv_w^T(g; ggx): conv2d and conv2d_backward again (derivatives of any order)."""
    g, x, w = ctx.inputs
    st = {k: ctx.static[k] for k in ("stride", "padding", "dilation", "groups")}
    ggx = ggx if ctx.static.get("need_dx", True) else None
    terms = [apply("conv2d", [ggx, w] + ([ggb] if ggb is not None else []), st)] if ggx is not None else []
    terms += [apply("conv2d", [x, ggw], st)] if ggw is not None else []
    if ggb is not None and ggx is None:
        terms.append(ggb.reshape(1, -1, 1, 1).expand(*g.shape))
    dg = None
    for t in terms:
        dg = t if dg is None else dg + t
    dx = apply("conv2d_backward", [g, x, ggw], dict(st, need_dx=True), multi=True)[0] \
        if ggw is not None and x.requires_grad else None
    dw = apply("conv2d_backward", [g, ggx, w], dict(st, need_dx=False), multi=True)[1] \
        if ggx is not None and w.requires_grad else None
    return dg, dx, dw


@op("conv2d_backward", _conv_backward_rows, _conv_backward_backward,
    meta=lambda s, dt, st: ([tuple(s[1]), tuple(s[2]), (s[2][0],)], [dt[1], dt[2], dt[0]]))
@products_in_float32
def _conv2d_backward(g, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, need_dx=True):
    """dw = g . patches^T and db = the sum of g per output channel; dx: w^T . g folded back
    onto the (padded) input, each tap added where its window came from (zeros when not
    need_dx: the images of a first layer)."""
    xp = array_module(x)
    (n, c, h, wd), (o, cg, kh, kw) = x.shape, w.shape
    st = {"stride": stride, "padding": padding, "dilation": dilation}
    gm = xp.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(groups, o // groups, -1)  # [g, O/g, N * L]
    cols = take_patches(x, (kh, kw, stride, padding, dilation))
    if cols is None:
        cols, oh, ow = _channel_major_patches(x, kh, kw, st)
    else:  # the forward's, of this very piece
        oh, ow = g.shape[2], g.shape[3]
    k = cg * kh * kw
    # g . patches^T as written: the turned product (patches . g^T)^T is faster on some shapes and
    # gives the same bits under OpenBLAS's SkylakeX kernels but not its Haswell / Zen ones
    dw = xp.matmul(gm, cols.reshape(groups, k, -1).transpose(0, 2, 1)).reshape(w.shape).astype(w.dtype, copy=False)
    db = g.sum(axis=(0, 2, 3))
    if not need_dx:
        return xp.zeros(x.shape, x.dtype), dw, db.astype(g.dtype, copy=False)
    dcols = xp.matmul(w.reshape(groups, o // groups, k).transpose(0, 2, 1), gm).reshape(c, kh, kw, n, oh, ow)
    if c_floats(dcols) and dcols.dtype == x.dtype:
        dx = np.empty(x.shape, x.dtype)
        _native.col2im(dx, dcols, (kh, kw), stride, padding, dilation)
        return dx, dw, db.astype(g.dtype, copy=False)
    (ph, pw) = padding
    _, _, taps = _windows(h, wd, kh, kw, st)
    dx = xp.zeros((c, n, h + 2 * ph, wd + 2 * pw), dcols.dtype)
    for i, j, rs, cs in taps:
        dx[:, :, rs, cs] += dcols[:, i, j]
    dx = dx[:, :, ph:ph + h, pw:pw + wd].transpose(1, 0, 2, 3)
    return xp.ascontiguousarray(dx).astype(x.dtype, copy=False), dw, db.astype(g.dtype, copy=False)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """[N, C, L] convolution: conv2d over a height of 1."""
    (input, weight) = tensors(input, weight)
    out = conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, _pair(stride)[0]),
                 padding if isinstance(padding, str) else (0, _pair(padding)[0]), (1, _pair(dilation)[0]), groups)
    return out.squeeze(2)


def _pooled(input, kernel_size, stride, padding, pad_value, reduce):
    (input,) = tensors(input)
    n, c, h, w = input.shape
    k = _pair(kernel_size)
    s = _pair(stride if stride is not None else kernel_size)
    p = _pair(padding)
    cols = unfold2d(input, k, s, p, 1, pad_value)
    oh, ow = _out_size(h, k[0], s[0], p[0], 1), _out_size(w, k[1], s[1], p[1], 1)
    return reduce(cols).reshape(n, c, oh, ow)


def max_pool2d(input, kernel_size, stride=None, padding=0):
    """The largest value of each window (padding never wins); one primitive without padding (its
    gradient goes to the first largest element of each window, as PyTorch's), else the max over
    unfolded patches (ties share the gradient)."""
    (input,) = tensors(input)
    st = {"kernel": _pair(kernel_size), "stride": _pair(stride if stride is not None else kernel_size),
          "padding": _pair(padding), "dilation": (1, 1)}
    _check_geometry("max_pool2d", st)
    if st["padding"] != (0, 0) or input.ndim != 4 or not input.dtype.is_floating:
        return _pooled(input, kernel_size, stride, padding, -math.inf, lambda cols: cols.amax(2))
    _unfold_meta([tuple(input.shape)], [input.dtype], st)  # a window larger than the input raises here
    return apply("max_pool2d", [input], st, multi=True)[0]


def _max_pool_meta(s, dt, st):
    (n, c, h, w) = s[0]
    oh, ow = _geometry(h, w, st)
    return [(n, c, oh, ow), (n, c, oh, ow)], [dt[0], np.dtype(np.int64)]


def _max_pool_backward(ctx, g, _=None):
    return (apply("max_pool2d_backward", [g, ctx.outputs[1], ctx.inputs[0]], ctx.static),)


@op("max_pool2d", lambda s, o, st: [((B,), (B, B)), ((S(0),), (S(0), S(0))), ((S(1),), (S(1), S(1)))],
    _max_pool_backward, meta=_max_pool_meta)
def _max_pool2d(x, kernel=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """(the max of each window, the tap it came from: the first largest), images and channels
    independent (their splits pass through)."""
    xp = array_module(x)
    n, c = x.shape[:2]
    if c_floats(x) and dilation == (1, 1) and padding == (0, 0):
        oh, ow = _geometry(x.shape[2], x.shape[3], {"kernel": kernel, "stride": stride, "padding": padding,
                                                    "dilation": dilation})
        out, tap = np.empty((n, c, oh, ow), x.dtype), np.empty((n, c, oh, ow), np.int64)
        _native.max_pool(out, tap, np.ascontiguousarray(x), kernel, stride)
        return out, tap
    kk = kernel[0] * kernel[1]
    cols, oh, ow = _channel_major_patches(x, kernel[0], kernel[1], {"stride": stride, "padding": padding,
                                                                    "dilation": dilation})
    cols = cols.reshape(c, kk, n * oh * ow)
    tap = cols.argmax(axis=1)
    out = xp.take_along_axis(cols, tap[:, None, :], axis=1)[:, 0]
    return (xp.ascontiguousarray(out.reshape(c, n, oh, ow).transpose(1, 0, 2, 3)),
            xp.ascontiguousarray(tap.reshape(c, n, oh, ow).transpose(1, 0, 2, 3)))


def _max_pool_backward_backward(ctx, ggx):
    """max_pool2d_backward is linear in g (each window's g goes to its max's tap): d/dg of
    <ggx, dx> reads ggx at each window's tap (unfold2d, then gather); tap and x get none."""
    g, tap, _ = ctx.inputs
    n, c, oh, ow = g.shape
    cols = unfold2d_raw(ggx, **_geo(ctx.static))  # [N, C, kh * kw, oh * ow]
    return cols.gather(2, tap.reshape(n, c, 1, oh * ow)).reshape(n, c, oh, ow), None, None


@op("max_pool2d_backward", lambda s, o, st: [((B, B, B), (B,)), ((S(0), S(0), S(0)), (S(0),)),
                                             ((S(1), S(1), S(1)), (S(1),)), ((P, B, B), (P,))],
    _max_pool_backward_backward, meta=lambda s, dt, st: ([tuple(s[2])], [dt[0]]))
def _max_pool2d_backward(g, tap, x, kernel=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """Each window's gradient to the tap its max came from, folded back onto x's shape (overlapping
    windows add up); linear in g."""
    xp = array_module(g)
    n, c, oh, ow = g.shape
    if c_floats(g, x) and dilation == (1, 1) and padding == (0, 0) and type(tap) is np.ndarray:
        dx = np.empty(x.shape, g.dtype)
        _native.max_pool_backward(dx, np.ascontiguousarray(g), np.ascontiguousarray(tap, np.int64), kernel, stride)
        return dx
    kk = kernel[0] * kernel[1]
    dcols = xp.zeros((c, kk, n * oh * ow), g.dtype)
    xp.put_along_axis(dcols, xp.ascontiguousarray(tap.transpose(1, 0, 2, 3)).reshape(c, 1, -1),
                      xp.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(c, 1, -1), axis=1)
    dcols = dcols.reshape(c, kernel[0], kernel[1], n, oh, ow)
    if c_floats(dcols):
        dx = np.empty(x.shape, g.dtype)
        _native.col2im(dx, dcols, kernel, stride, padding, dilation)
        return dx
    cols = dcols.transpose(3, 0, 1, 2, 4, 5).reshape(n, c, kk, oh * ow)
    return _fold2d(cols, x.shape[2:], kernel, stride, padding, dilation)


def avg_pool2d(input, kernel_size, stride=None, padding=0):
    """The mean of each window, padding counted as zeros (PyTorch's count_include_pad=True)."""
    return _pooled(input, kernel_size, stride, padding, 0.0, lambda cols: cols.mean(2))


def adaptive_avg_pool2d(input, output_size):
    """Means over the bins PyTorch's adaptive pooling uses: bin i of n over L is
    [floor(i L / n), ceil((i + 1) L / n))."""
    (input,) = tensors(input)
    oh, ow = _pair(output_size)
    h, w = input.shape[2:]
    if (oh, ow) == (1, 1):
        return input.mean((2, 3), keepdim=True)
    if h % oh == 0 and w % ow == 0:
        return avg_pool2d(input, (h // oh, w // ow))
    rows = []
    for i in range(oh):
        r0, r1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        cells = [input[:, :, r0:r1, (j * w) // ow:-((-(j + 1) * w) // ow)].mean((2, 3)) for j in range(ow)]
        rows.append(_stack(cells, 2))
    return _stack(rows, 2)


def _stack(values, dim):
    from .concat_split import stack
    return stack(values, dim)
