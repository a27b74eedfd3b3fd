"""paddle.nn.functional's activations and paddle.nn's activation layers with Paddle's argument
names and defaults: values and gradients against torch (Paddle's arguments translated to torch's)."""
import numpy as np
import pytest
import torch

import globaltensor.paddle as paddle

F = paddle.nn.functional
TF = torch.nn.functional


def _torch_hardsigmoid(x, slope=0.1666667, offset=0.5):
    return torch.clamp(x * slope + offset, 0.0, 1.0)


def _torch_maxout(x, groups, axis=1):
    shape = list(x.shape[:axis]) + [x.shape[axis] // groups, groups] + list(x.shape[axis + 1:])
    return x.reshape(shape).amax(axis + 1)


CASES = {  # name: (Paddle's call, torch's equivalent)
    "relu": (F.relu, TF.relu),
    "sigmoid": (F.sigmoid, torch.sigmoid),
    "tanh": (F.tanh, torch.tanh),
    "silu": (F.silu, TF.silu),
    "swish": (F.swish, TF.silu),
    "mish": (F.mish, TF.mish),
    "gelu": (F.gelu, TF.gelu),
    "gelu_tanh": (lambda x: F.gelu(x, approximate=True), lambda x: TF.gelu(x, approximate="tanh")),
    "hardswish": (F.hardswish, TF.hardswish),
    "hardsigmoid": (F.hardsigmoid, _torch_hardsigmoid),
    "hardsigmoid_args": (lambda x: F.hardsigmoid(x, slope=0.3, offset=0.2),
                         lambda x: _torch_hardsigmoid(x, 0.3, 0.2)),
    "elu": (lambda x: F.elu(x, alpha=0.7), lambda x: TF.elu(x, 0.7)),
    "celu": (lambda x: F.celu(x, alpha=0.5), lambda x: TF.celu(x, 0.5)),
    "selu": (F.selu, TF.selu),
    "selu_args": (lambda x: F.selu(x, scale=1.2, alpha=1.5), lambda x: 1.2 * TF.elu(x, 1.5)),
    "leaky_relu": (F.leaky_relu, TF.leaky_relu),
    "leaky_relu_slope": (lambda x: F.leaky_relu(x, negative_slope=0.3), lambda x: TF.leaky_relu(x, 0.3)),
    "relu6": (F.relu6, TF.relu6),
    "softplus": (F.softplus, TF.softplus),
    "softplus_args": (lambda x: F.softplus(x, beta=2, threshold=3), lambda x: TF.softplus(x, 2, 3)),
    "softsign": (F.softsign, TF.softsign),
    "tanhshrink": (F.tanhshrink, TF.tanhshrink),
    "log_sigmoid": (F.log_sigmoid, TF.logsigmoid),
    "hardtanh": (F.hardtanh, TF.hardtanh),
    "hardtanh_args": (lambda x: F.hardtanh(x, min=-0.5, max=1.5), lambda x: TF.hardtanh(x, -0.5, 1.5)),
    "hardshrink": (lambda x: F.hardshrink(x, threshold=0.6), lambda x: TF.hardshrink(x, 0.6)),
    "softshrink": (lambda x: F.softshrink(x, threshold=0.4), lambda x: TF.softshrink(x, 0.4)),
    "thresholded_relu": (F.thresholded_relu, lambda x: TF.threshold(x, 1.0, 0.0)),
    "thresholded_relu_value": (lambda x: F.thresholded_relu(x, 0.5, 2.0), lambda x: TF.threshold(x, 0.5, 2.0)),
    "rrelu_eval": (lambda x: F.rrelu(x, training=False), lambda x: TF.rrelu(x, training=False)),
    "glu": (lambda x: F.glu(x, axis=1), lambda x: TF.glu(x, 1)),
    "maxout": (lambda x: F.maxout(x, groups=2, axis=1), lambda x: _torch_maxout(x, 2, 1)),
    "maxout_last": (lambda x: F.maxout(x, 3, axis=-1), lambda x: _torch_maxout(x, 3, 2)),
    "softmax": (F.softmax, lambda x: torch.softmax(x, -1)),
    "softmax_axis_dtype": (lambda x: F.softmax(x, axis=0, dtype="float32"),
                           lambda x: torch.softmax(x, 0, dtype=torch.float32)),
    "log_softmax": (lambda x: F.log_softmax(x, axis=1), lambda x: torch.log_softmax(x, 1)),
}


def _x():
    rng = np.random.default_rng(3)
    x = rng.uniform(-4, 4, (2, 4, 6))
    return np.where(np.abs(np.abs(x) - np.round(np.abs(x) * 2) / 2) < 0.02, x + 0.05, x)  # away from kinks


@pytest.mark.parametrize("name", sorted(CASES))
def test_activation_matches_torch_forward_and_backward(name):
    ours, theirs = CASES[name]
    x = _x()
    t = paddle.to_tensor(x, stop_gradient=False)
    y = ours(t)
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-6)
    w = np.random.default_rng(4).standard_normal(tuple(ty.shape))
    (y * paddle.to_tensor(w.astype(y.numpy().dtype))).sum().backward()
    (ty * torch.tensor(w, dtype=ty.dtype)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_prelu_channels_first_and_last():
    x = _x()
    w = np.array([0.1, 0.2, 0.3, 0.4])
    t, tw = paddle.to_tensor(x, stop_gradient=False), paddle.to_tensor(w, stop_gradient=False)
    rx, rw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    F.prelu(t, tw).sum().backward()
    TF.prelu(rx, rw).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), rx.grad.numpy())
    np.testing.assert_allclose(tw.grad.numpy(), rw.grad.numpy())
    last = np.moveaxis(x, 1, -1)
    np.testing.assert_allclose(F.prelu(paddle.to_tensor(last), tw, data_format="NLC").numpy(),
                               np.moveaxis(TF.prelu(torch.tensor(x), torch.tensor(w)).numpy(), 1, -1))


