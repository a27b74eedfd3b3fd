"""OneFlow's quantization-aware training layers against numpy formulas (OneFlow's kernels'): observers,
fake quantization (straight-through gradient), quantization; on 2 ranks with a split input; CoinFlip."""
import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks

nn = gt.nn


def _ref_scale(w, bit, scheme, per_layer):
    rows = w.reshape(1, -1) if per_layer else w.reshape(w.shape[0], -1)
    if scheme == "symmetric":
        return np.abs(rows).max(1) / (2.0 ** (bit - 1) - 1), np.zeros(len(rows))
    hi, lo = rows.max(1), rows.min(1)
    scale = (hi - lo) / (2.0 ** bit - 1)
    return scale, -np.round(lo / scale)


def _ref_fake(w, scale, zero, bit, scheme):
    shape = (-1,) + (1,) * (w.ndim - 1) if len(scale) > 1 else ()
    scale, zero = scale.reshape(shape), zero.reshape(shape)
    if scheme == "symmetric":
        upper = 2.0 ** (bit - 1) - 1
        return np.clip(np.round(w / scale), -upper - 1, upper) * scale
    zero = np.clip(np.round(zero), 0, 255)
    return (np.clip(np.round(w / scale + zero), 0, 2.0 ** bit - 1) - zero) * scale


@pytest.mark.parametrize("bit", [8, 2])
@pytest.mark.parametrize("scheme", ["symmetric", "affine"])
@pytest.mark.parametrize("per_layer", [True, False])
def test_observer_and_fake_quantization_equal_the_kernels_formulas(bit, scheme, per_layer):
    w = (np.random.default_rng(bit).random((6, 4, 5)) - 0.5).astype(np.float32)
    x = gt.tensor(w, requires_grad=True)
    scale, zero = nn.MinMaxObserver("google", bit, scheme, per_layer)(x)
    ref_scale, ref_zero = _ref_scale(w.astype(np.float64), bit, scheme, per_layer)
    np.testing.assert_allclose(scale.numpy(), ref_scale, rtol=1e-5)
    np.testing.assert_allclose(zero.numpy(), ref_zero, atol=1)
    out = nn.FakeQuantization("google", bit, scheme)(x, scale, zero)
    np.testing.assert_allclose(out.numpy(), _ref_fake(w, scale.numpy(), zero.numpy(), bit, scheme), atol=1e-6)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones_like(w))  # straight through
    q = nn.Quantization("google", bit, scheme)(x, scale, zero)
    np.testing.assert_allclose(q.numpy() * (scale.numpy().reshape((-1, 1, 1)) if not per_layer else scale.numpy()),
                               _ref_fake(w, scale.numpy(), zero.numpy(), bit, scheme) +
                               (0 if scheme == "symmetric" else
                                np.clip(np.round(zero.numpy()), 0, 255).reshape((-1, 1, 1) if not per_layer else ())
                                * (scale.numpy().reshape((-1, 1, 1)) if not per_layer else scale.numpy())),
                               atol=1e-5)


def test_moving_average_observer_moves_until_the_stop_step():
    rng = np.random.default_rng(0)
    m = nn.MovingAverageMinMaxObserver(stop_update_after_iters=2, quantization_scheme="affine", momentum=0.9)
    hi = lo = 0.0
    for step in range(4):
        a = rng.standard_normal(50).astype(np.float32) * (step + 1)
        scale, zero = m(gt.tensor(a), gt.tensor([step]))
        if step <= 2:
            hi = a.max() if hi == 0 else hi * 0.9 + a.max() * 0.1
            lo = a.min() if lo == 0 else lo * 0.9 + a.min() * 0.1
        np.testing.assert_allclose(m.moving_max.numpy(), [hi], rtol=1e-5)
        np.testing.assert_allclose(m.moving_min.numpy(), [lo], rtol=1e-5)
        np.testing.assert_allclose(scale.numpy(), [(hi - lo) / 255], rtol=1e-5)
        np.testing.assert_allclose(zero.numpy(), [-np.round(lo / ((hi - lo) / 255))], atol=1)
    m.eval()
    before = m.moving_max.numpy().copy()
    m(gt.tensor(rng.standard_normal(50).astype(np.float32) * 100), gt.tensor([0]))
    np.testing.assert_array_equal(m.moving_max.numpy(), before)


def _global_observer(sbp):
    w = (np.random.default_rng(3).random((4, 6, 5)) - 0.5).astype(np.float32)
    x = gt.tensor(w).to_global(gt.placement("cpu", [0, 1]), gt.sbp.broadcast).to_global(sbp=sbp)
    scale, zero = nn.MinMaxObserver("google", 8, "affine", False)(x)
    out = nn.FakeQuantization("google", 8, "affine")(x, scale, zero)
    flips = nn.CoinFlip(16, 7, 0.5, placement=gt.placement("cpu", [0, 1]), sbp=gt.sbp.split(0))()
    return scale.numpy(), zero.numpy(), out.numpy(), flips.numpy(), flips.sbp


@pytest.mark.timeout(120)
@pytest.mark.parametrize("dim", [0, 1])
def test_observer_on_two_ranks_with_a_split_input(dim):
    w = (np.random.default_rng(3).random((4, 6, 5)) - 0.5).astype(np.float32)
    ref_scale, ref_zero = _ref_scale(w.astype(np.float64), 8, "affine", False)
    results = run_ranks(_global_observer, 2, gt.sbp.split(dim))
    for scale, zero, out, flips, sbp in results:
        np.testing.assert_allclose(scale, ref_scale, rtol=1e-5)
        np.testing.assert_allclose(zero, ref_zero, atol=1)
        np.testing.assert_allclose(out, _ref_fake(w, scale, zero, 8, "affine"), atol=1e-6)
        assert flips.dtype == np.int8 and set(np.unique(flips)) <= {0, 1} and sbp == (gt.sbp.split(0),)
    np.testing.assert_array_equal(results[0][3], results[1][3])


def test_coin_flip_probabilities_and_seed():
    assert nn.CoinFlip(64, 1, 0.0)().numpy().sum() == 0
    assert nn.CoinFlip(64, 1, 1.0)().numpy().sum() == 64
    np.testing.assert_array_equal(nn.CoinFlip(32, 5, 0.5)().numpy(), nn.CoinFlip(32, 5, 0.5)().numpy())
    with pytest.raises(ValueError, match="probability"):
        nn.CoinFlip(4, 1, 1.5)
