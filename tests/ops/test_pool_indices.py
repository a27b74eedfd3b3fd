"""max_pool{1,2,3}d(return_indices=True) and max_unpool{1,2,3}d against torch: values, PyTorch's flat
indices, gradients; on 2 ranks with the input split on batch, channels or a pooled dim."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks

F = gt.nn.functional
CASES = [  # spatial, input shape, pooling arguments
    (1, (2, 3, 11), dict(kernel_size=3, stride=2, padding=1)),
    (2, (2, 3, 7, 9), dict(kernel_size=(3, 2), stride=2, padding=1)),
    (2, (2, 4, 6, 6), dict(kernel_size=2)),
    (2, (1, 2, 7, 9), dict(kernel_size=(3, 2), stride=2, padding=1, dilation=(1, 2), ceil_mode=True)),
    (3, (1, 2, 5, 6, 7), dict(kernel_size=2, stride=(1, 2, 2))),
]


def _torch(spatial, x, kw):
    tx = torch.tensor(x, requires_grad=True)
    out, idx = getattr(torch.nn.functional, f"max_pool{spatial}d")(tx, return_indices=True, **kw)
    unpool_kw = {k: v for k, v in kw.items() if k in ("kernel_size", "stride", "padding")}
    unpool_kw["output_size"] = x.shape[-spatial:]  # the default size can be short of an index with padding
    plain = "dilation" not in kw and not kw.get("ceil_mode")
    up = getattr(torch.nn.functional, f"max_unpool{spatial}d")(out, idx, **unpool_kw) if plain else out
    (up * up).sum().backward()
    return out.detach().numpy(), idx.numpy(), up.detach().numpy(), tx.grad.numpy(), plain, unpool_kw


def _ours(spatial, x, kw, plain, unpool_kw, placement=None, sbp=None):
    gx = gt.tensor(x, requires_grad=True)
    if placement is not None:
        gx = gt.tensor(x).to_global(placement, gt.sbp.broadcast).to_global(sbp=sbp).requires_grad_()
    out, idx = getattr(F, f"max_pool{spatial}d")(gx, return_indices=True, **kw)
    up = getattr(F, f"max_unpool{spatial}d")(out, idx, **unpool_kw) if plain else out
    (up * up).sum().backward()
    return out.numpy(), idx.numpy(), up.numpy(), gx.grad.numpy(), str(idx.dtype)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_pool_indices_and_unpool_equal_torch(case):
    spatial, shape, kw = CASES[case]
    x = np.random.default_rng(case).standard_normal(shape).astype(np.float32)
    out, idx, up, grad, plain, unpool_kw = _torch(spatial, x, kw)
    g_out, g_idx, g_up, g_grad, dt = _ours(spatial, x, kw, plain, unpool_kw)
    np.testing.assert_array_equal(g_out, out)
    np.testing.assert_array_equal(g_idx, idx)
    assert dt == "gt.int64"
    np.testing.assert_array_equal(g_up, up)
    np.testing.assert_allclose(g_grad, grad, rtol=1e-6)


def test_unpool_layer_with_output_size_and_module_names():
    x = np.random.default_rng(5).standard_normal((1, 1, 5, 5)).astype(np.float32)
    pool, unpool = gt.nn.MaxPool2d(2, stride=2, return_indices=True), gt.nn.MaxUnpool2d(2, stride=2)
    out, idx = pool(gt.tensor(x))
    tout, tidx = torch.nn.MaxPool2d(2, stride=2, return_indices=True)(torch.tensor(x))
    ours = unpool(out, idx, output_size=(5, 5)).numpy()
    ref = torch.nn.MaxUnpool2d(2, stride=2)(tout, tidx, output_size=(5, 5)).numpy()
    np.testing.assert_array_equal(ours, ref)
    assert repr(unpool) == "MaxUnpool2d(kernel_size=2, stride=2, padding=0)"


def _global_case(case, sbp):
    spatial, shape, kw = CASES[case]
    x = np.random.default_rng(case).standard_normal(shape).astype(np.float32)
    _, _, _, _, plain, unpool_kw = _torch(spatial, x, kw)
    return _ours(spatial, x, kw, plain, unpool_kw, gt.placement("cpu", [0, 1]), sbp)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("dim", [1, 3])
def test_pool_indices_and_unpool_on_two_ranks(dim):
    case = 2  # (2, 4, 6, 6), kernel 2
    spatial, shape, kw = CASES[case]
    x = np.random.default_rng(case).standard_normal(shape).astype(np.float32)
    out, idx, up, grad, _, _ = _torch(spatial, x, kw)
    for rank, (g_out, g_idx, g_up, g_grad, _) in enumerate(run_ranks(_global_case, 2, case, gt.sbp.split(dim))):
        np.testing.assert_array_equal(g_out, out, err_msg=f"rank {rank}")
        np.testing.assert_array_equal(g_idx, idx, err_msg=f"rank {rank}")
        np.testing.assert_array_equal(g_up, up, err_msg=f"rank {rank}")
        np.testing.assert_allclose(g_grad, grad, rtol=1e-6, err_msg=f"rank {rank}")
