"""Convolution, pooling and normalization layers against numpy written out directly,
gradients by central differences, and BatchNorm's statistics over the global batch on 2 ranks."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
import globaltensor.nn.functional as F
from conftest import run_ranks


def _np_conv2d(x, w, b, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                for ki in range(kh):
                    for kj in range(kw):
                        patch = xp[:, g * cg:(g + 1) * cg, i * stride[0] + ki * dil[0], j * stride[1] + kj * dil[1]]
                        out[:, oc, i, j] += patch @ w[oc, :, ki, kj]
    return out + (0 if b is None else b.reshape(1, o, 1, 1))


CONVS = [((1, 1), (0, 0), (1, 1), 1), ((2, 1), (1, 2), (1, 1), 1), ((1, 2), (1, 1), (2, 1), 2)]


@pytest.mark.parametrize("stride,pad,dil,groups", CONVS)
def test_conv2d_values_and_gradients(stride, pad, dil, groups):
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 4, 6, 5)), rng.standard_normal((6, 4 // groups, 3, 2)), rng.standard_normal(6)
    xt = gt.tensor(x).requires_grad_()
    wt = gt.tensor(w).requires_grad_()
    out = F.conv2d(xt, wt, gt.tensor(b), stride, pad, dil, groups)
    want = _np_conv2d(x, w, b, stride, pad, dil, groups)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-10)
    probe = rng.standard_normal(want.shape)
    (out * gt.tensor(probe)).sum().backward()
    for t, a in ((xt, x), (wt, w)):
        eps, numeric = 1e-6, np.zeros_like(a)
        for i in list(np.ndindex(a.shape))[::7]:  # a sample of entries
            up, down = a.copy(), a.copy()
            up[i] += eps
            down[i] -= eps
            args = (up, w) if a is x else (x, up)
            args_down = (down, w) if a is x else (x, down)
            numeric[i] = ((_np_conv2d(*args, b, stride, pad, dil, groups) * probe).sum()
                          - (_np_conv2d(*args_down, b, stride, pad, dil, groups) * probe).sum()) / (2 * eps)
            np.testing.assert_allclose(t.grad.numpy()[i], numeric[i], rtol=1e-6, atol=1e-8)


def test_conv1d_and_layers():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9))
    conv = nn.Conv1d(3, 4, 3, stride=2, padding=1)
    w, b = conv.weight.numpy(), conv.bias.numpy()
    want = _np_conv2d(x[:, :, None, :], w[:, :, None, :], b, (1, 2), (0, 1), (1, 1), 1)[:, :, 0]
    np.testing.assert_allclose(conv(gt.tensor(x.astype(np.float32))).numpy(), want, rtol=1e-5, atol=1e-5)
    assert nn.Conv2D is nn.Conv2d and tuple(nn.Conv2d(3, 8, 3, groups=1).weight.shape) == (8, 3, 3, 3)


def _np_pool(x, k, s, p, reduce, fill):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return np.stack([np.stack([reduce(xp[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3)) for j in range(ow)], -1)
                     for i in range(oh)], -2)


def test_pooling_against_numpy():
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 6))
    np.testing.assert_allclose(F.max_pool2d(gt.tensor(x), 3, 2, 1).numpy(), _np_pool(x, 3, 2, 1, np.max, -np.inf))
    np.testing.assert_allclose(F.avg_pool2d(gt.tensor(x), 2).numpy(), _np_pool(x, 2, 2, 0, np.mean, 0.0))
    got = nn.AdaptiveAvgPool2d((3, 4))(gt.tensor(x)).numpy()
    want = np.array([[[[x[a, b, (i * 7) // 3:-((-(i + 1) * 7) // 3), (j * 6) // 4:-((-(j + 1) * 6) // 4)].mean()
                        for j in range(4)] for i in range(3)] for b in range(3)] for a in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(nn.AdaptiveAvgPool2d(1)(gt.tensor(x)).numpy(), x.mean((2, 3), keepdims=True))


def _np_bn(x, running_mean, running_var, momentum=0.1, eps=1e-5):
    dims = (0, 2, 3)
    mean, var = x.mean(dims), x.var(dims)
    n = x.size // x.shape[1]
    y = (x - mean.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + eps)
    return y, (1 - momentum) * running_mean + momentum * mean, (1 - momentum) * running_var + momentum * var * n / (n - 1)


def test_batch_norm_and_group_norm_against_numpy():
    x = np.random.default_rng(3).standard_normal((4, 3, 5, 5))
    bn = nn.BatchNorm2d(3).to(dtype="float64")
    y, rm, rv = _np_bn(x, np.zeros(3), np.ones(3))
    np.testing.assert_allclose(bn(gt.tensor(x)).numpy(), y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-12)
    bn.eval()
    np.testing.assert_allclose(bn(gt.tensor(x)).numpy(), (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5),
                               rtol=1e-10)
    gn = nn.GroupNorm(2, 4).to(dtype="float64")
    z = np.random.default_rng(4).standard_normal((2, 4, 3, 3))
    g = z.reshape(2, 2, -1)
    want = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(z.shape)
    np.testing.assert_allclose(gn(gt.tensor(z)).numpy(), want, rtol=1e-10, atol=1e-12)


def _sync_bn(rows):
    """BatchNorm over a batch split by rows over 2 ranks: the global batch's statistics."""
    gt.manual_seed(0)
    x = gt.randn(rows, 3, 4, 4, dtype="float64")
    bn = nn.BatchNorm2d(3).to(dtype="float64").to_global(gt.placement("cpu", [0, 1]), gt.sbp.broadcast)
    xs = x.to_global(gt.placement("cpu", [0, 1]), gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    return bn(xs).numpy(), bn.running_mean.numpy(), bn.running_var.numpy(), x.numpy()


@pytest.mark.parametrize("rows", [4, 5])
def test_batch_norm_on_a_split_batch_uses_the_global_batch(rows):
    for y, rm, rv, x in run_ranks(_sync_bn, 2, rows):
        want_y, want_rm, want_rv = _np_bn(x, np.zeros(3), np.ones(3))
        np.testing.assert_allclose(y, want_y, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(rm, want_rm, rtol=1e-12)
        np.testing.assert_allclose(rv, want_rv, rtol=1e-12)


def test_max_pool_gradient_goes_to_the_first_largest_of_each_window_and_nan_wins():
    """PyTorch's semantics: a tie sends the window's gradient to its first largest element (row
    by row), and a nan in a window is its max."""
    x = np.array([[[[1.0, 3.0, 2.0, 2.0],
                    [3.0, 0.0, 2.0, 2.0],
                    [np.nan, 1.0, 5.0, 4.0],
                    [0.0, 1.0, 4.0, 5.0]]]])
    xt = gt.tensor(x, requires_grad=True)
    out = F.max_pool2d(xt, 2)
    np.testing.assert_array_equal(np.isnan(out.numpy()), [[[[False, False], [True, False]]]])
    out.backward(gt.tensor(np.array([[[[1.0, 2.0], [3.0, 4.0]]]])))
    want = np.zeros((1, 1, 4, 4))
    want[0, 0, 0, 1], want[0, 0, 0, 2], want[0, 0, 2, 0], want[0, 0, 2, 2] = 1.0, 2.0, 3.0, 4.0
    np.testing.assert_array_equal(xt.grad.numpy(), want)
