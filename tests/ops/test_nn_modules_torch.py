"""PyTorch's activation modules and losses against torch itself: same constructor arguments, same random input,
equal outputs and input (and PReLU's weight) gradients in float32; the same on 2-rank global inputs (split(0), B)."""
import warnings
import zlib

import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
import globaltensor.nn as nn
import globaltensor.nn.functional as F
from conftest import run_ranks

N, C = 4, 5


def _rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def _f(a):
    return np.asarray(a, np.float32)


def _normal(*shape, scale=1.0):
    return lambda r: _f(r.standard_normal(shape) * scale)


def _signs(*shape):
    return lambda r: _f(np.where(r.random(shape) < 0.5, -1.0, 1.0))


def _multilabel_targets(r):
    t = np.full((N, C), -1, np.int64)
    for i in range(N):
        k = r.integers(0, C + 1)
        t[i, :k] = r.permutation(C)[:k]
    return t


# name: (module, constructor args, constructor kwargs (arrays become tensors), input makers, inputs that get gradients)
X = _normal(N, C, scale=3.0)
CASES = {
    "Threshold": ("Threshold", (0.3, -2.0), {}, [X], [0]),
    "Hardtanh": ("Hardtanh", (-0.5, 2.0), {}, [X], [0]),
    "ReLU6": ("ReLU6", (), {"inplace": False}, [_normal(N, C, scale=5.0)], [0]),
    "ELU": ("ELU", (0.7,), {}, [X], [0]),
    "CELU": ("CELU", (), {"alpha": 1.5}, [X], [0]),
    "SELU": ("SELU", (), {}, [X], [0]),
    "Hardsigmoid": ("Hardsigmoid", (), {}, [_normal(N, C, scale=4.0)], [0]),
    "Hardswish": ("Hardswish", (), {}, [_normal(N, C, scale=4.0)], [0]),
    "Mish": ("Mish", (), {}, [X], [0]),
    "Softplus": ("Softplus", (), {"beta": 2.0, "threshold": 3.0}, [X], [0]),
    "Softplus_default": ("Softplus", (), {}, [_normal(N, C, scale=15.0)], [0]),
    "Softsign": ("Softsign", (), {}, [X], [0]),
    "Tanhshrink": ("Tanhshrink", (), {}, [X], [0]),
    "LogSigmoid": ("LogSigmoid", (), {}, [_normal(N, C, scale=10.0)], [0]),
    "Softmin": ("Softmin", (), {"dim": 1}, [X], [0]),
    "Softmin_implicit_dim": ("Softmin", (), {}, [X], [0]),
    "Softmax2d": ("Softmax2d", (), {}, [_normal(N, 3, 2, 2)], [0]),
    "GLU": ("GLU", (), {}, [_normal(N, 6)], [0]),
    "GLU_dim1": ("GLU", (1,), {}, [_normal(N, 4, 3)], [0]),
    "Hardshrink": ("Hardshrink", (), {}, [X], [0]),
    "Softshrink": ("Softshrink", (0.8,), {}, [X], [0]),
    "PReLU": ("PReLU", (), {}, [X], [0]),
    "PReLU_channels": ("PReLU", (3, 0.1), {}, [_normal(N, 3, 2)], [0]),
    "RReLU_eval": ("RReLU", (0.1, 0.3), {}, [X], [0]),
    "LeakyReLU": ("LeakyReLU", (0.2,), {}, [X], [0]),
    "SiLU": ("SiLU", (), {}, [X], [0]),
    "BCELoss": ("BCELoss", (), {}, [lambda r: _f(1 / (1 + np.exp(-3 * r.standard_normal((N, C))))),
                                    lambda r: _f(r.random((N, C)))], [0]),
    "BCELoss_weight_sum": ("BCELoss", (), {"weight": _f(np.linspace(0.5, 2, C)), "reduction": "sum"},
                           [lambda r: _f(r.random((N, C)) * 0.98 + 0.01), lambda r: _f(r.random((N, C)) > 0.5)], [0]),
    "HuberLoss": ("HuberLoss", (), {"delta": 0.5}, [X, _normal(N, C)], [0, 1]),
    "HuberLoss_none": ("HuberLoss", ("none", 2.0), {}, [X, _normal(N, C)], [0]),
    "SoftMarginLoss": ("SoftMarginLoss", (), {}, [X, _signs(N, C)], [0]),
    "MultiLabelSoftMarginLoss": ("MultiLabelSoftMarginLoss", (), {"weight": _f(np.linspace(0.5, 2, C))},
                                 [X, lambda r: _f(r.random((N, C)) > 0.5)], [0]),
    "MultiLabelSoftMarginLoss_none": ("MultiLabelSoftMarginLoss", (), {"reduction": "none"},
                                      [X, lambda r: _f(r.random((N, C)) > 0.5)], [0]),
    "HingeEmbeddingLoss": ("HingeEmbeddingLoss", (0.5,), {}, [X, _signs(N, C)], [0]),
    "MarginRankingLoss": ("MarginRankingLoss", (0.1,), {}, [_normal(N), _normal(N), _signs(N)], [0, 1]),
    "CosineEmbeddingLoss": ("CosineEmbeddingLoss", (0.2,), {}, [X, _normal(N, C), _signs(N)], [0, 1]),
    "CosineEmbeddingLoss_sum": ("CosineEmbeddingLoss", (), {"reduction": "sum"}, [X, _normal(N, C), _signs(N)],
                                [0, 1]),
    "TripletMarginLoss": ("TripletMarginLoss", (), {}, [X, _normal(N, C), _normal(N, C)], [0, 1, 2]),
    "TripletMarginLoss_p1_swap": ("TripletMarginLoss", (), {"margin": 2.0, "p": 1, "swap": True},
                                  [X, _normal(N, C), _normal(N, C)], [0, 1, 2]),
    "TripletMarginWithDistanceLoss": ("TripletMarginWithDistanceLoss", (), {"margin": 2.0},
                                      [X, _normal(N, C), _normal(N, C)], [0, 1, 2]),
    "PoissonNLLLoss": ("PoissonNLLLoss", (), {}, [_normal(N, C), lambda r: _f(r.poisson(2.0, (N, C)))], [0]),
    "PoissonNLLLoss_full": ("PoissonNLLLoss", (False, True), {"reduction": "sum"},
                            [lambda r: _f(r.random((N, C)) * 3 + 0.1), lambda r: _f(r.poisson(2.0, (N, C)))], [0]),
    "GaussianNLLLoss": ("GaussianNLLLoss", (), {}, [X, _normal(N, C), lambda r: _f(r.random((N, C)) + 0.1)],
                        [0, 2]),
    "GaussianNLLLoss_homoscedastic_full": ("GaussianNLLLoss", (), {"full": True, "reduction": "none"},
                                           [X, _normal(N, C), lambda r: _f(r.random(N) + 0.1)], [0, 2]),
    "MultiMarginLoss": ("MultiMarginLoss", (), {}, [X, lambda r: r.integers(0, C, N)], [0]),
    "MultiMarginLoss_p2_weight": ("MultiMarginLoss", (2, 2.0, _f(np.linspace(0.5, 2, C))), {"reduction": "none"},
                                  [X, lambda r: r.integers(0, C, N)], [0]),
    "MultiLabelMarginLoss": ("MultiLabelMarginLoss", (), {}, [X, _multilabel_targets], [0]),
    "MultiLabelMarginLoss_none": ("MultiLabelMarginLoss", (), {"reduction": "none"}, [X, _multilabel_targets], [0]),
    "CosineSimilarity": ("CosineSimilarity", (), {}, [X, _normal(N, C)], [0, 1]),
    "PairwiseDistance": ("PairwiseDistance", (), {}, [X, _normal(N, C)], [0, 1]),
    "PairwiseDistance_p1_keepdim": ("PairwiseDistance", (1.0,), {"keepdim": True}, [X, _normal(N, C)], [0, 1]),
    "NLLLoss2d": ("NLLLoss2d", (), {}, [_normal(N, 3, 2, 2), lambda r: r.integers(0, 3, (N, 2, 2))], [0]),
}


