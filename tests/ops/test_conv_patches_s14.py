"""Issue 35 (s14): conv2d's forward keeps the batch's patches for its backward (no second im2col),
bounded and keyed by the very input piece; the per-image GEMMs read the patches in place with the
bits of contiguous copies; gradients against torch."""
import collections

import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from globaltensor.ops import conv_patches
from globaltensor.ops.conv_patches import _channel_major_patches, _image_major_conv

GEOMETRIES = [dict(stride=1, padding=1, dilation=1, groups=1), dict(stride=2, padding=0, dilation=1, groups=1),
              dict(stride=1, padding=2, dilation=2, groups=1), dict(stride=1, padding=1, dilation=1, groups=2)]


@pytest.fixture(autouse=True)
def _fresh_store(monkeypatch):
    """Each test starts with no patches kept (an earlier test's forwards may have left some)."""
    monkeypatch.setattr(conv_patches, "_kept", collections.OrderedDict())


def _data(seed, n=3, c=4, side=10, o=6, groups=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, c, side, side)).astype(np.float32),
            rng.standard_normal((o, c // groups, 3, 3)).astype(np.float32), rng.standard_normal(o).astype(np.float32))


@pytest.mark.parametrize("geo", GEOMETRIES)
def test_backward_takes_the_forwards_patches(geo, monkeypatch):
    x_np, w_np, b_np = _data(1, groups=geo["groups"])
    computed = []
    real = conv_patches._channel_major_patches
    monkeypatch.setattr(conv_patches, "_channel_major_patches", lambda *a: computed.append(1) or real(*a))
    import globaltensor.ops.conv as conv_module
    monkeypatch.setattr(conv_module, "_channel_major_patches", conv_patches._channel_major_patches)
    x, w, b = (gt.tensor(a).requires_grad_() for a in (x_np, w_np, b_np))
    y = gt.nn.functional.conv2d(x, w, b, **geo)
    assert len(conv_patches._kept) == 1 and len(computed) == 1
    (y * y).sum().backward()
    assert len(conv_patches._kept) == 0 and len(computed) == 1  # the backward made none
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
    ty = torch.nn.functional.conv2d(tx, tw, tb, **geo)
    (ty * ty).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    for ours, theirs in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_patches_kept_only_under_grad_and_bounded(monkeypatch):
    x_np, w_np, _ = _data(2)
    w = gt.tensor(w_np)
    with gt.no_grad():
        gt.nn.functional.conv2d(gt.tensor(x_np), w, padding=1)
    assert not conv_patches._kept
    one = _channel_major_patches(x_np, 3, 3, {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)})[0].nbytes
    monkeypatch.setattr(conv_patches, "KEPT_BYTES", 2 * one)
    xs = [gt.tensor(x_np + i).requires_grad_() for i in range(3)]
    ys = [gt.nn.functional.conv2d(x, w, padding=1) for x in xs]
    assert list(conv_patches._kept) == [id(xs[1]._local), id(xs[2]._local)]  # the oldest dropped
    for x, y in zip(xs, ys):  # the first recomputes its patches: the same gradients either way
        y.sum().backward()
        tx = torch.tensor(x.detach().numpy(), requires_grad=True)
        torch.nn.functional.conv2d(tx, torch.tensor(w_np), padding=1).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert not conv_patches._kept


def test_patches_go_with_their_input():
    x = np.ones((2, 3, 9, 9), np.float32)
    conv_patches.keep_patches(x, ("g",), np.zeros(4, np.float32))
    assert conv_patches.take_patches(x, ("other",)) is None  # another geometry: dropped, not handed out
    conv_patches.keep_patches(x, ("g",), np.zeros(4, np.float32))
    del x  # freed: its patches with it, so no later array at its address finds them
    assert not conv_patches._kept
    y = np.ones((2, 3, 9, 9), np.float32)
    assert conv_patches.take_patches(y, ("g",)) is None


@pytest.mark.parametrize("n, c, side, o", [(32, 3, 32, 32), (4, 8, 10, 6), (3, 5, 9, 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_per_image_products_read_the_patches_in_place(n, c, side, o, dtype):
    rng = np.random.default_rng(n * side)
    x, w = rng.standard_normal((n, c, side, side)).astype(dtype), rng.standard_normal((o, c, 3, 3)).astype(dtype)
    st = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)}
    out, cols = _image_major_conv(x, w, st)
    per_image = cols.reshape(c * 9, n, side * side)
    want = np.stack([np.matmul(w.reshape(o, -1), np.ascontiguousarray(per_image[:, i])) for i in range(n)])
    assert out.tobytes() == want.reshape(out.shape).tobytes()


def _split_batch():
    """A conv on a batch split over 2 ranks: each rank's backward takes its forward's patches."""
    x_np, w_np, b_np = _data(3, n=4)
    mesh = gt.placement("cpu", [0, 1])
    w = gt.tensor(w_np).to_global(mesh, gt.sbp.broadcast).requires_grad_()
    x = gt.tensor(x_np).to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    x.requires_grad_()
    kept = []
    for _ in range(3):
        y = gt.nn.functional.conv2d(x, w, padding=1)
        kept.append(len(conv_patches._kept))
        (y * y).sum().backward()
        kept.append(len(conv_patches._kept))
    return kept, x.grad.to_global(sbp=gt.sbp.broadcast).numpy(), w.grad.numpy(), x_np, w_np


def test_split_batch_gradients_against_torch():
    from conftest import run_ranks
    for kept, dx, dw, x_np, w_np in run_ranks(_split_batch, 2):
        assert kept == [1, 0] * 3
        tx, tw = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
        ty = torch.nn.functional.conv2d(tx, tw, padding=1)
        (ty * ty).sum().backward()
        np.testing.assert_allclose(dx, 3 * tx.grad.numpy(), rtol=1e-4, atol=1e-4)  # three backwards added up
        np.testing.assert_allclose(dw, 3 * tw.grad.numpy(), rtol=1e-4, atol=1e-4)
