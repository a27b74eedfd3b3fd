"""Second derivatives through conv2d/conv1d, max_pool2d, slicing and masked_select, and bfloat16 rounding, against torch."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import globaltensor as gt

RNG = np.random.default_rng(0)


def _both(a):
    return gt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _second_order(ours_fn, theirs_fn, arrays, out_shape=None):
    """d(<dx, v>)/d(inputs, g) of y = f(inputs), through autograd.grad(create_graph=True), both frameworks."""
    pairs = [_both(a) for a in arrays]
    ins, tins = [p[0] for p in pairs], [p[1] for p in pairs]
    y, ty = ours_fn(*ins), theirs_fn(*tins)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-9)
    g, tg = _both(RNG.random(tuple(ty.shape)))
    d = gt.autograd.grad(y, ins, g, create_graph=True)
    td = torch.autograd.grad(ty, tins, tg, create_graph=True)
    vs = [RNG.random(tuple(t.shape)) for t in td]
    total = sum((di * gt.tensor(v)).sum() for di, v in zip(d, vs))
    ttotal = sum((di * torch.tensor(v)).sum() for di, v in zip(td, vs))
    dd = gt.autograd.grad(total, ins + [g])
    tdd = torch.autograd.grad(ttotal, tins + [tg], allow_unused=True)
    for ours, theirs in zip(dd, tdd):
        want = np.zeros(tuple(ours.shape)) if theirs is None else theirs.numpy()
        np.testing.assert_allclose(ours.numpy(), want, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, groups=2), dict(dilation=2, padding=2)])
def test_conv2d_second_derivatives(bias, kw):
    arrays = [RNG.random((2, 4, 7, 7)), RNG.random((6, 4 // kw.get("groups", 1), 3, 3))] + \
        ([RNG.random(6)] if bias else [])
    _second_order(lambda *a: gt.nn.functional.conv2d(*a, **kw), lambda *a: TF.conv2d(*a, **kw), arrays)


def test_conv1d_second_derivatives():
    _second_order(gt.nn.functional.conv1d, TF.conv1d, [RNG.random((2, 3, 9)), RNG.random((4, 3, 3))])


@pytest.mark.parametrize("kernel,stride", [(2, 2), (3, 1)])
def test_max_pool2d_second_derivatives(kernel, stride):
    _second_order(lambda x: gt.nn.functional.max_pool2d(x, kernel, stride),
                  lambda x: TF.max_pool2d(x, kernel, stride), [RNG.random((2, 3, 6, 6))])


def test_avg_and_adaptive_pool_second_derivatives_give_zeros_for_x():
    _second_order(lambda x: gt.nn.functional.avg_pool2d(x, 2), lambda x: TF.avg_pool2d(x, 2),
                  [RNG.random((2, 3, 6, 6))])
    _second_order(lambda x: gt.nn.functional.adaptive_avg_pool2d(x, (4, 3)),
                  lambda x: TF.adaptive_avg_pool2d(x, (4, 3)), [RNG.random((2, 3, 7, 5))])


def test_slicing_and_masked_select_second_derivatives():
    _second_order(lambda x: x[1:3, ::2] * x[0:2, 1:4], lambda x: x[1:3, ::2] * x[0:2, 1:4], [RNG.random((4, 5))])
    m = RNG.random((2, 1, 4)) > 0.5
    _second_order(lambda x: gt.masked_select(x, gt.tensor(m)) ** 2, lambda x: torch.masked_select(x, torch.tensor(m)) ** 2,
                  [RNG.random((2, 3, 1))])


def test_an_input_no_op_read_still_raises_unless_allow_unused():
    x, y = gt.ones(2).requires_grad_(), gt.ones(2).requires_grad_()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        gt.autograd.grad((x * x).sum(), [x, y])


def test_masked_select_broadcasts_and_bool_keys_as_torch():
    a, m = RNG.random((2, 3, 1, 3)), RNG.random((2, 3, 2, 1)) > 0.5
    np.testing.assert_array_equal(gt.masked_select(gt.tensor(a), gt.tensor(m)).numpy(),
                                  torch.masked_select(torch.tensor(a), torch.tensor(m)).numpy())
    x, t = gt.tensor(np.arange(60.0).reshape(3, 4, 5)), torch.arange(60.0, dtype=torch.float64).reshape(3, 4, 5)
    for mask in [np.array([True, False, True]), RNG.random((3, 4)) > 0.5]:
        np.testing.assert_array_equal(x[gt.tensor(mask)].numpy(), t[torch.tensor(mask)].numpy())
    np.testing.assert_array_equal(x[gt.tensor(mask), 1].numpy(), t[torch.tensor(mask), 1].numpy())
    for key in ([[0, 1], [0, 1], [1, 0]], [[0], [1]], [[[0], [1]], [[0], [1]], [0, 1]], [0, 2], [[0, 2]]):
        np.testing.assert_array_equal(x[key].numpy(), t[key].numpy())
    y, u = x.clone(), t.clone()
    y[[[0, 1], [1, 0]]] = 5.0
    u[[[0, 1], [1, 0]]] = 5.0
    np.testing.assert_array_equal(y.numpy(), u.numpy())


ACTIVATIONS = ["erfc", "sigmoid", "rsqrt", "exp", "tanh", "F.hardsigmoid", "F.hardswish", "F.logsigmoid",
               "F.silu", "F.softplus", "F.elu", "F.mish", "F.softsign"]


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_bfloat16_activations_round_once_as_torch(name):
    a = RNG.random((64, 16)) + 0.05
    ours = getattr(gt.nn.functional if name.startswith("F.") else gt, name.split(".")[-1])
    theirs = getattr(TF if name.startswith("F.") else torch, name.split(".")[-1])
    y = ours(gt.tensor(a, dtype=gt.bfloat16))
    assert y.dtype == gt.bfloat16
    once = ours(gt.tensor(a, dtype=gt.bfloat16).float()).bfloat16().float().numpy()
    np.testing.assert_array_equal(y.float().numpy(), once)
    want = theirs(torch.tensor(a, dtype=torch.bfloat16)).float().numpy()
    np.testing.assert_allclose(y.float().numpy(), want, rtol=2 ** -7, atol=1e-6)  # one bfloat16 ulp at most


def test_gradient_of_an_output_with_respect_to_itself_is_its_seed():
    a, w, gy = RNG.random((4, 3)) * 4 - 2, RNG.random(3), RNG.random((4, 3))
    (x, tx), (p, tp), (g, tg) = _both(a), _both(w), _both(gy)
    dx, dp = gt.autograd.grad(gt.nn.functional.prelu(x, p), [x, p], g, True, True)
    tdx, tdp = torch.autograd.grad(TF.prelu(tx, tp), [tx, tp], tg, True, True)
    seeds = [RNG.random((4, 3)), RNG.random(3)]
    ours = gt.autograd.grad([dx, dp], [dx, dp, g], [gt.tensor(s) for s in seeds], True, True)
    theirs = torch.autograd.grad([tdx, tdp], [tdx, tdp, tg], [torch.tensor(s) for s in seeds], True, True)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-9)
