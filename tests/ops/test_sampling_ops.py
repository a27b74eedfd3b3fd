"""grid_sample, affine_grid, deform_conv2d and roi_align against torch (values and gradients), and
OneFlow's error messages for bad arguments."""
import numpy as np
import pytest
import torch

import globaltensor as gt
import globaltensor.nn.functional as F

RNG = np.random.default_rng(0)


def _pair_run(fn_gt, fn_torch, *arrays, atol=1e-6):
    """Values and the gradients of every input against torch (float64, a random cotangent)."""
    g_in = [gt.tensor(a, requires_grad=True) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, ty = fn_gt(*g_in), fn_torch(*t_in)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), atol=atol)
    cot = RNG.standard_normal(tuple(ty.shape))
    (y * gt.tensor(cot)).sum().backward()
    (ty * torch.tensor(cot)).sum().backward()
    for g, t in zip(g_in, t_in):
        if t.grad is not None and g.grad is not None:
            np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), atol=atol)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    x, grid = RNG.standard_normal((2, 3, 5, 6)), RNG.uniform(-1.3, 1.3, (2, 4, 7, 2))
    _pair_run(lambda a, g: F.grid_sample(a, g, mode, padding_mode, align_corners),
              lambda a, g: torch.nn.functional.grid_sample(a, g, mode, padding_mode, align_corners), x, grid, atol=1e-5)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 3, 4, 5, 6)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_torch(size, align_corners):
    theta = RNG.standard_normal((2, 2, 3) if len(size) == 4 else (2, 3, 4))
    _pair_run(lambda t: F.affine_grid(t, size, align_corners), lambda t: torch.nn.functional.affine_grid(
        t, size, align_corners=align_corners), theta)


def _torch_bilinear(img, y, x):
    """img [C, H, W] at float positions y, x (same shape), zero outside (torchvision's rule)."""
    c, h, w = img.shape
    y0, x0 = torch.floor(y).detach(), torch.floor(x).detach()
    out = 0
    for yi, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xi, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            ok = ((yi >= 0) & (yi <= h - 1) & (xi >= 0) & (xi <= w - 1)).to(img.dtype)
            idx = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).long().reshape(-1)
            out = out + img.reshape(c, -1)[:, idx].reshape(c, *y.shape) * (wy * wx * ok)
    return out