def _data(name):
    r = _rng(name)
    return [make(r) for make in CASES[name][3]]


def _build(lib, name, to_tensor):
    cls, args, kwargs = CASES[name][:3]
    convert = lambda v: to_tensor(v) if isinstance(v, np.ndarray) else v  # noqa: E731
    module = getattr(lib, cls)(*[convert(a) for a in args], **{k: convert(v) for k, v in kwargs.items()})
    return module.eval() if cls == "RReLU" else module


def _torch_result(name):
    """(output, input gradients, PReLU's weight gradient or None) from torch; the cotangent is random."""
    data = _data(name)
    with warnings.catch_warnings():  # torch's deprecations (NLLLoss2d, softmin's implicit dim)
        warnings.simplefilter("ignore")
        module = _build(torch.nn, name, torch.tensor)
        inputs = [torch.tensor(a, requires_grad=i in CASES[name][4]) for i, a in enumerate(data)]
        out = module(*inputs)
    cot = _f(_rng(name + "cot").standard_normal(tuple(out.shape)))
    (out * torch.tensor(cot)).sum().backward()
    weight = module.weight.grad.numpy() if isinstance(module, torch.nn.PReLU) else None
    return out.detach().numpy(), [inputs[i].grad.numpy() for i in CASES[name][4]], weight, cot


