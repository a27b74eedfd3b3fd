"""Bilinear sampling as a composite of gathers: grid_sample, affine_grid, deform_conv2d, roi_align.

Every op here is written with registered ops (gather, index_select, einsum, element-wise), so
SBP rows and gradients come from them: images split on the batch stay split, and the gradient
reaches the input through gather's scatter-add and the sample positions through the weights."""
import numpy as np

from ._front import constant, tensors
from .concat_split import concat
from .conv import _pair
from .gather_scatter import gather, index_select
from .einsum import einsum


def bilinear(x, py, px):
    """x [N, C, H, W] sampled at float pixel positions py, px [N, M] -> [N, C, M]: the four
    neighbours weighted by distance, a neighbour outside the image counting as zero."""
    n, c, h, w = x.shape
    m = py.shape[1]
    flat = x.reshape(n, c, h * w)
    y0, x0 = py.detach().floor(), px.detach().floor()
    ly, lx = py - y0, px - x0
    out = None
    for yi, wy in ((y0, 1 - ly), (y0 + 1, ly)):
        for xi, wx in ((x0, 1 - lx), (x0 + 1, lx)):
            inside = ((yi >= 0) & (yi <= h - 1) & (xi >= 0) & (xi <= w - 1)).to(x.dtype)
            index = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).long()
            picked = gather(flat, 2, index.unsqueeze(1).expand(n, c, m))
            term = picked * (wy * wx * inside).unsqueeze(1)
            out = term if out is None else out + term
    return out


def _nearest(x, py, px):
    """x [N, C, H, W] at the nearest pixel (half to even, as PyTorch's nearbyint) -> [N, C, M]."""
    n, c, h, w = x.shape
    yi, xi = py.detach().round(), px.detach().round()
    inside = ((yi >= 0) & (yi <= h - 1) & (xi >= 0) & (xi <= w - 1)).to(x.dtype)
    index = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).long()
    picked = gather(x.reshape(n, c, h * w), 2, index.unsqueeze(1).expand(n, c, py.shape[1]))
    return picked * inside.unsqueeze(1)


