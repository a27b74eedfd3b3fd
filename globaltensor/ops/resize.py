"""Padding and resizing along dims as index_select taps: pad, interpolate, the separable pools.

A resize along one dim is a sum of taps, index_select(x, dim, index_k) * weight_k: nearest takes
one tap, linear two, cubic four, an adaptive mean up to a bin's length. index_select leaves every
other dim alone, so a split on an untouched dim stays split and gradients come from its backward."""
import math

import numpy as np

from ._front import constant, constant_full, tensors
from .concat_split import concat
from .gather_scatter import index_select
from .adaptive_mean import adaptive_mean

_PAD_MODES = {"constant": None, "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _resample(x, dim, taps):
    """sum over taps (index [out], weight [out] or None) of x's slices along dim, weighted."""
    out = None
    for index, weight in taps:
        picked = index_select(x, dim, constant(np.ascontiguousarray(index, np.int64), x))
        if weight is not None:
            shape = [1] * x.ndim
            shape[dim] = len(index)
            picked = picked * constant(np.asarray(weight, x.dtype.np).reshape(shape), x)
        out = picked if out is None else out + picked
    return out


def _pad_checks(input, pad, mode):
    if len(pad) > 2 * input.ndim:  # OneFlow's order: the size first, then the parity
        raise RuntimeError(f"Pad size should less than or equal to input axes * 2. (pad {tuple(pad)} for a "
                           f"{input.ndim}-D input)")
    if len(pad) % 2:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}")
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Pad mode is {mode}, but only constant, reflect and replicate are valid.")
    for i in range(len(pad) // 2):
        dim, (left, right) = input.ndim - 1 - i, pad[2 * i:2 * i + 2]
        size = input.shape[dim]
        if mode == "reflect" and (left >= size or right >= size):
            raise RuntimeError(f"Padding size should be less than the corresponding input dimension, but got: "
                               f"padding ({left}, {right}) at dimension {dim} of input {tuple(input.shape)}")
        if mode != "constant" and (left < 0 or right < 0 or size == 0):
            raise RuntimeError(f"pad: {mode} padding needs non-negative pads of a non-empty dim, got ({left}, "
                               f"{right}) at dimension {dim} of input {tuple(input.shape)}")
        if mode == "circular" and (left > size or right > size):
            raise RuntimeError(f"pad: circular padding ({left}, {right}) is larger than dimension {dim} of input "
                               f"{tuple(input.shape)}")


def pad(input, pad, mode="constant", value=0.0):
    """PyTorch's F.pad: pad = (left, right) pairs from the last dim backwards; modes constant
    (negative pads crop), reflect, replicate and circular."""
    (input,) = tensors(input)
    pad = [int(p) for p in pad]
    _pad_checks(input, pad, mode)
    x = input
    for i in range(len(pad) // 2):
        dim, (left, right) = input.ndim - 1 - i, pad[2 * i:2 * i + 2]
        if left == 0 and right == 0:
            continue
        size = x.shape[dim]
        if mode != "constant":
            x = index_select(x, dim, constant(np.pad(np.arange(size), (left, right), _PAD_MODES[mode]), x))
            continue
        if left < 0 or right < 0:
            x = x.narrow(dim, max(-left, 0), size - max(-left, 0) - max(-right, 0))
        blocks = []
        for width in (left, right):
            shape = list(x.shape)
            shape[dim] = max(width, 0)
            blocks.append(constant_full(shape, value, x) if width > 0 else None)
        parts = [b for b in (blocks[0], x, blocks[1]) if b is not None]
        x = concat(parts, dim) if len(parts) > 1 else x
    return x


def _linear_taps(n_in, n_out, scale, align_corners):
    """PyTorch's area_pixel_compute_source_index for (bi/tri)linear: two taps an output."""
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        src = np.maximum((dst + 0.5) * (1.0 / scale if scale else n_in / n_out) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    return [(i0, 1 - lam), (i1, lam)]


def _cubic_taps(n_in, n_out, scale, align_corners, a=-0.75):
    """PyTorch's bicubic (Keys' kernel, A = -0.75), borders clamped: four taps an output."""
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        src = (dst + 0.5) * (1.0 / scale if scale else n_in / n_out) - 0.5
    base = np.floor(src)
    t = src - base
    weights = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
               ((a + 2) * t - (a + 3)) * t * t + 1,
               ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
               ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]
    return [(np.clip(base.astype(np.int64) - 1 + k, 0, n_in - 1), weights[k]) for k in range(4)]


def _nearest_taps(n_in, n_out, scale, exact):
    dst = np.arange(n_out, dtype=np.float64)
    step = 1.0 / scale if scale else n_in / n_out
    src = np.floor((dst + 0.5) * step) if exact else np.floor(dst * step)
    return [(np.minimum(src.astype(np.int64), n_in - 1), None)]


def adaptive_bins(n_in, n_out):
    """PyTorch's adaptive pooling bins (starts, ends): bin i covers [floor(i n / m), ceil((i + 1) n / m))."""
    return (np.arange(n_out) * n_in) // n_out, -((-(np.arange(n_out) + 1) * n_in) // n_out)


def adaptive_dims(input, output_size, spatial):
    """(dim, n_in, n_out) for each of the last `spatial` dims of an adaptive pooling (None keeps a dim)."""
    sizes = [output_size] * spatial if isinstance(output_size, (int, np.integer)) or output_size is None \
        else list(output_size)
    for i, n_out in enumerate(sizes):
        dim = input.ndim - spatial + i
        yield dim, input.shape[dim], input.shape[dim] if n_out is None else int(n_out)


def adaptive_taps(n_in, n_out):
    """The means of PyTorch's adaptive pooling over its bins (adaptive_bins)."""
    starts, ends = adaptive_bins(n_in, n_out)
    longest = int((ends - starts).max(initial=1))
    return [(np.minimum(starts + k, n_in - 1), np.where(starts + k < ends, 1.0 / (ends - starts), 0.0))
            for k in range(longest)]


_MODE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _out_sizes(input, size, scale_factor):
    spatial = input.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        sizes = [int(size)] * spatial if isinstance(size, (int, np.integer)) else [int(s) for s in size]
        return sizes, [None] * spatial
    scales = [float(scale_factor)] * spatial if isinstance(scale_factor, (int, float)) else \
        [float(s) for s in scale_factor]
    if len(scales) != spatial:
        raise ValueError(f"interpolate: {len(scales)} scale factors for {spatial} spatial dims")
    return [int(math.floor(input.shape[2 + i] * s)) for i, s in enumerate(scales)], scales


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """PyTorch's F.interpolate on [N, C, *spatial]: nearest, nearest-exact, linear, bilinear,
    bicubic, trilinear and area, each a separable resize of the spatial dims."""
    (input,) = tensors(input)
    if input.ndim < 3 or input.ndim > 5:
        raise ValueError(f"interpolate: expected a 3-D, 4-D or 5-D input, got shape {tuple(input.shape)}")
    if mode in _MODE_DIMS and _MODE_DIMS[mode] != input.ndim - 2:
        raise NotImplementedError(f"interpolate: mode {mode!r} needs a {_MODE_DIMS[mode] + 2}-D input, got "
                                  f"{input.ndim}-D")
    if mode not in _MODE_DIMS and mode not in ("nearest", "nearest-exact", "area"):
        raise NotImplementedError(f"interpolate: unknown mode {mode!r}")
    if align_corners is not None and mode not in _MODE_DIMS:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    sizes, scales = _out_sizes(input, size, scale_factor)
    if recompute_scale_factor:
        scales = [None] * len(scales)
    x = input
    for i, (n_out, scale) in enumerate(zip(sizes, scales)):
        n_in, dim = input.shape[2 + i], 2 + i
        if mode in ("nearest", "nearest-exact"):
            taps = _nearest_taps(n_in, n_out, scale, mode == "nearest-exact")
        elif mode == "area":
            taps = adaptive_taps(n_in, n_out)
        elif mode == "bicubic":
            taps = _cubic_taps(n_in, n_out, scale, bool(align_corners))
        else:
            taps = _linear_taps(n_in, n_out, scale, bool(align_corners))
        x = _resample(x, dim, taps)
    return x


def adaptive_avg_pool(input, output_size, spatial):
    """Adaptive mean pooling over the last `spatial` dims (a None size keeps that dim)."""
    (input,) = tensors(input)
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"adaptive_avg_pool{spatial}d: expected a {spatial + 1}-D or {spatial + 2}-D input, got "
                         f"shape {tuple(input.shape)}")
    x = input
    for dim, n_in, n_out in adaptive_dims(input, output_size, spatial):
        if n_out != n_in and n_out and n_in % n_out == 0 and x.dtype.np.kind == "f":  # even bins: one op
            x = adaptive_mean(x, dim, n_out)
        elif n_out != n_in:
            x = _resample(x, dim, adaptive_taps(n_in, n_out))
    return x