def _ours(name, cot, placement=None, sbp=None):
    data = _data(name)

    def tensor(a, split=False):
        if placement is None:
            return gt.tensor(a)
        return gt.tensor(a, placement=placement, sbp=sbp if split else gt.sbp.broadcast)

    module = _build(nn, name, tensor)
    if placement is not None:
        module.to_global(placement, gt.sbp.broadcast)
    inputs = [tensor(a, split=True) for a in data]
    for i in CASES[name][4]:
        inputs[i].requires_grad_()
    out = module(*inputs)
    (out * tensor(cot)).sum().backward()
    weight = module.weight.grad.numpy() if isinstance(module, nn.PReLU) else None
    return out.numpy(), [inputs[i].grad.numpy() for i in CASES[name][4]], weight


def _close(ours, theirs, what):
    """float32 agreement: summation order may differ, so the absolute slack scales with the largest value."""
    assert ours.shape == theirs.shape, what
    atol = 2e-6 * max(1.0, float(np.abs(theirs).max(initial=0.0)))
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=atol, err_msg=what)


def _check(name, ours, theirs):
    out, grads, weight = ours
    t_out, t_grads, t_weight = theirs[:3]
    _close(out, t_out, f"{name}: output")
    for i, (g, tg) in enumerate(zip(grads, t_grads)):
        _close(g, tg, f"{name}: gradient of input {i}")
    if t_weight is not None:
        _close(weight, t_weight, f"{name}: weight gradient")


@pytest.mark.parametrize("name", sorted(CASES))
def test_local_values_and_gradients_equal_torch(name):
    theirs = _torch_result(name)
    _check(name, _ours(name, theirs[3]), theirs)


def _global_results(names):
    placement = gt.placement("cpu", [0, 1])
    results = {}
    for name in names:
        cot = _torch_result(name)[3]
        results[name] = {"S(0)": _ours(name, cot, placement, gt.sbp.split(0)),
                         "B": _ours(name, cot, placement, gt.sbp.broadcast)}
    return results


def test_global_inputs_split_and_broadcast_over_two_ranks_equal_torch():
    names = sorted(CASES)
    for got in run_ranks(_global_results, 2, names, timeout=600):
        for name in names:
            theirs = _torch_result(name)
            for layout, ours in got[name].items():
                _check(f"{name} [{layout}]", ours, theirs)


def test_every_torch_activation_and_loss_module_is_here():
    names = torch.nn.modules.activation.__all__ + torch.nn.modules.loss.__all__
    # not provided: MultiheadAttention (nn.MultiHeadAttention has its own signature), torch 2.13's
    # LinearCrossEntropyLoss
    missing = [n for n in names if not hasattr(nn, n)]
    assert set(missing) <= {"MultiheadAttention", "LinearCrossEntropyLoss"}, missing


