"""The patches a convolution multiplies (im2col on the CPU in C++, slices elsewhere), channel-major
over the whole batch: one GEMM, or one per image with no output transpose; kept for backward."""
import collections
import weakref

import numpy as np

from .. import _native
from ._front import c_floats
from ..backends.devices import array_module


def _out_size(n, k, stride, pad, dil):
    return (n + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _geometry(h, w, st):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = st["kernel"], st["stride"], st["padding"], st["dilation"]
    return _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)


def _windows(h, w, kh, kw, st):
    """(oh, ow, [(i, j, rows slice, cols slice)]) of each kernel tap over the padded input."""
    (sh, sw), (dh, dw) = st["stride"], st["dilation"]
    oh, ow = _geometry(h, w, dict(st, kernel=(kh, kw)))
    return oh, ow, [(i, j, slice(i * dh, i * dh + sh * (oh - 1) + 1, sh), slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))
                    for i in range(kh) for j in range(kw)]


def _channel_major_patches(x, kh, kw, st):
    """[C * kh * kw, N * oh * ow]: every window of the batch, a column each (im2col, channel-major,
    so one matrix product covers the whole batch); one C++ pass for float32/float64 on the CPU."""
    xp = array_module(x)
    n, c, h, w = x.shape
    if c_floats(x):
        oh, ow = _geometry(h, w, dict(st, kernel=(kh, kw)))
        cols = np.empty((c * kh * kw, n * oh * ow), x.dtype)
        _native.im2col(cols, np.ascontiguousarray(x), (kh, kw), st["stride"], st["padding"], st["dilation"])
        return cols, oh, ow
    (ph, pw) = st["padding"]
    oh, ow, taps = _windows(h, w, kh, kw, st)
    if ph or pw:
        padded = xp.zeros((c, n, h + 2 * ph, w + 2 * pw), x.dtype)
        padded[:, :, ph:ph + h, pw:pw + w] = x.transpose(1, 0, 2, 3)
    else:
        padded = xp.ascontiguousarray(x.transpose(1, 0, 2, 3))
    cols = xp.empty((c, kh, kw, n, oh, ow), x.dtype)
    for i, j, rs, cs in taps:
        cols[:, i, j] = padded[:, :, rs, cs]
    return cols.reshape(c * kh * kw, n * oh * ow), oh, ow


def _image_major_conv(x, w, st):
    """([N, O, oh, ow], the batch's patches) as one GEMM per image, w [O, K] . its columns of the
    channel-major patches [K, N * oh * ow] read in place (the same product, so the same bits, as
    on a contiguous copy of them): no transpose of the output (the one-GEMM path's copy, most of
    a thin layer's time). Each output is the same dot product over K: the same bits where an
    image's windows fill whole GEMM blocks (a multiple of 64), the last bits may differ in
    OpenBLAS's tail blocks otherwise. None where the images are too small for a GEMM each (fewer
    than 64 windows)."""
    n, (o, c, kh, kw) = x.shape[0], w.shape
    oh, ow = _geometry(x.shape[2], x.shape[3], dict(st, kernel=(kh, kw)))
    if oh * ow < 64:
        return None
    cols, _, _ = _channel_major_patches(x, kh, kw, st)
    k = c * kh * kw
    out = np.matmul(w.reshape(o, k), cols.reshape(k, n, oh * ow).transpose(1, 0, 2))
    return out.reshape(n, o, oh, ow), cols


KEPT_BYTES = 64 << 20  # the most patch memory kept from forwards for their backwards
_kept = collections.OrderedDict()  # id(input piece) -> (weakref to it, geometry, patches), oldest first


def keep_patches(x, geometry, cols):
    """Keep a forward's patches of the piece x for its backward's dw (take_patches): dropped when x
    goes, and the oldest beyond KEPT_BYTES in all; a backward that finds none computes them again."""
    if cols.nbytes > KEPT_BYTES:
        return
    key = id(x)

    def gone(ref, key=key):  # x freed: its patches with it (not a newer entry at its address)
        entry = _kept.get(key)
        if entry is not None and entry[0] is ref:
            del _kept[key]
    _kept.pop(key, None)
    _kept[key] = (weakref.ref(x, gone), geometry, cols)
    while sum(entry[2].nbytes for entry in list(_kept.values())) > KEPT_BYTES:
        _kept.popitem(last=False)


def take_patches(x, geometry):
    """The patches a forward kept of this very piece (not of another array at its address) with
    this geometry, handed over once; else None."""
    entry = _kept.pop(id(x), None)
    if entry is None or entry[0]() is not x or entry[1] != geometry:
        return None
    return entry[2]
