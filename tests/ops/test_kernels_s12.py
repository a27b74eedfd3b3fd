"""Kernels made faster in s12 with the same bits. Max pooling (kernels/conv.cpp): each window scanned
in registers, 2x2 windows at stride 2 four outputs at a time (SSE2), the backward's tap offsets from
a table; against torch's max_pool2d (values, the first largest on ties, a nan wins) and a numpy scan
of the same order (taps, and the backward's adds in output order: the same bits for overlapping
windows). BatchNorm's channel sums (kernels/norm.cpp): four planes side by side, each plane's sum
in its own order, against numpy's sequential cumsum."""
import numpy as np
import pytest

import globaltensor as gt
from globaltensor import _native

GEOMETRIES = [((2, 2), (2, 2)), ((3, 3), (2, 2)), ((2, 2), (1, 1)), ((3, 2), (1, 2)), ((2, 3), (2, 1)), ((1, 1), (1, 1))]
SHAPES = [(2, 3, 8, 8), (1, 2, 9, 11), (3, 1, 5, 19), (2, 2, 4, 33)]


def _data(shape, seed, dtype):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, shape).astype(dtype)  # few values: many ties
    x.flat[rng.choice(x.size, x.size // 17, replace=False)] = np.nan
    return x


def _reference(x, kernel, stride):
    """out, tap by scanning each window's taps in order: v wins when v > best or v is nan."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw) = kernel, stride
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    out = np.empty((n, c, oh, ow), x.dtype)
    tap = np.zeros((n, c, oh, ow), np.int64)
    out[...] = x[:, :, 0:sh * oh:sh, 0:sw * ow:sw][:, :, :oh, :ow]
    for i in range(kh):
        for j in range(kw):
            if i == 0 and j == 0:
                continue
            v = x[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw][:, :, :oh, :ow]
            wins = (v > out) | np.isnan(v)
            out = np.where(wins, v, out)
            tap = np.where(wins, i * kw + j, tap)
    return out, tap


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,stride", GEOMETRIES)
def test_max_pool_kernel_against_an_ordered_scan(kernel, stride, dtype):
    for seed, shape in enumerate(SHAPES):
        x = _data(shape, seed, dtype)
        ref_out, ref_tap = _reference(x, kernel, stride)
        out, tap = np.empty_like(ref_out), np.empty_like(ref_tap)
        _native.max_pool(out, tap, x, kernel, stride)
        assert out.tobytes() == ref_out.tobytes() and np.array_equal(tap, ref_tap), (shape, kernel, stride)
        g = np.random.default_rng(seed + 100).standard_normal(out.shape).astype(dtype)
        dx = np.full(x.shape, 7, dtype)  # the kernel zeroes it first
        _native.max_pool_backward(dx, g, tap, kernel, stride)
        want = np.zeros_like(x)
        n, c, oh, ow = out.shape
        rows = (np.arange(oh)[:, None] * stride[0] + tap // kernel[1])
        cols = (np.arange(ow)[None, :] * stride[1] + tap % kernel[1])
        nn, cc = np.meshgrid(np.arange(n), np.arange(c), indexing="ij")
        np.add.at(want, (np.broadcast_to(nn[:, :, None, None], tap.shape), np.broadcast_to(cc[:, :, None, None], tap.shape),
                         rows, cols), g)  # in output order, as the kernel adds
        assert dx.tobytes() == want.tobytes(), (shape, kernel, stride)


@pytest.mark.parametrize("kernel,stride", GEOMETRIES[:3])
def test_max_pool2d_against_torch(kernel, stride):
    torch = pytest.importorskip("torch")
    for seed, shape in enumerate(SHAPES):
        x = _data(shape, seed, np.float32)
        x[np.isnan(x)] = 0.5  # torch's gradient into a nan window is its index's: compared without nans below
        g = np.random.default_rng(seed).standard_normal(_reference(x, kernel, stride)[0].shape).astype(np.float32)
        ours = gt.tensor(x, requires_grad=True)
        y = gt.nn.functional.max_pool2d(ours, kernel, stride)
        (y * gt.tensor(g)).sum().backward()
        tx = torch.tensor(x, requires_grad=True)
        ty = torch.nn.functional.max_pool2d(tx, kernel, stride)
        (ty * torch.tensor(g)).sum().backward()
        assert y.numpy().tobytes() == ty.detach().numpy().tobytes()
        np.testing.assert_allclose(ours.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
        with_nan = _data(shape, seed, np.float32)
        assert np.array_equal(gt.nn.functional.max_pool2d(gt.tensor(with_nan), kernel, stride).numpy(),
                              torch.nn.functional.max_pool2d(torch.tensor(with_nan), kernel, stride).numpy(),
                              equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 9, 5, 7), (2, 4, 1, 1), (1, 3, 8, 8), (4, 13, 6, 5), (2, 64, 16, 16)])
def test_channel_sums_bit_for_bit_as_one_plane_at_a_time(shape, dtype):
    n, c = shape[:2]
    x = (np.random.default_rng(c).standard_normal(shape) * 3 + 1).astype(dtype)
    s1, s2 = np.empty(c), np.empty(c)
    _native.channel_sums(s1, s2, x)
    planes = x.astype(np.float64).reshape(n, c, -1)  # each plane summed in order, then image after image
    want1 = np.cumsum(np.cumsum(planes, axis=2)[..., -1], axis=0)[-1]
    want2 = np.cumsum(np.cumsum(planes * planes, axis=2)[..., -1], axis=0)[-1]
    assert s1.tobytes() == want1.tobytes() and s2.tobytes() == want2.tobytes()
