"""paddle.nn.initializer and ParamAttr as Paddle documents them: exact values of the deterministic
initializers, statistics (fixed seed) of the random ones with Paddle's fans ([in, out] for a
Linear weight), and the ways a parameter is made (ParamAttr, weight_attr / bias_attr,
create_parameter, set_global_initializer, init(param))."""
import math

import numpy as np
import pytest

import globaltensor.paddle as paddle

I = paddle.nn.initializer


def _param(shape, init):
    paddle.seed(2024)
    return paddle.create_parameter(shape, "float32", default_initializer=init).numpy().astype(np.float64)


def test_deterministic_initializers_give_exact_values():
    np.testing.assert_array_equal(_param([2, 3], I.Constant(0.5)), np.full((2, 3), 0.5))
    value = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(_param([2, 3], I.Assign(value)), value)
    np.testing.assert_array_equal(_param([2, 3], I.Assign(paddle.to_tensor(value))), value)
    dirac = _param([2, 3, 3], I.Dirac())  # Paddle's documented example: a 1 at the centre of d -> d
    want = np.zeros((2, 3, 3))
    want[0, 0, 1] = want[1, 1, 1] = 1
    np.testing.assert_array_equal(dirac, want)
    grouped = _param([4, 2, 3], I.Dirac(groups=2))
    want = np.zeros((4, 2, 3))
    for out, inp in ((0, 0), (1, 1), (2, 0), (3, 1)):
        want[out, inp, 1] = 1
    np.testing.assert_array_equal(grouped, want)
    bilinear = _param([1, 2, 4, 4], I.Bilinear())
    f, c = 2, 3 / 4  # f = ceil(K / 2), c = (2f - 1 - f % 2) / 2f
    ramp = 1 - np.abs(np.arange(4) / f - c)
    np.testing.assert_allclose(bilinear[0, 1], np.outer(ramp, ramp))
    with pytest.raises(ValueError, match="shape"):
        _param([3, 3], I.Assign(np.zeros(4)))


def test_calculate_gain_is_paddles_table():
    assert I.calculate_gain("tanh") == 5.0 / 3 and I.calculate_gain("relu") == math.sqrt(2.0)
    assert I.calculate_gain("leaky_relu") == math.sqrt(2.0 / (1 + 0.01 ** 2))
    assert I.calculate_gain("leaky_relu", 1.0) == 1.0 and I.calculate_gain("selu") == 0.75
    assert I.calculate_gain("conv2d") == 1 and I.calculate_gain("sigmoid") == 1
    with pytest.raises(ValueError, match="not supported"):
        I.calculate_gain("swish")


def _close(a, mean, std):
    """mean and std of the sample within 5 standard errors (of a normal sample's; a uniform's are smaller)."""
    n = a.size
    assert abs(a.mean() - mean) < 5 * std / math.sqrt(n), (a.mean(), mean)
    assert abs(a.std() - std) < 5 * std / math.sqrt(2 * n), (a.std(), std)


def _uniform_ok(a, low, high):
    assert a.min() >= low and a.max() < high
    _close(a, (low + high) / 2, (high - low) / math.sqrt(12))


def _normal_ok(a, mean, std):
    _close(a, mean, std)


def test_random_initializers_statistics():
    _normal_ok(_param([300, 200], I.Normal(1.0, 2.0)), 1.0, 2.0)
    _uniform_ok(_param([300, 200], I.Uniform(-2.0, 3.0)), -2.0, 3.0)
    _uniform_ok(_param([300, 200], I.Uniform()), -1.0, 1.0)  # Paddle's default range
    t = _param([300, 200], I.TruncatedNormal(0.5, 1.0, a=-0.5, b=2.0))  # bounds in the values' units
    assert t.min() >= -0.5 and t.max() <= 2.0
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    lo, hi = -1.0, 1.5  # (a - mean) / std, (b - mean) / std
    z = cdf(hi) - cdf(lo)
    mean = 0.5 + (pdf(lo) - pdf(hi)) / z
    var = 1 + (lo * pdf(lo) - hi * pdf(hi)) / z - ((pdf(lo) - pdf(hi)) / z) ** 2
    _normal_ok(t, mean, math.sqrt(var))
    default = _param([300, 200], I.TruncatedNormal())
    assert default.min() >= -2.0 and default.max() <= 2.0