def _reflect(coord, twice_low, twice_high):
    """PyTorch's reflect_coordinates: coord folded into [low, high] by mirror images."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    dist = (coord - low).abs()
    flips = (dist.detach() / span).floor()
    extra = dist - flips * span
    even = (flips - (flips / 2).floor() * 2) == 0
    return extra.where(even, span - extra) + low


def _source(coord, size, padding_mode, align_corners):
    """A grid coordinate in [-1, 1] as a pixel position of an axis of `size` (PyTorch's
    grid_sampler_compute_source_index)."""
    pos = (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2
    if padding_mode == "border":
        return pos.clamp(0, size - 1)
    if padding_mode == "reflection":
        pos = _reflect(pos, 0, 2 * (size - 1)) if align_corners else _reflect(pos, -1, 2 * size - 1)
        return pos.clamp(0, size - 1)
    return pos


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """PyTorch's grid_sample on 4-D input: output[n, :, i, j] samples input[n] at grid[n, i, j] =
    (x, y) in [-1, 1]; modes bilinear and nearest, padding zeros, border and reflection."""
    input, grid = tensors(input, grid)
    if input.ndim == 4:
        if grid.ndim != 4:
            raise RuntimeError("Grid and input MUST have same dimention")
        if grid.shape[3] != 2:
            raise RuntimeError(f"Grid shape MUST (N, H_out, W_out, 2), got {tuple(grid.shape)}")
    elif input.ndim == 5:
        if grid.ndim != 5:
            raise RuntimeError("Grid and input MUST have same dimention")
        if grid.shape[4] != 3:
            raise RuntimeError(f"Grid shape MUST (N, H_out, W_out, 3), got {tuple(grid.shape)}")
        raise NotImplementedError("grid_sample: 5-D (volumetric) input is not supported yet; 4-D input is")
    else:
        raise RuntimeError(f"MUST be 4D or 5D input, got shape {tuple(input.shape)}")
    if mode not in ("bilinear", "nearest") or padding_mode not in ("zeros", "border", "reflection"):
        raise NotImplementedError(f"grid_sample: mode {mode!r} with padding_mode {padding_mode!r}: modes bilinear "
                                  f"and nearest, padding zeros, border and reflection are supported")
    if grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sample: grid and input must have the same batch size, got {grid.shape[0]} and "
                           f"{input.shape[0]}")
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    flat = grid.reshape(n, ho * wo, 2)
    px = _source(flat[:, :, 0], w, padding_mode, align_corners)
    py = _source(flat[:, :, 1], h, padding_mode, align_corners)
    sampled = bilinear(input, py, px) if mode == "bilinear" else _nearest(input, py, px)
    return sampled.reshape(n, c, ho, wo)


def _linspace_from_neg_one(steps, align_corners):
    if steps <= 1:
        return np.zeros(max(steps, 0))
    line = np.linspace(-1.0, 1.0, steps)
    return line if align_corners else line * (steps - 1) / steps


def affine_grid(theta, size, align_corners=False):
    """PyTorch's affine_grid: the [N, H, W, 2] (or [N, D, H, W, 3]) grid of theta [N, 2, 3] (or
    [N, 3, 4]) applied to the base grid of `size` (x fastest, then y, then z)."""
    (theta,) = tensors(theta)
    size = [int(s) for s in size]
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
            raise RuntimeError(f"affine_grid: expected theta of shape [N, 2, 3] for 4-D size, got {tuple(theta.shape)}")
        n, _, h, w = size
        ys, xs = np.meshgrid(_linspace_from_neg_one(h, align_corners), _linspace_from_neg_one(w, align_corners),
                             indexing="ij")
        base = np.stack([xs, ys, np.ones_like(xs)], -1).reshape(h * w, 3)
        out_shape = (n, h, w, 2)
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (3, 4):
            raise RuntimeError(f"affine_grid: expected theta of shape [N, 3, 4] for 5-D size, got {tuple(theta.shape)}")
        n, _, d, h, w = size
        zs, ys, xs = np.meshgrid(*(_linspace_from_neg_one(k, align_corners) for k in (d, h, w)), indexing="ij")
        base = np.stack([xs, ys, zs, np.ones_like(xs)], -1).reshape(d * h * w, 4)
        out_shape = (n, d, h, w, 3)
    else:
        raise RuntimeError(f"affine_grid: size MUST be 4D or 5D, got {size}")
    if theta.shape[0] != n:
        raise RuntimeError(f"affine_grid: theta's batch {theta.shape[0]} differs from size's {n}")
    base_t = constant(base.astype(theta.dtype.np), theta)
    return einsum("mk,njk->nmj", base_t, theta).reshape(*out_shape)


def _deform_checks(input, offset, weight, mask, stride, padding, dilation):
    """OneFlow's checks and messages (RuntimeError), before any collective."""
    if mask is not None and mask.ndim != 4:
        raise RuntimeError(f"The dimension of mask tensor weight must be 4, got {mask.ndim}")
    for name, t in (("input", input), ("weight", weight), ("offset", offset)):
        if t.ndim != 4:
            raise RuntimeError(f"The dimension of {name} tensor weight must be 4, got {t.ndim}")
    kh, kw = weight.shape[2:]
    if offset.shape[1] // (2 * kh * kw) == 0 or offset.shape[1] % (2 * kh * kw):
        raise RuntimeError(f"The shape of the offset tensor at dimension 1 is not valid. It should be a multiple of "
                           f"2 * weight.size[2] * weight.size[3].\nGot offset.shape[1]={offset.shape[1]}, while "
                           f"2 * weight.size[2] * weight.size[3]={2 * kh * kw}")
    if min(stride) <= 0:
        raise RuntimeError(f"The stride must be greater than 0,but got {stride[1]} and {stride[0]}")
    if min(padding) < 0:
        raise RuntimeError(f"The pad must be greater than or equal to 0,but got {padding[1]} and {padding[0]}")
    if min(dilation) <= 0:
        raise RuntimeError(f"The dilation must be greater than 0,but got {dilation[0]} and {dilation[1]}")
    groups = offset.shape[1] // (2 * kh * kw)
    if mask is not None and mask.shape[1] != groups * kh * kw:
        raise RuntimeError(f"mask.shape[1] is not valid: got: {mask.shape[1]} expected: {groups * kh * kw}")
    if offset.shape[0] != input.shape[0]:
        raise RuntimeError(f"invalid batch size of offset:got: {offset.shape[0]} ,expected: {input.shape[0]}")
    if input.shape[1] % weight.shape[1] or input.shape[1] % groups:
        raise RuntimeError(f"deform_conv2d: input channels {input.shape[1]} must divide by weight.shape[1] "
                           f"{weight.shape[1]} and by the offset groups {groups}")
    oh = (input.shape[2] + 2 * padding[0] - (dilation[0] * (kh - 1) + 1)) // stride[0] + 1
    ow = (input.shape[3] + 2 * padding[1] - (dilation[1] * (kw - 1) + 1)) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Calculated output size too small - out_h: {oh} ,out_w: {ow}")
    for name, t in (("offset", offset), ("mask", mask)):
        if t is not None and tuple(t.shape[2:]) != (oh, ow):
            raise RuntimeError(f"invalid {name} output dims: got ( {t.shape[2]}, {t.shape[3]}),expected: ({oh}, {ow})")
    return groups, oh, ow