def test_rrelu_training_slopes_lie_between_lower_and_upper():
    paddle.seed(1)
    x = -np.ones((2000,))
    y = F.rrelu(paddle.to_tensor(x), 0.1, 0.3).numpy()  # training=True is Paddle's default
    assert (-y).min() >= 0.1 and (-y).max() < 0.3 and abs((-y).mean() - 0.2) < 0.01


def test_gumbel_softmax_and_in_place_forms():
    paddle.seed(2)
    x = paddle.to_tensor(_x()[0])
    soft = F.gumbel_softmax(x, temperature=0.5)
    np.testing.assert_allclose(soft.numpy().sum(-1), 1.0)
    hard = F.gumbel_softmax(x, hard=True).numpy()
    assert set(np.unique(hard)) == {0.0, 1.0} and (hard.sum(-1) == 1).all()
    for fn, inplace, kw in ((F.relu, F.relu_, {}), (F.elu, F.elu_, {"alpha": 0.5}), (F.softmax, F.softmax_, {}),
                            (F.hardtanh, F.hardtanh_, {"min": -0.5}), (F.leaky_relu, F.leaky_relu_, {}),
                            (F.thresholded_relu, F.thresholded_relu_, {"threshold": 0.5}), (F.tanh, F.tanh_, {})):
        t = paddle.to_tensor(_x())
        want = fn(t, **kw).numpy()
        assert inplace(t, **kw) is t
        np.testing.assert_allclose(t.numpy(), want)


LAYERS = [  # (layer, the functional call it is)
    (paddle.nn.CELU(0.5), lambda x: F.celu(x, 0.5)), (paddle.nn.ELU(alpha=0.3), lambda x: F.elu(x, 0.3)),
    (paddle.nn.GELU(True), lambda x: F.gelu(x, True)), (paddle.nn.GLU(axis=1), lambda x: F.glu(x, 1)),
    (paddle.nn.Hardshrink(0.7), lambda x: F.hardshrink(x, 0.7)), (paddle.nn.Hardsigmoid(), F.hardsigmoid),
    (paddle.nn.Hardswish(), F.hardswish), (paddle.nn.Hardtanh(-2.0, 2.0), lambda x: F.hardtanh(x, -2.0, 2.0)),
    (paddle.nn.LeakyReLU(0.2), lambda x: F.leaky_relu(x, 0.2)), (paddle.nn.LogSigmoid(), F.log_sigmoid),
    (paddle.nn.LogSoftmax(1), lambda x: F.log_softmax(x, 1)), (paddle.nn.Maxout(2), lambda x: F.maxout(x, 2)),
    (paddle.nn.Mish(), F.mish), (paddle.nn.ReLU(), F.relu), (paddle.nn.ReLU6(), F.relu6),
    (paddle.nn.SELU(1.1, 1.2), lambda x: F.selu(x, 1.1, 1.2)), (paddle.nn.Sigmoid(), F.sigmoid),
    (paddle.nn.Silu(), F.silu), (paddle.nn.Softmax(0), lambda x: F.softmax(x, 0)),
    (paddle.nn.Softmax2D(), lambda x: F.softmax(x, -3)), (paddle.nn.Softplus(2, 5), lambda x: F.softplus(x, 2, 5)),
    (paddle.nn.Softshrink(0.2), lambda x: F.softshrink(x, 0.2)), (paddle.nn.Softsign(), F.softsign),
    (paddle.nn.Swish(), F.swish), (paddle.nn.Tanh(), F.tanh), (paddle.nn.Tanhshrink(), F.tanhshrink),
    (paddle.nn.ThresholdedReLU(0.5, 1.0), lambda x: F.thresholded_relu(x, 0.5, 1.0)),
]


def test_layers_are_their_functions_with_paddles_reprs():
    x = paddle.to_tensor(_x())
    for layer, call in LAYERS:
        np.testing.assert_allclose(layer(x).numpy(), call(x).numpy(), err_msg=type(layer).__name__)
    assert repr(paddle.nn.Hardtanh(-2.0, 2.0)) == "Hardtanh(min=-2.0, max=2.0)"
    assert repr(paddle.nn.ELU(0.5)) == "ELU(alpha=0.5)" and repr(paddle.nn.Silu()) == "Silu(inplace=False)"
    rrelu = paddle.nn.RReLU(0.1, 0.3)
    rrelu.eval()
    np.testing.assert_allclose(rrelu(x).numpy(), F.rrelu(x, 0.1, 0.3, training=False).numpy())
    with pytest.raises(TypeError, match="unexpected"):
        paddle.nn.ELU(beta=1.0)
