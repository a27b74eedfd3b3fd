"""Convolution and pooling through unfolded patches: unfold2d (im2col) and its adjoint fold2d are
the primitives (rows: batch or channels split stay split, P -> P); conv2d is a matmul of the
patches (cuBLAS on GPUs), pooling a max or mean over them."""
import math

import numpy as np

from . import rules
from ._front import apply, tensors
from .registry import op
from ..backends.devices import array_module

B, P, S = rules.B, rules.P, rules.split

# [N, C, H, W] -> [N, C, kh * kw, L]: batch and channel dims pass through, so their splits do
_ROWS = [((B,), (B,)), ((S(0),), (S(0),)), ((S(1),), (S(1),)), ((P,), (P,))]


def _out_size(n, k, stride, pad, dil):
    return (n + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _geometry(h, w, st):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = st["kernel"], st["stride"], st["padding"], st["dilation"]
    return _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)


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
    """PyTorch's conv2d (cross-correlation): weight [O, C / groups, kh, kw]; the patches of
    unfold2d times the weight matrix, per group."""
    input, weight = tensors(input, weight)
    n, c, h, w = input.shape
    o, cg, kh, kw = weight.shape
    if c != cg * groups or o % groups:
        raise ValueError(f"conv2d: input has {c} channels, weight {tuple(weight.shape)} with groups={groups}")
    oh, ow = (_out_size(h, kh, s, p, d) for h, kh, s, p, d in
              zip((h, w), (kh, kw), _pair(stride), _pair(padding), _pair(dilation)))
    cols = unfold2d(input, (kh, kw), stride, padding, dilation)  # [N, C, kk, L]
    cols = cols.reshape(n, groups, cg * kh * kw, oh * ow)
    wmat = weight.reshape(groups, o // groups, cg * kh * kw)
    out = (wmat @ cols).reshape(n, o, oh, ow)  # [N, g, O/g, L]
    return out if bias is None else out + bias.reshape(1, o, 1, 1)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """[N, C, L] convolution: conv2d over a height of 1."""
    (input, weight) = tensors(input, weight)
    out = conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, _pair(stride)[0]), (0, _pair(padding)[0]),
                 (1, _pair(dilation)[0]), groups)
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
    """The largest value of each window (padding never wins)."""
    return _pooled(input, kernel_size, stride, padding, -math.inf, lambda cols: cols.amax(2))


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
    from .shape import stack
    return stack(values, dim)
