"""Issue 35 (s6): row-blocked LayerNorm against its sequential-sum twin (bits) and torch; BatchNorm's
statistics reduced once on a split batch (collectives, values against torch)."""
import numpy as np
import pytest
from lazy_torch import torch

from globaltensor import _native


def _twin_forward(x, w, b, eps):
    """The kernel's arithmetic in numpy: each row's sums in double, in column order (cumsum)."""
    x64 = x.astype(np.float64)
    mu = np.cumsum(x64, axis=1)[:, -1] / x.shape[1]
    d = x64 - mu[:, None]
    inv = 1.0 / np.sqrt(np.cumsum(d * d, axis=1)[:, -1] / x.shape[1] + eps)
    m, s = mu.astype(x.dtype)[:, None], inv.astype(x.dtype)[:, None]
    y = (x - m) * s
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, m, s


def _twin_backward(g, x, m, s, w):
    xhat = (x - m) * s
    gw = g if w is None else g * w
    cols = x.shape[1]
    sum_gw = np.cumsum(gw.astype(np.float64), axis=1)[:, -1:]
    sum_gwx = np.cumsum(gw.astype(np.float64) * xhat.astype(np.float64), axis=1)[:, -1:]
    a, bb = (sum_gw / cols).astype(x.dtype), (sum_gwx / cols).astype(x.dtype)
    dx = s * ((gw - a) - (x - m) * s * bb)
    dw = np.cumsum(g.astype(np.float64) * xhat.astype(np.float64), axis=0)[-1].astype(x.dtype)
    db = np.cumsum(g.astype(np.float64), axis=0)[-1].astype(x.dtype)
    return dx, dw, db


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 7), (9, 33), (13, 256), (20, 101)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_blocks_have_the_sequential_bits(dtype, rows, cols, affine):
    rng = np.random.default_rng(rows * cols)
    x = (rng.standard_normal((rows, cols)) * 3 + 1).astype(dtype)
    g = rng.standard_normal((rows, cols)).astype(dtype)
    w = rng.standard_normal(cols).astype(dtype) if affine else None
    b = rng.standard_normal(cols).astype(dtype) if affine else None
    y, mean, rstd = np.empty_like(x), np.empty((rows, 1), dtype), np.empty((rows, 1), dtype)
    _native.layer_norm(y, mean, rstd, x, w, b, 1e-5)
    for ours, twin in zip((y, mean, rstd), _twin_forward(x, w, b, 1e-5)):
        assert ours.tobytes() == twin.astype(dtype).tobytes()
    dx, dw, db = np.empty_like(x), np.empty(cols, dtype), np.empty(cols, dtype)
    _native.layer_norm_backward(dx, dw, db, g, x, mean, rstd, w)
    for ours, twin in zip((dx, dw, db), _twin_backward(g, x, mean, rstd, w)):
        assert ours.tobytes() == twin.astype(dtype).tobytes()
    if dtype == np.float64:  # values against torch
        tx = torch.tensor(x, requires_grad=True)
        tw = torch.tensor(w, requires_grad=True) if affine else None
        tb = torch.tensor(b, requires_grad=True) if affine else None
        ty = torch.nn.functional.layer_norm(tx, (cols,), tw, tb, 1e-5)
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-7, atol=1e-7)
        if affine:
            np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(db, tb.grad.numpy(), rtol=1e-9, atol=1e-9)


def _bn_split_batch():
    """BatchNorm2d on a batch split over 2 ranks: its collectives, output and gradients."""
    import globaltensor as gt
    mesh = gt.placement("cpu", [0, 1])
    gt.manual_seed(0)
    x = gt.randn(6, 3, 4, 4, dtype="float64")
    bn = gt.nn.BatchNorm2d(3).to(dtype="float64").to_global(mesh, gt.sbp.broadcast)
    xs = x.to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    xs.requires_grad = True
    with gt.debug.count_collectives() as forward:
        y = bn(xs)
    (y * y).sum().backward()
    return (dict(forward), y.numpy(), xs.grad.numpy(), bn.weight.grad.numpy(), bn.bias.grad.numpy(),
            bn.running_var.numpy(), x.numpy())


def test_batch_norm_reduces_its_partial_statistics_once():
    from conftest import run_ranks
    for forward, y, dx, dw, db, rv, x in run_ranks(_bn_split_batch, 2):
        # the mean's all_reduce; the variance's subtraction boxed as before (its bits), then one all_gather;
        # the vectors whole from there on: no gathers in the per-channel ops or channel_affine
        assert sum(forward.values()) <= 3, forward
        tx = torch.tensor(x, requires_grad=True)
        tw = torch.ones(3, dtype=torch.float64, requires_grad=True)
        tb = torch.zeros(3, dtype=torch.float64, requires_grad=True)
        trv = torch.ones(3, dtype=torch.float64)
        ty = torch.nn.functional.batch_norm(tx, torch.zeros(3, dtype=torch.float64), trv, tw, tb, training=True)
        (ty * ty).sum().backward()
        np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(db, tb.grad.numpy(), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(rv, trv.numpy(), rtol=1e-12)