def test_xavier_and_kaiming_use_paddles_fans():
    fan_in, fan_out = 400, 100  # a Linear weight is [in, out]: fan_in is dim 0
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    _uniform_ok(_param([fan_in, fan_out], I.XavierUniform()), -limit, limit)
    _normal_ok(_param([fan_in, fan_out], I.XavierNormal(gain=2.0)), 0.0, 2.0 * math.sqrt(2.0 / (fan_in + fan_out)))
    _normal_ok(_param([fan_in, fan_out], I.XavierNormal(fan_in=10, fan_out=40)), 0.0, math.sqrt(2.0 / 50))
    _normal_ok(_param([fan_in, fan_out], I.KaimingNormal()), 0.0, math.sqrt(2.0) / math.sqrt(fan_in))
    _normal_ok(_param([fan_in, fan_out], I.KaimingNormal(mode="fan_out")), 0.0, math.sqrt(2.0) / math.sqrt(fan_out))
    limit = math.sqrt(2.0 / (1 + 0.2 ** 2)) * math.sqrt(3.0 / fan_in)
    _uniform_ok(_param([fan_in, fan_out], I.KaimingUniform(negative_slope=0.2, nonlinearity="leaky_relu")),
                -limit, limit)
    _uniform_ok(_param([fan_in, fan_out], I.KaimingUniform(fan_in=16)), -math.sqrt(6 / 16), math.sqrt(6 / 16))
    kernel = _param([64, 32, 3, 3], I.KaimingNormal())  # [out, in, k, k]: fan_in = in * 9
    _normal_ok(kernel, 0.0, math.sqrt(2.0 / (32 * 9)))
    with pytest.raises(ValueError, match="fan_in to None"):
        I.KaimingNormal(fan_in=3, mode="fan_out")


def test_orthogonal_rows_or_columns_are_orthonormal():
    wide = _param([4, 6], I.Orthogonal(gain=2.0))
    np.testing.assert_allclose(wide @ wide.T, 4.0 * np.eye(4), atol=1e-5)
    tall = _param([6, 2, 2], I.Orthogonal()).reshape(6, 4)
    np.testing.assert_allclose(tall.T @ tall, np.eye(4), atol=1e-5)


def test_param_attr_layers_and_direct_calls():
    paddle.seed(7)
    attr = paddle.ParamAttr(name="fc_w", initializer=I.Constant(0.25), learning_rate=0.5)
    fc = paddle.nn.Linear(3, 2, weight_attr=attr, bias_attr=I.Constant(1.0))  # an initializer is an attr too
    assert fc.weight.name == "fc_w" and fc.weight.optimize_attr == {"learning_rate": 0.5}
    np.testing.assert_array_equal(fc.weight.numpy(), 0.25)
    np.testing.assert_array_equal(fc.bias.numpy(), 1.0)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    fc(paddle.to_tensor(x)).sum().backward()
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=fc.parameters())
    opt.step()  # the weight moves by 0.1 * 0.5 * grad, the bias by 0.1 * grad
    np.testing.assert_allclose(fc.weight.numpy(), 0.25 - 0.05 * np.repeat(x.sum(0)[:, None], 2, 1), rtol=1e-6)
    np.testing.assert_allclose(fc.bias.numpy(), 1.0 - 0.1 * 2, rtol=1e-6)
    assert opt.get_lr() == 0.1
    opt.set_lr(0.2)
    assert opt.get_lr() == 0.2 and sorted(g["lr"] for g in opt.param_groups) == [0.1, 0.2]
    frozen = paddle.nn.Linear(3, 2, weight_attr=paddle.ParamAttr(trainable=False), bias_attr=False)
    assert frozen.bias is None and frozen.weight.stop_gradient and not frozen.weight.trainable
    conv = paddle.nn.Conv2D(4, 8, 3, weight_attr=paddle.ParamAttr(initializer=I.Constant(0.1)), bias_attr=False)
    assert conv.bias is None and float(conv.weight.sum()) == pytest.approx(0.1 * 8 * 4 * 9, rel=1e-5)
    paddle.seed(7)
    _normal_ok(paddle.nn.Conv2D(32, 64, 3).weight.numpy(), 0.0, math.sqrt(2.0 / (32 * 9)))  # Paddle's default
    norm = paddle.nn.LayerNorm(4, weight_attr=I.Constant(2.0), bias_attr=False)
    assert norm.bias is None and float(norm.weight.sum()) == 8.0
    p = paddle.create_parameter([3, 2], "float32", attr=paddle.ParamAttr(initializer=I.Constant(3.0)),
                                default_initializer=I.Constant(9.0))  # the attr's initializer wins
    np.testing.assert_array_equal(p.numpy(), 3.0)
    assert I.Constant(-1.0)(p) is None  # Paddle's dygraph: fills in place, returns None
    np.testing.assert_array_equal(p.numpy(), -1.0)
    assert p.dtype == paddle.float32 and not p.stop_gradient


def test_set_global_initializer():
    I.set_global_initializer(I.Constant(0.5), I.Constant(-0.5))
    try:
        fc = paddle.nn.Linear(2, 3)
        np.testing.assert_array_equal(fc.weight.numpy(), 0.5)
        np.testing.assert_array_equal(fc.bias.numpy(), -0.5)
        prelu = paddle.nn.PReLU()  # the global initializer overrides a layer's own default, as Paddle's
        np.testing.assert_array_equal(prelu.weight.numpy(), 0.5)
        fc = paddle.nn.Linear(2, 3, weight_attr=paddle.ParamAttr(initializer=I.Constant(2.0)))
        np.testing.assert_array_equal(fc.weight.numpy(), 2.0)  # a ParamAttr's initializer wins
    finally:
        I.set_global_initializer(None)
    fc = paddle.nn.Linear(2, 3)
    assert float(np.abs(fc.bias.numpy()).sum()) == 0.0 and len(np.unique(fc.weight.numpy())) == 6