def _torch_deform(x, off, w, b, mask, stride, pad, dil):
    """torchvision's deform_conv2d written out with torch ops (a loop over taps and groups)."""
    n, c, h, wd = x.shape
    o, cw, kh, kw = w.shape
    oh, ow = off.shape[2:]
    groups = off.shape[1] // (2 * kh * kw)
    cols = torch.zeros(n, c, kh * kw, oh, ow, dtype=x.dtype)
    base_y = torch.arange(oh, dtype=x.dtype)[:, None] * stride[0] - pad[0]
    base_x = torch.arange(ow, dtype=x.dtype)[None, :] * stride[1] - pad[1]
    pieces = []
    for b_i in range(n):
        per_img = []
        for g in range(groups):
            taps = []
            for i in range(kh):
                for j in range(kw):
                    k = i * kw + j
                    py = base_y + i * dil[0] + off[b_i, g * 2 * kh * kw + 2 * k]
                    px = base_x + j * dil[1] + off[b_i, g * 2 * kh * kw + 2 * k + 1]
                    v = _torch_bilinear(x[b_i, g * (c // groups):(g + 1) * (c // groups)], py, px)
                    if mask is not None:
                        v = v * mask[b_i, g * kh * kw + k]
                    taps.append(v)
            per_img.append(torch.stack(taps, 1))
        pieces.append(torch.cat(per_img, 0))
    cols = torch.stack(pieces)  # [N, C, K, oh, ow]
    wg = c // cw
    cols = cols.reshape(n, wg, cw * kh * kw, oh * ow)
    out = torch.einsum("gok,ngkl->ngol", w.reshape(wg, o // wg, cw * kh * kw), cols).reshape(n, o, oh, ow)
    return out if b is None else out + b.reshape(1, o, 1, 1)


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("groups", [1, 2])
def test_deform_conv2d_matches_a_torch_reference(with_mask, groups):
    x = RNG.standard_normal((2, 4, 6, 7))
    w = RNG.standard_normal((6, 4 // groups, 3, 3))
    b = RNG.standard_normal(6)
    stride, pad, dil = (1, 2), (1, 1), (1, 1)
    oh, ow = (6 + 2 - 3) // 1 + 1, (7 + 2 - 3) // 2 + 1
    off = RNG.standard_normal((2, 2 * 2 * 9, oh, ow)) * 1.5
    mask = RNG.uniform(0, 1, (2, 2 * 9, oh, ow)) if with_mask else None
    arrays = (x, off, w, b) + ((mask,) if with_mask else ())
    _pair_run(lambda *t: F.deform_conv2d(t[0], t[1], t[2], t[3], stride, pad, dil, t[4] if with_mask else None),
              lambda *t: _torch_deform(t[0], t[1], t[2], t[3], t[4] if with_mask else None, stride, pad, dil),
              *arrays, atol=1e-9)


def test_deform_conv2d_with_zero_offsets_is_conv2d():
    x, w = RNG.standard_normal((2, 4, 7, 6)), RNG.standard_normal((6, 2, 3, 3))
    off = np.zeros((2, 18, 4, 4))
    y = F.deform_conv2d(gt.tensor(x), gt.tensor(off), gt.tensor(w), stride=(2, 1), padding=(1, 0))
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=(2, 1), padding=(1, 0), groups=2)
    np.testing.assert_allclose(y.numpy(), want.numpy(), atol=1e-12)


def _np_roi_align(x, rois, scale, ph, pw, ratio, aligned):
    """torchvision's roi_align, written out per sample."""
    n, c, h, w = x.shape
    out = np.zeros((len(rois), c, ph, pw))
    for r, (bi, x1, y1, x2, y2) in enumerate(rois):
        off = 0.5 if aligned else 0.0
        sx, sy = x1 * scale - off, y1 * scale - off
        rw, rh = x2 * scale - off - sx, y2 * scale - off - sy
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = ratio if ratio > 0 else int(np.ceil(rh / ph))
        gw = ratio if ratio > 0 else int(np.ceil(rw / pw))
        for i in range(ph):
            for j in range(pw):
                acc = np.zeros(c)
                for iy in range(gh):
                    yy = sy + i * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = sx + j * bw + (ix + 0.5) * bw / gw
                        if yy < -1 or yy > h or xx < -1 or xx > w:
                            continue
                        yy_, xx_ = max(yy, 0.0), max(xx, 0.0)
                        y0, x0 = int(yy_), int(xx_)
                        if y0 >= h - 1:
                            y0 = y1_ = h - 1
                            yy_ = float(y0)
                        else:
                            y1_ = y0 + 1
                        if x0 >= w - 1:
                            x0 = x1_ = w - 1
                            xx_ = float(x0)
                        else:
                            x1_ = x0 + 1
                        ly, lx = yy_ - y0, xx_ - x0
                        img = x[int(bi)]
                        acc += ((1 - ly) * (1 - lx) * img[:, y0, x0] + (1 - ly) * lx * img[:, y0, x1_]
                                + ly * (1 - lx) * img[:, y1_, x0] + ly * lx * img[:, y1_, x1_])
                out[r, :, i, j] = acc / max(gh * gw, 1)
    return out


@pytest.mark.parametrize("ratio,aligned", [(2, True), (-1, False), (0, True)])
def test_roi_align_matches_torchvisions_algorithm(ratio, aligned):
    x = RNG.standard_normal((2, 3, 9, 11))
    rois = np.array([[0, 1.0, 1.5, 7.2, 6.0], [1, -2.0, 0.5, 4.0, 12.0], [1, 3.3, 2.2, 3.9, 2.8]])
    y = gt.roi_align(gt.tensor(x), gt.tensor(rois), 0.8, 3, 2, ratio, aligned)
    np.testing.assert_allclose(y.numpy(), _np_roi_align(x, rois, 0.8, 3, 2, ratio, aligned), atol=1e-12)


def test_oneflow_error_messages():
    with pytest.raises(RuntimeError, match="The dimension of offset tensor weight must be "):
        F.deform_conv2d(gt.randn(2, 5, 1, 1), gt.randn(2, 5, 1), gt.randn(2, 5, 1, 1))
    with pytest.raises(RuntimeError, match="invalid offset output dims"):
        F.deform_conv2d(gt.randn(4, 3, 10, 10), gt.randn(4, 18, 8, 8), gt.randn(5, 3, 3, 3), dilation=(2, 2))
    with pytest.raises(RuntimeError, match="Grid shape MUST"):
        F.grid_sample(gt.ones(2, 3, 4, 5), gt.ones(2, 3, 4, 1))
    with pytest.raises(RuntimeError, match="MUST be 4D or 5D input"):
        F.grid_sample(gt.ones(2, 3, 4), gt.ones(2, 3, 1))
    with pytest.raises(RuntimeError, match="The size of rois tensor must be equal to 5 at dimension 1"):
        gt.roi_align(gt.randn(2, 3, 4, 5), gt.randn(2, 3), 2.0, 4, 4, 2, True)
