"""Issue 35 (s14): ReLU's gradient as one primitive (one C++ pass for float32/float64): the bits of
numpy's g * (x > 0) at every edge value, gradients against torch, a partial g kept partial."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from globaltensor import _native
from conftest import run_ranks


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 1000, 4099])
def test_the_bits_of_numpys_masked_product(dtype, n):
    rng = np.random.default_rng(n)
    x, g = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    edges_x = [np.nan, -0.0, 0.0, np.inf, -np.inf, np.finfo(dtype).smallest_subnormal, -1.0]
    edges_g = [-0.0, np.nan, np.inf, -np.inf, 0.0, -1.0, 2.0]
    for at in (0, max(0, n - 7)):  # in the vector lanes and in the scalar tail
        k = min(7, n - at)
        x[at:at + k], g[at:at + k] = edges_x[:k], edges_g[:k]
    out = np.empty_like(x)
    _native.relu_backward(out, g, x)
    with np.errstate(invalid="ignore"):
        assert out.tobytes() == (g * (x > 0)).tobytes()


def test_relu_gradients_against_torch():
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((5, 7)).astype(np.float32)
    x = gt.tensor(x_np).requires_grad_()
    y = gt.relu(x)
    (g,) = gt.autograd.grad((y * y * y).sum(), [x], create_graph=True)
    g.sum().backward()
    tx = torch.tensor(x_np, requires_grad=True)
    ty = torch.relu(tx)
    (tg,) = torch.autograd.grad((ty * ty * ty).sum(), [tx], create_graph=True)
    tg.sum().backward()
    np.testing.assert_allclose(g.numpy(), tg.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def _partial_and_split():
    from globaltensor.ops._front import apply
    rng = np.random.default_rng(1)
    x_np, g_np = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((6, 4)).astype(np.float32)
    mesh = gt.placement("cpu", [0, 1])
    x = gt.tensor(x_np).to_global(mesh, gt.sbp.broadcast)
    g = gt.tensor(g_np * (gt.env.get_rank() + 1)).to_global(mesh, gt.sbp.partial_sum)  # pieces g and 2g: 3g in all
    xs = x.to_global(sbp=gt.sbp.split(0))
    gs = gt.tensor(g_np).to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    with gt.debug.count_collectives() as counted:
        d = apply("relu_backward", [g, x])
        ds = apply("relu_backward", [gs, xs])
    return dict(counted), tuple(d.sbp), d.to_global(sbp=gt.sbp.broadcast).numpy(), tuple(ds.sbp), \
        ds.to_global(sbp=gt.sbp.broadcast).numpy(), x_np, g_np


def test_partial_gradient_stays_partial():
    for counted, sbp, value, split_sbp, split_value, x_np, g_np in run_ranks(_partial_and_split, 2):
        assert counted == {} and sbp == (gt.sbp.partial_sum,) and split_sbp == (gt.sbp.split(0),)
        np.testing.assert_allclose(value, 3 * g_np * (x_np > 0), rtol=1e-6)
        np.testing.assert_array_equal(split_value, g_np * (x_np > 0))


@pytest.mark.parametrize("order", ["C", "F"])
def test_the_memory_order_is_kept(order):
    from globaltensor.ops.activations import _relu_backward
    rng = np.random.default_rng(2)
    g, x = (np.asarray(rng.standard_normal((9, 13)), np.float32, order=order) for _ in range(2))
    out = _relu_backward(g, x)
    assert out.flags[f"{order}_CONTIGUOUS"] and out.tobytes("A") == (g * (x > 0)).tobytes("A")