def deform_conv2d(input, offset, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), mask=None):
    """torchvision's deform_conv2d (v2 with a mask): each kernel tap samples the input bilinearly
    at its place plus its learned offset (offset [N, 2 * G * kh * kw, oh, ow], (dy, dx) per tap
    and offset group), scaled by the mask if given; then a grouped matrix product with weight."""
    input, offset, weight = tensors(input, offset, weight)
    mask = None if mask is None else tensors(mask)[0]
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    groups, oh, ow = _deform_checks(input, offset, weight, mask, stride, padding, dilation)
    n, c = input.shape[:2]
    o, cw, kh, kw = weight.shape
    k, length, cg, wg = kh * kw, oh * ow, c // groups, c // cw
    taps_y = (np.arange(kh) * dilation[0])[:, None, None, None] + (np.arange(oh) * stride[0] - padding[0])[:, None]
    taps_x = (np.arange(kw) * dilation[1])[None, :, None, None] + (np.arange(ow) * stride[1] - padding[1])[None, :]
    base_y = constant(np.broadcast_to(taps_y, (kh, kw, oh, ow)).reshape(k, length).astype(offset.dtype.np), offset)
    base_x = constant(np.broadcast_to(taps_x, (kh, kw, oh, ow)).reshape(k, length).astype(offset.dtype.np), offset)
    shifts = offset.reshape(n, groups, k, 2, length)
    columns = []
    for g in range(groups):
        py = (shifts[:, g, :, 0] + base_y).reshape(n, k * length)
        px = (shifts[:, g, :, 1] + base_x).reshape(n, k * length)
        sampled = bilinear(input[:, g * cg:(g + 1) * cg], py, px)
        if mask is not None:
            sampled = sampled * mask.reshape(n, groups, k * length)[:, g].unsqueeze(1)
        columns.append(sampled.reshape(n, cg, k, length))
    cols = (concat(columns, 1) if groups > 1 else columns[0]).reshape(n, wg, cw * k, length)
    out = einsum("gok,ngkl->ngol", weight.reshape(wg, o // wg, cw * k), cols).reshape(n, o, oh, ow)
    return out if bias is None else out + tensors(bias)[0].reshape(1, o, 1, 1)


def _roi_positions(boxes, scale, pooled, ratio, aligned, size):
    """Sample positions and weights of torchvision's roi_align, per roi: [K, ph * pw * gh * gw]
    each, gh x gw samples a bin (up to the most any roi needs; the others weigh 0)."""
    (ph, pw), (h, w) = pooled, size
    half = 0.5 if aligned else 0.0
    start_x, start_y = boxes[:, 1] * scale - half, boxes[:, 2] * scale - half
    roi_w, roi_h = boxes[:, 3] * scale - half - start_x, boxes[:, 4] * scale - half - start_y
    if not aligned:
        roi_w, roi_h = np.maximum(roi_w, 1.0), np.maximum(roi_h, 1.0)
    bin_h, bin_w = roi_h / ph, roi_w / pw
    grid_h = np.full(len(boxes), ratio) if ratio > 0 else np.ceil(roi_h / ph).astype(np.int64)
    grid_w = np.full(len(boxes), ratio) if ratio > 0 else np.ceil(roi_w / pw).astype(np.int64)
    gh, gw = max(int(grid_h.max(initial=1)), 1), max(int(grid_w.max(initial=1)), 1)
    iy, ix = np.arange(gh), np.arange(gw)
    y = (start_y[:, None, None] + np.arange(ph)[None, :, None] * bin_h[:, None, None]
         + (iy[None, None, :] + 0.5) * (bin_h / np.maximum(grid_h, 1))[:, None, None])  # [K, ph, gh]
    x = (start_x[:, None, None] + np.arange(pw)[None, :, None] * bin_w[:, None, None]
         + (ix[None, None, :] + 0.5) * (bin_w / np.maximum(grid_w, 1))[:, None, None])  # [K, pw, gw]
    y = np.broadcast_to(y[:, :, None, :, None], (len(boxes), ph, pw, gh, gw))
    x = np.broadcast_to(x[:, None, :, None, :], (len(boxes), ph, pw, gh, gw))
    used = (iy[None, :, None] < grid_h[:, None, None]) & (ix[None, None, :] < grid_w[:, None, None])  # [K, gh, gw]
    inside = (y >= -1) & (y <= h) & (x >= -1) & (x <= w)
    weight = inside * used[:, None, None] / np.maximum(grid_h * grid_w, 1)[:, None, None, None, None]
    flat = (len(boxes), ph * pw * gh * gw)
    return (np.clip(y, 0, h - 1).reshape(flat), np.clip(x, 0, w - 1).reshape(flat), weight.reshape(flat), gh * gw)


def roi_align(input, rois, spatial_scale, pooled_h, pooled_w, sampling_ratio=-1, aligned=False):
    """OneFlow's roi_align (torchvision's semantics): rois [K, 5] = (batch index, x1, y1, x2, y2);
    each roi's [C, pooled_h, pooled_w] bins are means of bilinear samples. The sample positions
    are read from rois (detached: no gradient to rois), the same on every rank."""
    input, rois = tensors(input, rois)
    if input.ndim != 4:
        raise RuntimeError(f"The dimension of x tensor must be equal to 4, but got {input.ndim}")
    if rois.ndim != 2:
        raise RuntimeError(f"The dimension of rois tensor must be equal to 2, but got {rois.ndim}")
    if rois.shape[1] != 5:
        raise RuntimeError(f"The size of rois tensor must be equal to 5 at dimension 1, but got {rois.shape[1]}")
    boxes = rois.detach().numpy().astype(np.float64)
    n, c, h, w = input.shape
    if len(boxes) and (boxes[:, 0].min() < 0 or boxes[:, 0].max() >= n):
        raise IndexError(f"roi_align: roi batch indices must be in [0, {n}), got {boxes[:, 0].min()}..{boxes[:, 0].max()}")
    py, px, weight, per_bin = _roi_positions(boxes, float(spatial_scale), (int(pooled_h), int(pooled_w)),
                                             int(sampling_ratio), bool(aligned), (h, w))
    images = index_select(input, 0, constant(boxes[:, 0].astype(np.int64), input))
    dt = input.dtype.np
    sampled = bilinear(images, constant(py.astype(dt), input), constant(px.astype(dt), input))
    sampled = sampled * constant(weight.astype(dt), input).unsqueeze(1)
    return sampled.reshape(len(boxes), c, int(pooled_h), int(pooled_w), per_bin).sum(-1)

