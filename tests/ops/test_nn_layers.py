"""The layers and losses of real models, against numpy: values, gradients (central
differences in float64), and the same values on global tensors split over 2 ranks."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
import globaltensor.nn.functional as F
from conftest import run_ranks

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5))
Y = RNG.standard_normal((4, 5))
P = RNG.random((4, 5)) * (RNG.random((4, 5)) > 0.2)  # probabilities with zeros
T = RNG.integers(0, 5, 4)
W = RNG.random(5) + 0.5


def _log_softmax(x):
    return x - np.log(np.exp(x).sum(1, keepdims=True))


def _smooth(d, beta=1.0):
    a = np.abs(d)
    return np.where(a < beta, 0.5 * a * a / beta, a - 0.5 * beta)


def _bce(x, y):
    return np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))


def _kl(logq, p):
    return np.where(p > 0, p * (np.log(np.where(p > 0, p, 1)) - logq), 0)


# name: (our function of (x, y) tensors, numpy reference of (x, y) arrays)
CASES = {
    "silu": (lambda x, y: F.silu(x), lambda x, y: x / (1 + np.exp(-x))),
    "leaky_relu": (lambda x, y: F.leaky_relu(x, 0.1), lambda x, y: np.where(x > 0, x, 0.1 * x)),
    "tanh": (lambda x, y: nn.Tanh()(x), lambda x, y: np.tanh(x)),
    "softmax": (lambda x, y: nn.Softmax(1)(x), lambda x, y: np.exp(_log_softmax(x))),
    "log_softmax": (lambda x, y: nn.LogSoftmax(1)(x), lambda x, y: _log_softmax(x)),
    "flatten": (lambda x, y: nn.Flatten(0)(x) * 2, lambda x, y: x.reshape(-1) * 2),
    "l1": (lambda x, y: F.l1_loss(x, y), lambda x, y: np.abs(x - y).mean()),
    "smooth_l1": (lambda x, y: nn.SmoothL1Loss(beta=0.5)(x, y), lambda x, y: _smooth(x - y, 0.5).mean()),
    "nll": (lambda x, y: F.nll_loss(F.log_softmax(x, 1), gt.tensor(T)),
            lambda x, y: -_log_softmax(x)[np.arange(4), T].mean()),
    "nll_weighted": (lambda x, y: nn.NLLLoss(gt.tensor(W), ignore_index=int(T[0]))(F.log_softmax(x, 1), gt.tensor(T)),
                     lambda x, y: (lambda keep: -(_log_softmax(x)[np.arange(4), T] * W[T] * keep).sum()
                                   / (W[T] * keep).sum())(T != T[0])),
    "bce_logits": (lambda x, y: nn.BCEWithLogitsLoss()(x * 10, (y > 0).astype("float64")),
                   lambda x, y: _bce(x * 10, (y > 0)).mean()),
    "bce_pos_weight": (lambda x, y: F.binary_cross_entropy_with_logits(x, (y > 0).astype("float64"),
                                                                       pos_weight=gt.tensor(W)),
                       lambda x, y: (-(W * (y > 0) * np.log(1 / (1 + np.exp(-x)))
                                       + (1 - (y > 0)) * np.log(1 - 1 / (1 + np.exp(-x)))).mean())),
    "kl_div": (lambda x, y: nn.KLDivLoss(reduction="batchmean")(F.log_softmax(x, 1), gt.tensor(P)),
               lambda x, y: _kl(_log_softmax(x), P).sum() / 4),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_against_numpy(name):
    ours, ref = CASES[name]
    np.testing.assert_allclose(ours(gt.tensor(X), gt.tensor(Y)).numpy(), ref(X, Y), rtol=1e-7, atol=1e-9)
    x = gt.tensor(X).requires_grad_()
    ours(x, gt.tensor(Y)).sum().backward()
    eps, numeric = 1e-6, np.zeros_like(X)
    for i in np.ndindex(X.shape):
        up, down = X.copy(), X.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (ref(up, Y).sum() - ref(down, Y).sum()) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-5, atol=1e-6)


def _split_values():
    placement = gt.placement("cpu", [0, 1])
    x = gt.tensor(X, placement=placement, sbp=gt.sbp.split(0))
    y = gt.tensor(Y, placement=placement, sbp=gt.sbp.split(1))
    local_constants = ("nll", "nll_weighted", "bce_pos_weight", "kl_div")  # their targets/weights are local tensors
    return {name: ours(x, y).numpy() for name, (ours, _) in CASES.items() if name not in local_constants}


def test_the_same_values_on_tensors_split_over_two_ranks():
    for got in run_ranks(_split_values, 2):
        for name, value in got.items():
            np.testing.assert_allclose(value, CASES[name][1](X, Y), rtol=1e-7, atol=1e-9, err_msg=name)


def test_containers_register_their_members():
    d = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.Identity()})
    d["c"] = nn.Linear(3, 1)
    assert list(d.keys()) == ["a", "b", "c"] and len(list(d.parameters())) == 4
    plist = nn.ParameterList([gt.ones(2), gt.zeros(3)])
    assert [tuple(p.shape) for p in plist] == [(2,), (3,)] and len(list(plist.parameters())) == 2
    assert all(p.requires_grad for p in plist)