def test_functional_forms_and_signatures():
    x = gt.tensor(_normal(N, C, scale=3.0)(np.random.default_rng(1)))
    tx = torch.tensor(x.numpy())
    for fn, kwargs in [("elu", {"alpha": 0.5}), ("celu", {}), ("selu", {}), ("hardtanh", {"min_val": -2.0}),
                       ("relu6", {}), ("hardsigmoid", {}), ("hardswish", {}), ("mish", {}),
                       ("softplus", {"beta": 0.5}), ("softsign", {}), ("tanhshrink", {}), ("logsigmoid", {}),
                       ("softmin", {"dim": 0}), ("glu", {"dim": 0}), ("hardshrink", {"lambd": 1.0}),
                       ("softshrink", {}), ("threshold", {"threshold": 0.1, "value": 20.0}), ("relu", {}),
                       ("leaky_relu", {"negative_slope": 0.3}), ("rrelu", {}), ("silu", {})]:
        np.testing.assert_allclose(getattr(F, fn)(x, **kwargs).numpy(), getattr(torch.nn.functional, fn)(tx, **kwargs)
                                   .numpy(), rtol=2e-5, atol=2e-6, err_msg=fn)
    w = np.linspace(0.1, 0.5, C).astype(np.float32)
    np.testing.assert_allclose(F.prelu(x, gt.tensor(w)).numpy(),
                               torch.nn.functional.prelu(tx, torch.tensor(w)).numpy(), rtol=1e-6)
    assert nn.Hardtanh(min_value=-3.0).min_val == -3.0 and nn.Threshold(0.1, 2.0, True).inplace
    with pytest.raises(TypeError):
        nn.Threshold(0.1)
    with pytest.raises(ValueError):
        nn.HuberLoss(reduction="avg")(x, x)


def test_rrelu_in_training_draws_slopes_in_range():
    x = -gt.ones(1000)
    y = nn.RReLU(0.1, 0.3)(x).numpy()  # a new module is in training mode
    assert ((y <= -0.1) & (y >= -0.3)).all() and len(np.unique(y)) > 100


def _ctc_data():
    r = np.random.default_rng(7)
    x = r.standard_normal((7, N, C)).astype(np.float32)  # (T, N, C)
    targets = r.integers(1, C, (N, 3))
    targets[0, 1] = targets[0, 0]  # a repeated label needs a blank between
    return x, targets, np.array([7, 6, 5, 2]), np.array([3, 2, 0, 3])  # the last: impossible (inf)


def _ctc_torch(reduction, zero_infinity):
    x, targets, in_len, tg_len = _ctc_data()
    tx = torch.tensor(x, requires_grad=True)
    out = torch.nn.CTCLoss(reduction=reduction, zero_infinity=zero_infinity)(
        torch.log_softmax(tx, 2), torch.tensor(targets), torch.tensor(in_len), torch.tensor(tg_len))
    out.sum().backward()
    return out.detach().numpy(), tx.grad.numpy()


def _ctc_ours(reduction, zero_infinity, placement=None, sbp=None):
    x, targets, in_len, tg_len = _ctc_data()
    kw = {} if placement is None else {"placement": placement, "sbp": gt.sbp.broadcast}
    gx = gt.tensor(x, **({} if placement is None else {"placement": placement, "sbp": sbp})).requires_grad_()
    out = nn.CTCLoss(reduction=reduction, zero_infinity=zero_infinity)(
        F.log_softmax(gx, 2), gt.tensor(targets, **kw), gt.tensor(in_len, **kw), tuple(tg_len))
    out.sum().backward()
    return out.numpy(), gx.grad.numpy()


CTC_CASES = [("mean", True), ("sum", True), ("none", True), ("none", False)]


@pytest.mark.parametrize("reduction, zero_infinity", CTC_CASES)
def test_ctc_loss_equals_torch(reduction, zero_infinity):
    (out, grad), (t_out, t_grad) = _ctc_ours(reduction, zero_infinity), _ctc_torch(reduction, zero_infinity)
    np.testing.assert_allclose(out, t_out, rtol=2e-5, atol=2e-6)
    if zero_infinity:  # torch's gradient of an infinite loss is NaN on some entries; not compared
        _close(grad, t_grad, f"ctc {reduction}")


def _ctc_global():
    placement = gt.placement("cpu", [0, 1])
    return [_ctc_ours(red, zi, placement, sbp) for red, zi in CTC_CASES for sbp in (gt.sbp.split(1), gt.sbp.broadcast)]


def test_ctc_loss_on_global_log_probs_split_over_the_batch():
    expected = [_ctc_torch(red, zi) for red, zi in CTC_CASES for _ in range(2)]
    for got in run_ranks(_ctc_global, 2):
        for (out, grad), (t_out, t_grad), (red, zi) in zip(got, expected, [c for c in CTC_CASES for _ in range(2)]):
            np.testing.assert_allclose(out, t_out, rtol=2e-5, atol=2e-6, err_msg=red)
            if zi:
                _close(grad, t_grad, f"ctc {red} global")
