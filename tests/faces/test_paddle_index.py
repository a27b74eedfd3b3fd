"""docs/paddle.md accounts for every name of Paddle's API index (docs/targets/), and is current;
the Paddle-named functions added for it compute Paddle's formulas (against numpy), with
gradients that match finite differences."""
import os
import sys

import numpy as np
import pytest

import globaltensor.paddle as paddle

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "docs"))
import paddle_index  # noqa: E402

F = paddle.nn.functional


def test_the_table_in_docs_is_current():
    assert paddle_index.main(["--check"]) == 0, "run: python docs/paddle_index.py"


def test_every_name_is_there_or_has_a_reason():
    """Every name of the index is in the table once; one the table finds is a function or class
    of globaltensor.paddle; an absent top-level name has a reason of its own, not 'not built yet'."""
    sections = paddle_index.names_by_section()
    assert sum(len(s) for s in sections) == 709
    for section, names in enumerate(sections):
        for name in names:
            found, text = paddle_index.status(section, name)
            if found:
                obj = paddle
                for part in text.strip("`").split(".")[1:]:
                    obj = getattr(obj, part)
                assert callable(obj), text
            elif section == 0:
                assert name in paddle_index.REASONS, name


def _np_softplus(x):
    return np.log1p(np.exp(x))


ACTIVATIONS = {  # name: (call, numpy formula from Paddle's docs)
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6)),
    "elu": (lambda x: F.elu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1))),
    "selu": (F.selu,
             lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1))),
    "softplus": (F.softplus, _np_softplus),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
    "softshrink": (F.softshrink, lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0))),
    "hardshrink": (F.hardshrink, lambda x: np.where(np.abs(x) > 0.5, x, 0)),
    "hardtanh": (F.hardtanh, lambda x: np.clip(x, -1, 1)),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x * 0.1666667 + 0.5, 0, 1)),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "swish": (F.swish, lambda x: x / (1 + np.exp(-x))),
    "log_sigmoid": (F.log_sigmoid, lambda x: -_np_softplus(-x)),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
    "thresholded_relu": (F.thresholded_relu, lambda x: np.where(x > 1.0, x, 0)),
    "leaky_relu": (F.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x)),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_compute_paddles_formula_and_its_gradient(name):
    call, formula = ACTIVATIONS[name]
    x = np.array([-4.1, -2.9, -1.3, -0.6, -0.2, 0.3, 0.7, 1.2, 2.6, 3.3, 7.1])  # away from the kinks
    t = paddle.to_tensor(x, stop_gradient=False)
    y = call(t)
    np.testing.assert_allclose(y.numpy(), formula(x), rtol=1e-6, atol=1e-7)
    y.sum().backward()
    eps = 1e-6
    numeric = (formula(x + eps) - formula(x - eps)) / (2 * eps)
    np.testing.assert_allclose(t.grad.numpy(), numeric, rtol=1e-5, atol=1e-6)


def test_layers_losses_and_helpers():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3))
    t = paddle.to_tensor(x)
    assert np.allclose(paddle.nn.Softplus(beta=2)(t).numpy(), np.log1p(np.exp(2 * x)) / 2)
    assert np.allclose(paddle.nn.LogSoftmax(axis=0)(t).numpy(), x - np.log(np.exp(x).sum(0)))
    p = rng.uniform(0.05, 0.95, (4, 3))
    label = (rng.random((4, 3)) > 0.5).astype(np.float64)
    want = -(label * np.log(p) + (1 - label) * np.log(1 - p)).mean()
    assert np.isclose(float(F.binary_cross_entropy(paddle.to_tensor(p), paddle.to_tensor(label))), want)
    d = x - label
    huber = np.where(np.abs(d) < 0.5, 0.5 * d ** 2, 0.5 * (np.abs(d) - 0.25))  # delta 0.5
    assert np.isclose(float(F.smooth_l1_loss(t, paddle.to_tensor(label), delta=0.5)), huber.mean())
    assert np.isclose(float(paddle.nn.SmoothL1Loss()(t, paddle.to_tensor(label))),
                      np.where(np.abs(d) < 1, 0.5 * d ** 2, np.abs(d) - 0.5).mean())
    np.testing.assert_array_equal(F.one_hot(paddle.to_tensor(np.array([2, 0])), 3).numpy(), [[0, 0, 1], [1, 0, 0]])
    np.testing.assert_allclose(F.normalize(t).numpy(), x / np.linalg.norm(x, axis=1, keepdims=True))
    np.testing.assert_allclose(F.cosine_similarity(t, t * 2).numpy(), np.ones(4))
    np.testing.assert_allclose(F.label_smooth(paddle.to_tensor(label), epsilon=0.3).numpy(), 0.7 * label + 0.1)
    assert np.isclose(float(paddle.nn.L1Loss("sum")(t, paddle.to_tensor(label))), np.abs(x - label).sum())
    prelu = paddle.nn.PReLU(3)
    np.testing.assert_allclose(prelu(t).numpy(), np.where(x > 0, x, 0.25 * x), rtol=1e-6)
    assert paddle.nn.SyncBatchNorm.convert_sync_batchnorm(prelu) is prelu
    with pytest.raises(NotImplementedError, match="exclusive"):
        F.avg_pool2d(paddle.ones([1, 1, 4, 4]), 2, padding=1)


def test_top_level_utilities():
    x = paddle.ones([2, 3])
    np.testing.assert_array_equal(paddle.shape(x).numpy(), [2, 3])
    assert int(paddle.rank(x).numpy()) == 2 and not bool(paddle.is_empty(x).numpy())
    assert paddle.is_compiled_with_xpu() is False and paddle.get_cudnn_version() is None
    y = paddle.assign(x)
    y.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), 1)  # assign copies
    out = paddle.zeros([2, 3])
    assert paddle.assign(np.full((2, 3), 5.0, np.float32), out) is out and float(out.sum()) == 30
    layer = paddle.nn.Linear(3, 2, weight_attr=paddle.ParamAttr(initializer=lambda p: p.fill_(0.5), trainable=False))
    assert float(layer.weight.sum()) == 3.0 and not layer.weight.requires_grad
    state = paddle.get_cuda_rng_state()
    a = paddle.rand([3]).numpy()
    paddle.set_cuda_rng_state(state)
    np.testing.assert_array_equal(paddle.rand([3]).numpy(), a)
    info = paddle.summary(paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.ReLU(), paddle.nn.Linear(8, 2)),
                          (1, 4))
    assert info == {"total_params": 58, "trainable_params": 58}
    with paddle.device_guard("cpu"):
        pass
