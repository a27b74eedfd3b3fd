"""Issue 35's faster kernels against torch: conv2d's image-major forward (one GEMM per image) and
adaptive_mean (adaptive average pooling with bins of one length in one op), values, gradients,
the same bits as the paths they replace, and a batch split on 2 ranks."""
import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks
from globaltensor.ops import conv, resize
from blas_core import gemm_blocks_keep_bits
from lazy_torch import torch


@pytest.mark.parametrize("shape,o,k,stride,padding,dilation", [
    ((3, 3, 12, 10), 5, 3, 1, 1, 1), ((2, 4, 20, 20), 6, 3, 2, 0, 1), ((2, 2, 12, 12), 3, (3, 2), 1, 2, 2), ((4, 8, 16, 16), 16, 3, 1, 1, 1)])
def test_conv2d_image_major_matches_torch_and_the_batch_gemm(shape, o, k, stride, padding, dilation):
    rng = np.random.default_rng(0)
    kh, kw = (k, k) if isinstance(k, int) else k
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((o, shape[1], kh, kw)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    st = {"stride": conv._pair(stride), "padding": conv._pair(padding), "dilation": conv._pair(dilation)}
    assert conv._image_major_conv(x, w, st) is not None  # these sizes take the new path
    got = conv._conv2d(x, w, b, **st)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride, padding,
                                      dilation).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    cols, oh, ow = conv._channel_major_patches(x, kh, kw, st)  # the batch-wide GEMM it replaced
    old = np.ascontiguousarray(np.matmul(w.reshape(o, -1), cols).reshape(o, shape[0], oh, ow).transpose(1, 0, 2, 3))
    if oh * ow % 64 == 0 and gemm_blocks_keep_bits():  # images of whole GEMM blocks (the models' sizes): the
        # same bits on the AVX-512 kernels; else BLAS tails, and OpenBLAS's Haswell / Zen kernels, round otherwise
        np.testing.assert_array_equal(got, old + b.reshape(1, o, 1, 1))


def _taps(x, out):
    for dim, n_in, n_out in resize.adaptive_dims(x, out, 2):
        if n_in != n_out:
            x = resize._resample(x, dim, resize.adaptive_taps(n_in, n_out))
    return x


@pytest.mark.parametrize("shape,out", [((4, 6, 8, 8), 1), ((2, 3, 12, 6), (3, 2)), ((2, 3, 6, 6), (None, 3)),
                                       ((2, 3, 7, 6), (3, 2))])  # the last: uneven rows take the taps
def test_adaptive_avg_pool_matches_torch_and_the_taps(shape, out):
    rng = np.random.default_rng(1)
    xn = rng.standard_normal(shape).astype(np.float32)
    x, x_taps = gt.tensor(xn, requires_grad=True), gt.tensor(xn, requires_grad=True)
    y = gt.nn.functional.adaptive_avg_pool2d(x, out)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(gt.tensor(g))
    y_taps = _taps(x_taps, out)
    y_taps.backward(gt.tensor(g))
    np.testing.assert_array_equal(y.numpy(), y_taps.numpy())
    np.testing.assert_array_equal(x.grad.numpy(), x_taps.grad.numpy())
    tx = torch.tensor(xn, requires_grad=True)
    ty = torch.nn.functional.adaptive_avg_pool2d(tx, out)
    ty.backward(torch.from_numpy(g))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_adaptive_avg_pool_refuses_bins_that_do_not_divide():
    with pytest.raises(ValueError, match="do not divide"):
        gt.ops.adaptive_mean.adaptive_mean(gt.ones(2, 7), 1, 3)


def _split_pool(xn, g):
    mesh = gt.placement("cpu", [0, 1])
    x = gt.tensor(xn).to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    x.requires_grad_(True)
    y = gt.nn.functional.adaptive_avg_pool2d(x, 1)
    (y * gt.tensor(g).to_global(mesh, gt.sbp.broadcast)).sum().backward()
    return y.sbp, y.to_global(sbp=gt.sbp.broadcast).to_local().numpy(), \
        x.grad.to_global(sbp=gt.sbp.broadcast).to_local().numpy()


def test_adaptive_avg_pool_batch_split_on_two_ranks():
    rng = np.random.default_rng(2)
    xn = rng.standard_normal((4, 3, 4, 4)).astype(np.float32)
    g = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
    (sbp, y, dx), other = run_ranks(_split_pool, 2, xn, g, timeout=60)
    assert sbp == (gt.sbp.split(0),)
    tx = torch.tensor(xn, requires_grad=True)
    ty = torch.nn.functional.adaptive_avg_pool2d(tx, 1)
    (ty * torch.from_numpy(g)).sum().backward()
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(other[1], y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_index_add_rows_is_np_add_at_and_embedding_grad_matches_torch(dtype):
    from globaltensor import _native
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 7, 40)  # repeats: added in order, as np.add.at
    src = rng.standard_normal((40, 5)).astype(dtype)
    want, got = np.zeros((7, 5), dtype), np.zeros((7, 5), dtype)
    np.add.at(want, idx, src)
    _native.index_add_rows(got, idx, src)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(IndexError):
        _native.index_add_rows(got, np.array([7]), src[:1])
    wn = rng.standard_normal((7, 5)).astype(dtype)
    w = gt.tensor(wn, requires_grad=True)
    gt.nn.functional.embedding(gt.tensor(idx.reshape(8, 5)), w).sum().backward()
    tw = torch.tensor(wn, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(idx.reshape(8, 5)), tw).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("shape", [(4, 64, 32), (2, 3, 5, 7), (2, 0, 7)])
def test_batched_linear_and_matmul_as_one_gemm_match_torch(shape):
    from globaltensor.ops import linalg, linear_layer
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(np.float32)
    w, b = rng.standard_normal((48, shape[-1])).astype(np.float32), rng.standard_normal(48).astype(np.float32)
    y, m = linear_layer._linear(x, w, b), linalg._matmul(x, np.ascontiguousarray(w.T))
    tx, tw, tb = map(torch.from_numpy, (x, w, b))
    np.testing.assert_allclose(y, torch.nn.functional.linear(tx, tw, tb).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m, (tx @ tw.T).numpy(), rtol=1e-5, atol=1e-5)
    if shape[-2] % 64 == 0 and gemm_blocks_keep_bits():  # whole GEMM blocks (the GPT's sizes): the bits of
        # numpy's GEMM per leading index, on the kernels where that holds (not OpenBLAS's Haswell / Zen)
        np.testing.assert_array_equal(m, np.matmul(x, np.ascontiguousarray(w.T)))
