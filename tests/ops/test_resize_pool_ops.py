"""pad, interpolate, the 1-3 d pools, conv3d and the Pad/Upsample/Fold layers against torch
(values and gradients)."""
import itertools

import numpy as np
import pytest
import torch

import globaltensor as gt
import globaltensor.nn as nn
import globaltensor.nn.functional as F

RNG = np.random.default_rng(1)
TF = torch.nn.functional


def _check(fn_gt, fn_torch, *arrays, atol=1e-6):
    g_in = [gt.tensor(a, requires_grad=True) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, ty = fn_gt(*g_in), fn_torch(*t_in)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), atol=atol)
    cot = RNG.standard_normal(tuple(ty.shape))
    (y * gt.tensor(cot)).sum().backward()
    (ty * torch.tensor(cot)).sum().backward()
    for g, t in zip(g_in, t_in):
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), atol=atol)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", [(1, 2), (1, 2, 3, 0), (2, 1, 0, 1, 1, 1)])
def test_pad_matches_torch(mode, pads):
    # torch's reflect/replicate/circular of k dims take a (k + 2)-D input
    x = RNG.standard_normal((2, 3, 4, 5, 6) if mode == "constant" else (2, 3) + (4, 5, 6)[:len(pads) // 2])
    _check(lambda t: F.pad(t, pads, mode), lambda t: TF.pad(t, pads, mode), x)


def test_constant_pad_crops_with_negative_pads_and_fills_value():
    _check(lambda t: F.pad(t, (-1, 2, 1, -2), value=2.5), lambda t: TF.pad(t, (-1, 2, 1, -2), value=2.5),
           RNG.standard_normal((2, 3, 5, 7)))


def test_pad_errors_are_oneflows():
    x = gt.ones(1, 1, 2, 2)
    with pytest.raises(RuntimeError, match="Length of pad must be even but instead it equals 3"):
        F.pad(x, (1, 1, 1))
    with pytest.raises(RuntimeError, match=r"Pad size should less than or equal to input axes \* 2\."):
        F.pad(gt.ones(1, 1), (1, 1, 1, 1, 1))
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        F.pad(x, (4, 4, 4, 4), mode="reflect")
    with pytest.raises(NotImplementedError, match="Pad mode is test"):
        F.pad(x, (1, 1), mode="test")
    with pytest.raises(TypeError, match=r"pad\(\) missing 1 required positional argument: 'pad'"):
        F.pad(x)  # pylint: disable=no-value-for-parameter


@pytest.mark.parametrize("kw,shape", [
    (dict(scale_factor=2, mode="nearest"), (2, 3, 5, 7)), (dict(size=(7, 4), mode="nearest-exact"), (2, 3, 5, 7)),
    (dict(scale_factor=2, mode="bilinear", align_corners=False), (2, 3, 5, 7)),
    (dict(scale_factor=3, mode="bilinear", align_corners=True), (2, 3, 5, 7)),
    (dict(scale_factor=1.7, mode="bilinear"), (2, 3, 5, 7)),
    (dict(scale_factor=2, mode="bicubic", align_corners=False), (2, 3, 5, 7)),
    (dict(size=(9, 4), mode="bicubic", align_corners=True), (2, 3, 5, 7)),
    (dict(size=(3, 4), mode="area"), (2, 3, 5, 7)), (dict(scale_factor=2, mode="linear"), (2, 3, 6)),
    (dict(scale_factor=3, mode="linear", align_corners=True), (2, 3, 6)), (dict(size=5, mode="nearest"), (2, 3, 6)),
    (dict(scale_factor=2, mode="trilinear"), (1, 2, 3, 4, 5)),
])
def test_interpolate_and_upsample_match_torch(kw, shape):
    x = RNG.standard_normal(shape)
    _check(lambda t: F.interpolate(t, **kw), lambda t: TF.interpolate(t, **kw), x)
    if "size" in kw or "scale_factor" in kw:
        args = {k: v for k, v in kw.items()}
        _check(lambda t: nn.Upsample(**args)(t), lambda t: torch.nn.Upsample(**args)(t), x)


_POOL_SHAPES = {1: (2, 3, 11), 2: (2, 3, 9, 10), 3: (1, 2, 7, 8, 9)}


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_pools_match_torch(spatial):
    x = RNG.standard_normal(_POOL_SHAPES[spatial])
    for k, s, p, ceil, cip in itertools.product([2, 3], [1, 2], [0, 1], [False, True], [False, True]):
        _check(lambda t: getattr(F, f"avg_pool{spatial}d")(t, k, s, p, ceil, cip),
               lambda t: getattr(TF, f"avg_pool{spatial}d")(t, k, s, p, ceil, cip), x)
        _check(lambda t: getattr(nn, f"MaxPool{spatial}d")(k, s, p, 1, False, ceil)(t),
               lambda t: getattr(torch.nn, f"MaxPool{spatial}d")(k, s, p, 1, False, ceil)(t), x)
    _check(lambda t: getattr(F, f"max_pool{spatial}d")(t, 2, 1, 1, 2),
           lambda t: getattr(TF, f"max_pool{spatial}d")(t, 2, 1, 1, 2), x)
    for size in (1, 3, 4):
        _check(lambda t: getattr(nn, f"AdaptiveAvgPool{spatial}d")(size)(t),
               lambda t: getattr(torch.nn, f"AdaptiveAvgPool{spatial}d")(size)(t), x)
        _check(lambda t: getattr(F, f"adaptive_max_pool{spatial}d")(t, size),
               lambda t: getattr(TF, f"adaptive_max_pool{spatial}d")(t, size), x)


def test_conv3d_matches_torch():
    x, w, b = RNG.standard_normal((2, 4, 6, 7, 5)), RNG.standard_normal((6, 2, 3, 2, 3)), RNG.standard_normal(6)
    _check(lambda a, c, d: F.conv3d(a, c, d, (2, 1, 1), (1, 0, 1), (1, 2, 1), 2),
           lambda a, c, d: TF.conv3d(a, c, d, (2, 1, 1), (1, 0, 1), (1, 2, 1), 2), x, w, b, atol=1e-9)


def test_fold_unfold_and_pad_layers_match_torch():
    x = RNG.standard_normal((2, 3, 8, 6))
    _check(lambda t: nn.Unfold(2, 1, 1, 2)(t), lambda t: torch.nn.Unfold(2, 1, 1, 2)(t), x)
    cols = RNG.standard_normal((2, 12, 12))
    _check(lambda t: nn.Fold((8, 6), 2, 1, 0, 2)(t), lambda t: torch.nn.Fold((8, 6), 2, 1, 0, 2)(t), cols)
    for name, args in [("ZeroPad2d", ((1, 2, 0, 1),)), ("ConstantPad1d", (2, 3.5)), ("ReflectionPad2d", (2,)),
                       ("ReplicationPad2d", ((1, 0, 2, 1),)), ("ReflectionPad1d", ((1, 2),))]:
        data = x[0] if name.endswith("1d") else x  # torch's 1-d reflection takes 2-D or 3-D input
        _check(lambda t: getattr(nn, name)(*args)(t), lambda t: getattr(torch.nn, name)(*args)(t), data)


def _second_derivatives(fn_gt, fn_torch, arrays, out_shape):
    """d/d(inputs, cotangent) of <first derivatives, random weights>, against torch (an input that
    the first derivatives do not depend on: None here, zeros in torch)."""
    gy = RNG.standard_normal(out_shape)
    g_in, t_in = [gt.tensor(a, requires_grad=True) for a in arrays], [torch.tensor(a, requires_grad=True) for a in arrays]
    gv, tv = gt.tensor(gy, requires_grad=True), torch.tensor(gy, requires_grad=True)
    g_d = gt.autograd.grad(fn_gt(*g_in), g_in, gv, create_graph=True)
    t_d = torch.autograd.grad(fn_torch(*t_in), t_in, tv, create_graph=True)
    weights = [RNG.standard_normal(tuple(t.shape)) for t in t_d]
    g_sum = sum((a * gt.tensor(c)).sum() for a, c in zip(g_d, weights))
    t_sum = sum((a * torch.tensor(c)).sum() for a, c in zip(t_d, weights))
    for a, b in zip(gt.autograd.grad(g_sum, g_in + [gv], allow_unused=True),
                    torch.autograd.grad(t_sum, t_in + [tv], allow_unused=True)):
        if b is not None:
            np.testing.assert_allclose(a.numpy() if a is not None else 0 * b.numpy(), b.numpy(), atol=1e-9)


def test_conv2d_and_max_pool2d_second_derivatives_match_torch():
    x, w, b = RNG.standard_normal((2, 4, 7, 6)), RNG.standard_normal((6, 2, 3, 3)), RNG.standard_normal(6)
    _second_derivatives(lambda *t: F.conv2d(*t, (2, 1), 1, 1, 2), lambda *t: TF.conv2d(*t, (2, 1), 1, 1, 2),
                        [x, w, b], (2, 6, 4, 6))
    _second_derivatives(lambda t: F.max_pool2d(t, 2, 2), lambda t: TF.max_pool2d(t, 2, 2), [x], (2, 4, 3, 3))
    _second_derivatives(lambda t: F.avg_pool1d(t, 3, 2, 1), lambda t: TF.avg_pool1d(t, 3, 2, 1), [x[:, :, 0]],
                        (2, 4, 3))


def test_conv3d_second_derivatives_match_torch():
    x, w = RNG.standard_normal((2, 2, 4, 5, 4)), RNG.standard_normal((3, 2, 2, 2, 3))
    _second_derivatives(lambda *t: F.conv3d(*t, None, 1, (1, 0, 1)), lambda *t: TF.conv3d(*t, None, 1, (1, 0, 1)),
                        [x, w], (2, 3, 5, 4, 4))
