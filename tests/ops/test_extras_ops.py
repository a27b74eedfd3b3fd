"""batch_gather, tensor_scatter_nd_update, mode, searchsorted, in_top_k, bincount, digamma/lgamma,
hann_window, stft, logspace, randint_like and the recurrent layers against torch / numpy."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
import globaltensor.nn as nn

RNG = np.random.default_rng(2)


def test_batch_gather_is_a_gather_per_batch_entry_with_its_gradient():
    x = RNG.standard_normal((3, 5, 4))
    idx = RNG.integers(0, 5, (3, 6))
    gx = gt.tensor(x, requires_grad=True)
    y = gt.batch_gather(gx, gt.tensor(idx))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.gather(tx, 1, torch.tensor(idx)[:, :, None].expand(3, 6, 4))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy())
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(gt.batch_gather(gt.tensor(x), gt.tensor(idx[0] % 3)).numpy(), x[idx[0] % 3])
    with pytest.raises(TypeError, match="The dtype of the indices tensor must be int32 or int64"):
        gt.batch_gather(gt.tensor(x), gt.tensor([1.0]))
    with pytest.raises(RuntimeError, match="The size of indices tensor must match the size of input tensor"):
        gt.batch_gather(gt.tensor(x), gt.tensor(idx[:2]))


def test_tensor_scatter_nd_update_replaces_and_routes_gradients():
    x, upd = RNG.standard_normal((5, 3)), RNG.standard_normal((2, 3))
    gx, gu = gt.tensor(x, requires_grad=True), gt.tensor(upd, requires_grad=True)
    y = gt.tensor_scatter_nd_update(gx, gt.tensor([[3], [1]]), gu)
    want = x.copy()
    want[[3, 1]] = upd
    np.testing.assert_allclose(y.numpy(), want)
    (y * gt.tensor(np.arange(15.0).reshape(5, 3))).sum().backward()
    gxw = np.arange(15.0).reshape(5, 3)
    np.testing.assert_allclose(gu.grad.numpy(), gxw[[3, 1]])
    gxw[[3, 1]] = 0
    np.testing.assert_allclose(gx.grad.numpy(), gxw)


def test_mode_searchsorted_bincount_in_top_k_match_torch():
    x = RNG.integers(0, 4, (3, 9))
    v, i = gt.mode(gt.tensor(x), 1)
    tv, ti = torch.mode(torch.tensor(x), 1)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        gt.mode(gt.randn(2, 0, 2), 1)
    seq, vals = np.sort(RNG.standard_normal((2, 6)), 1), RNG.standard_normal((2, 4))
    for right in (False, True):
        np.testing.assert_array_equal(gt.searchsorted(gt.tensor(seq), gt.tensor(vals), right=right).numpy(),
                                      torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right).numpy())
    unsorted = RNG.standard_normal((2, 9))  # PyTorch's bisection, step for step
    np.testing.assert_array_equal(gt.searchsorted(gt.tensor(unsorted), gt.tensor(vals)).numpy(),
                                  torch.searchsorted(torch.tensor(unsorted), torch.tensor(vals)).numpy())
    np.testing.assert_array_equal(gt.searchsorted(gt.tensor(seq[0]), gt.tensor(vals)).numpy(),
                                  torch.searchsorted(torch.tensor(seq[0]), torch.tensor(vals)).numpy())
    b, w = RNG.integers(0, 6, 20), RNG.standard_normal(20)
    np.testing.assert_array_equal(gt.bincount(gt.tensor(b), minlength=9).numpy(),
                                  torch.bincount(torch.tensor(b), minlength=9).numpy())
    np.testing.assert_allclose(gt.bincount(gt.tensor(b), gt.tensor(w)).numpy(),
                               torch.bincount(torch.tensor(b), torch.tensor(w)).numpy())
    pred = np.array([[0.8, 0.6, 0.3], [0.1, 0.6, 0.4]])
    np.testing.assert_array_equal(gt.in_top_k(gt.tensor([0, 2]), gt.tensor(pred), 2).numpy(), [True, True])
    np.testing.assert_array_equal(gt.in_top_k(gt.tensor([1, 0]), gt.tensor(pred), 1).numpy(), [False, False])
    with pytest.raises(RuntimeError, match="targets data type must be index type"):
        gt.in_top_k(gt.tensor([1.0, 0.0]), gt.tensor(pred), 1)


def test_digamma_lgamma_and_their_gradients_match_torch():
    x = np.array([0.3, 1.0, 2.5, 7.0, -0.5, 12.3, 30.0])
    for name in ("digamma", "lgamma"):
        gx, tx = gt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        y, ty = getattr(gt, name)(gx), getattr(torch, name)(tx)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dim,size,step", [(1, 3, 2), (0, 2, 1), (2, 5, 1), (-1, 1, 3)])
def test_tensor_unfold_matches_torch(dim, size, step):
    x = RNG.standard_normal((4, 7, 5))
    gx, tx = gt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = gx.unfold(dim, size, step), tx.unfold(dim, size, step)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy())
    cot = RNG.standard_normal(tuple(ty.shape))
    (y * gt.tensor(cot)).sum().backward()
    (ty * torch.tensor(cot)).sum().backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy())


def test_atan2_and_its_gradients_match_torch():
    a, b = RNG.standard_normal((4, 3)), RNG.standard_normal((1, 3))
    ga, gb, ta, tb = gt.tensor(a, requires_grad=True), gt.tensor(b, requires_grad=True), \
        torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    y, ty = gt.atan2(ga, gb), torch.atan2(ta, tb)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(gb.grad.numpy(), tb.grad.numpy(), rtol=1e-10)


def test_digamma_lgamma_keep_bfloat16():
    x = gt.tensor(RNG.uniform(0.1, 4.0, 6)).bfloat16()
    for name in ("digamma", "lgamma"):
        y = getattr(gt, name)(x)
        assert y.dtype == gt.bfloat16
        want = getattr(torch, name)(torch.tensor(x.float().numpy())).bfloat16().float().numpy()
        np.testing.assert_allclose(y.float().numpy(), want, rtol=1e-2)


def test_windows_stft_logspace_randint_like_match_torch():
    for periodic in (True, False):
        np.testing.assert_allclose(gt.hann_window(7, periodic, dtype=gt.float64).numpy(),
                                   torch.hann_window(7, periodic, dtype=torch.float64).numpy(), atol=1e-12)
    with pytest.raises(RuntimeError, match="hann_window expects floating point dtypes, got: "):
        gt.hann_window(8, dtype=gt.int64)
    sig, win = RNG.standard_normal((2, 40)), RNG.uniform(0.5, 1, 10)
    for kw in (dict(n_fft=16, hop_length=4), dict(n_fft=16, win_length=10, normalized=True, center=False),
               dict(n_fft=12, onesided=False)):
        window = win if kw.get("win_length") else None
        gs, ts = gt.tensor(sig, requires_grad=True), torch.tensor(sig, requires_grad=True)
        y = gt.stft(gs, window=None if window is None else gt.tensor(window), return_complex=False, **kw)
        ty = torch.view_as_real(torch.stft(ts, window=None if window is None else torch.tensor(window),
                                           return_complex=True, **kw))
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), atol=1e-10)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(gs.grad.numpy(), ts.grad.numpy(), atol=1e-10)
    with pytest.raises(RuntimeError, match="Expected a 1D or 2D tensor,but got 3D"):
        gt.stft(gt.randn(2, 2, 3), 4)
    np.testing.assert_allclose(gt.logspace(-2, 3, 6, base=2.0, dtype=gt.float64).numpy(),
                               torch.logspace(-2, 3, 6, base=2.0, dtype=torch.float64).numpy())
    r = gt.randint_like(gt.zeros(3, 4, dtype=gt.int32), 2, 5)
    assert tuple(r.shape) == (3, 4) and r.dtype == gt.int32 and 2 <= r.numpy().min() and r.numpy().max() < 5


def _copy(tm, gm):
    gm.load_state_dict({k: gt.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


@pytest.mark.parametrize("name,kw,batched", [
    ("RNN", dict(num_layers=2, bidirectional=True), True), ("LSTM", dict(num_layers=2, bidirectional=True), True),
    ("GRU", dict(num_layers=2, bidirectional=True), True), ("LSTM", dict(batch_first=True), True),
    ("GRU", {}, False), ("RNN", dict(nonlinearity="relu", bias=False), True),
    ("LSTM", dict(proj_size=3, num_layers=2, bidirectional=True), True),
])
def test_recurrent_layers_match_torch_with_copied_weights(name, kw, batched):
    torch.manual_seed(0)
    tm, gm = getattr(torch.nn, name)(4, 6, **kw).double(), getattr(nn, name)(4, 6, **kw)
    _copy(tm, gm)
    x = RNG.standard_normal((5, 3, 4) if batched else (5, 4))
    tx, gx = torch.tensor(x, requires_grad=True), gt.tensor(x, requires_grad=True)
    (ty, th), (gy, gh) = tm(tx), gm(gx)
    th, gh = (th if isinstance(th, tuple) else (th,)), (gh if isinstance(gh, tuple) else (gh,))
    for a, b in zip((ty,) + th, (gy,) + gh):
        np.testing.assert_allclose(b.numpy(), a.detach().numpy(), atol=1e-12)
    (ty.sum() + sum(h.sum() for h in th)).backward()
    (gy.sum() + sum(h.sum() for h in gh)).backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    params = dict(gm.named_parameters())
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(params[n].grad.numpy(), p.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_recurrent_cells_match_torch(name):
    torch.manual_seed(1)
    tm, gm = getattr(torch.nn, name)(4, 5).double(), getattr(nn, name)(4, 5)
    _copy(tm, gm)
    x, h = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 5))
    th = (torch.tensor(h), torch.tensor(h)) if name == "LSTMCell" else torch.tensor(h)
    gh = (gt.tensor(h), gt.tensor(h)) if name == "LSTMCell" else gt.tensor(h)
    ty, gy = tm(torch.tensor(x), th), gm(gt.tensor(x), gh)
    for a, b in zip(ty if isinstance(ty, tuple) else (ty,), gy if isinstance(gy, tuple) else (gy,)):
        np.testing.assert_allclose(b.numpy(), a.detach().numpy(), atol=1e-12)


def _det_on_two_ranks():
    import torch
    pl = gt.placement("cpu", ranks=[0, 1])
    a = np.random.default_rng(3).standard_normal((3, 4, 4))  # 3 matrices: uneven over 2 ranks
    t = torch.tensor(a, requires_grad=True)
    torch.linalg.det(t).sum().backward()
    for sbp in (gt.sbp.broadcast, gt.sbp.split(0)):
        x = gt.tensor(a).to_global(pl, gt.sbp.broadcast).to_global(pl, sbp).detach().requires_grad_()
        with gt.debug.count_collectives() as counted:
            y = gt.linalg.det(x)
        assert counted.total == 0 and y.sbp == (sbp,)
        y.sum().backward()
        np.testing.assert_allclose(y.to_global(pl, gt.sbp.broadcast).to_local().numpy(),
                                   torch.linalg.det(t).detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(x.grad.to_global(pl, gt.sbp.broadcast).to_local().numpy(), t.grad.numpy(),
                                   rtol=1e-10, atol=1e-12)


def test_linalg_det_matches_torch_one_process_and_two_ranks():
    import torch
    from conftest import run_ranks
    a = np.random.default_rng(2).standard_normal((2, 3, 3))
    x, t = gt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    gt.linalg.det(x).sum().backward()
    torch.linalg.det(t).sum().backward()
    np.testing.assert_allclose(gt.linalg.det(x).numpy(), torch.linalg.det(t).detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(RuntimeError, match="square"):
        gt.linalg.det(gt.ones(2, 3))
    run_ranks(_det_on_two_ranks, 2)
