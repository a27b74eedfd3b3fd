"""N-d pooling as separable taps: avg_pool and max_pool over 1, 2 or 3 trailing dims.

A box mean is the product of per-dim means (its divisor is a product of per-dim counts, with or
without padding), and a box max the max of per-dim maxima, so each dim is one index_select per
kernel tap (resize.py's taps): untouched dims (batch, channels) keep their splits, and gradients
come from index_select and maximum. The 2-D max pool without padding, dilation or ceil_mode keeps
conv.py's C++ primitive."""
import math

import numpy as np

from ._front import as_tensor, tensors
from .elementwise import maximum, where
from .resize import _resample, adaptive_avg_pool, adaptive_bins, adaptive_dims  # noqa: F401 - re-exported for nn
from .gather_scatter import index_select
from . import conv


def _tuple(v, n, name):
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise ValueError(f"{name} must be an int or {n} ints, got {v}")
    return v


def _out_len(n, k, s, p, d, ceil_mode):
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _geometry(input, spatial, kernel_size, stride, padding, dilation, ceil_mode, name):
    (input,) = tensors(input)
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{name}: expected a {spatial + 1}-D or {spatial + 2}-D input, got shape {tuple(input.shape)}")
    k = _tuple(kernel_size, spatial, "kernel_size")
    s = _tuple(stride if stride is not None and stride != [] else kernel_size, spatial, "stride")
    p, d = _tuple(padding, spatial, "padding"), _tuple(dilation, spatial, "dilation")
    if min(s) < 1 or min(d) < 1 or min(k) < 1 or min(p) < 0:
        raise ValueError(f"{name}: kernel, stride and dilation must be >= 1 and padding >= 0, got {k}, {s}, {d}, {p}")
    if any(2 * pi > ki for pi, ki in zip(p, k)):
        raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, but got pad={p}, "
                           f"kernel_size={k}")
    dims = [input.ndim - spatial + i for i in range(spatial)]
    outs = [_out_len(input.shape[dim], k[i], s[i], p[i], d[i], ceil_mode) for i, dim in enumerate(dims)]
    if min(outs) <= 0:
        raise RuntimeError(f"{name}: output size {tuple(outs)} is too small for input {tuple(input.shape)}")
    return input, dims, outs, k, s, p, d


def _taps(n, n_out, k, s, p, d):
    """(index clipped into [0, n), whether it is inside, start) of each of the k taps."""
    start = np.arange(n_out) * s - p
    return [(np.clip(start + j * d, 0, n - 1), (start + j * d >= 0) & (start + j * d < n), start) for j in range(k)]


def avg_pool(input, spatial, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    """PyTorch's avg_pool{1,2,3}d: each window's sum over its divisor (the window clipped to the
    padded input with count_include_pad, to the input without; or divisor_override)."""
    x, dims, outs, k, s, p, _ = _geometry(input, spatial, kernel_size, stride, padding, 1, ceil_mode,
                                          f"avg_pool{spatial}d")
    for i, dim in enumerate(dims):
        n = x.shape[dim]
        taps = _taps(n, outs[i], k[i], s[i], p[i], 1)
        start = taps[0][2]
        if divisor_override:
            count = np.ones(outs[i])
        elif count_include_pad:
            count = np.minimum(start + k[i], n + p[i]) - start
        else:
            count = np.minimum(start + k[i], n) - np.maximum(start, 0)
        x = _resample(x, dim, [(index, inside / np.maximum(count, 1)) for index, inside, _ in taps])
    return x / float(divisor_override) if divisor_override else x


def max_pool(input, spatial, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False):
    """PyTorch's max_pool{1,2,3}d (padding never wins); the gradient goes to the largest element."""
    if return_indices:
        raise NotImplementedError(f"max_pool{spatial}d: return_indices=True is not supported")
    x, dims, outs, k, s, p, d = _geometry(input, spatial, kernel_size, stride, padding, dilation, ceil_mode,
                                          f"max_pool{spatial}d")
    if spatial == 2 and x.ndim == 4 and max(p) == 0 and max(d) == 1 and not ceil_mode and x.dtype.is_floating:
        return conv.max_pool2d(x, k, s, 0)
    for i, dim in enumerate(dims):
        out = None
        for index, inside, _ in _taps(x.shape[dim], outs[i], k[i], s[i], p[i], d[i]):
            picked = index_select(x, dim, as_tensor(index.astype(np.int64), x))
            if not inside.all():
                shape = [1] * x.ndim
                shape[dim] = len(index)
                picked = where(as_tensor(inside.reshape(shape), x), picked, -math.inf)
            out = picked if out is None else maximum(out, picked)
        x = out
    return x


def adaptive_max_pool(input, output_size, spatial):
    """Adaptive max pooling over the last `spatial` dims (bins as adaptive_taps)."""
    (input,) = tensors(input)
    x = input
    for dim, n_in, n_out in adaptive_dims(input, output_size, spatial):
        starts, ends = adaptive_bins(n_in, n_out)
        out = None
        for j in range(int((ends - starts).max(initial=1))):
            index = np.minimum(starts + j, ends - 1)  # a shorter bin repeats its last element
            picked = index_select(x, dim, as_tensor(index.astype(np.int64), x))
            out = picked if out is None else maximum(out, picked)
        x = out
    return x


__all__ = ["adaptive_avg_pool", "adaptive_max_pool", "avg_pool", "max_pool"]
