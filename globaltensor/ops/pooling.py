"""N-d pooling as separable taps: avg_pool and max_pool over 1, 2 or 3 trailing dims.

A box mean is the product of per-dim means (its divisor is a product of per-dim counts, with or
without padding), and a box max the max of per-dim maxima, so each dim is one index_select per
kernel tap (resize.py's taps): untouched dims (batch, channels) keep their splits, and gradients
come from index_select and maximum. The 2-D max pool without padding, dilation or ceil_mode keeps
conv.py's C++ primitive."""
import math

import numpy as np

from ._front import constant, tensors
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
    """PyTorch's max_pool{1,2,3}d (padding never wins); the gradient goes to the largest element.
    return_indices: also each maximum's flat position in its input plane (PyTorch's indices, for
    max_unpool), carried through the separable taps dim by dim (ties: the first along each dim)."""
    x, dims, outs, k, s, p, d = _geometry(input, spatial, kernel_size, stride, padding, dilation, ceil_mode,
                                          f"max_pool{spatial}d")
    if (spatial == 2 and x.ndim == 4 and max(p) == 0 and max(d) == 1 and not ceil_mode and x.dtype.is_floating
            and not return_indices):
        return conv.max_pool2d(x, k, s, 0)
    positions = []  # per dim pooled so far: the input index along it of each output's maximum
    for i, dim in enumerate(dims):
        out = out_positions = None
        for index, inside, _ in _taps(x.shape[dim], outs[i], k[i], s[i], p[i], d[i]):
            at = constant(index.astype(np.int64), x)
            picked = index_select(x, dim, at)
            if not inside.all():
                shape = [1] * x.ndim
                shape[dim] = len(index)
                picked = where(constant(inside.reshape(shape), x), picked, -math.inf)
            if not return_indices:
                out = picked if out is None else maximum(out, picked)
                continue
            here = [index_select(q, dim, at) for q in positions] + [_along(index, dim, picked)]
            if out is None:
                out, out_positions = picked, here
                continue
            wins = (picked > out) | (picked.isnan() & ~out.isnan())
            out = where(wins, picked, out)
            out_positions = [where(wins, a, b) for a, b in zip(here, out_positions)]
        x, positions = out, out_positions
    if not return_indices:
        return x
    flat = None
    for q, dim in zip(positions, dims):
        flat = q if flat is None else flat * input.shape[dim] + q
    return x, flat


def _along(index, dim, like):
    """The taps' input indices as an int64 tensor varying along dim, broadcast to like's shape."""
    shape = [1] * like.ndim
    shape[dim] = len(index)
    return constant(index.astype(np.int64).reshape(shape), like).expand(*like.shape)


def max_unpool(input, indices, spatial, kernel_size, stride=None, padding=0, output_size=None):
    """PyTorch's max_unpool{1,2,3}d: zeros of the unpooled size with each value written at its flat
    index in its plane (scatter along the flattened spatial dims; its gradient gathers)."""
    (input, indices) = tensors(input, indices)
    name = f"max_unpool{spatial}d"
    if input.ndim not in (spatial + 1, spatial + 2) or tuple(indices.shape) != tuple(input.shape):
        raise ValueError(f"{name}: expected a {spatial + 1}-D or {spatial + 2}-D input and indices of its shape, got "
                         f"{tuple(input.shape)} and {tuple(indices.shape)}")
    k = _tuple(kernel_size, spatial, "kernel_size")
    st = _tuple(stride if stride is not None else kernel_size, spatial, "stride")
    pad = _tuple(padding, spatial, "padding")
    lead = tuple(input.shape[:input.ndim - spatial])
    size = [(n - 1) * a - 2 * b + c for n, a, b, c in zip(input.shape[-spatial:], st, pad, k)]
    if output_size is not None:
        size = [int(n) for n in tuple(output_size)[-spatial:]]
    plane = math.prod(size)
    flat_in = input.reshape(*lead, -1)
    flat_at = indices.reshape(*lead, -1)
    out = input.new_zeros(lead + (plane,))
    return out.scatter(len(lead), flat_at, flat_in).reshape(*lead, *size)


def adaptive_max_pool(input, output_size, spatial):
    """Adaptive max pooling over the last `spatial` dims (bins as adaptive_taps)."""
    (input,) = tensors(input)
    x = input
    for dim, n_in, n_out in adaptive_dims(input, output_size, spatial):
        starts, ends = adaptive_bins(n_in, n_out)
        out = None
        for j in range(int((ends - starts).max(initial=1))):
            index = np.minimum(starts + j, ends - 1)  # a shorter bin repeats its last element
            picked = index_select(x, dim, constant(index.astype(np.int64), x))
            out = picked if out is None else maximum(out, picked)
        x = out
    return x


__all__ = ["adaptive_avg_pool", "adaptive_max_pool", "avg_pool", "max_pool", "max_unpool"]
