"""Optimizers against their reference formulas (PyTorch's algorithms), and the schedulers."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn


def _run(make, steps=5):
    rng = np.random.default_rng(0)
    p = nn.Parameter(gt.tensor(rng.standard_normal(6)))
    opt = make([p])
    grads = [rng.standard_normal(6) for _ in range(steps)]
    for g in grads:
        p.grad = gt.tensor(g)
        opt.step()
    return p.numpy(), grads, rng


def _sgd_reference(w, grads, lr, momentum, dampening, weight_decay, nesterov):
    buf = None
    for g in grads:
        g = g + weight_decay * w
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        w = w - lr * g
    return w


@pytest.mark.parametrize("momentum, dampening, weight_decay, nesterov",
                         [(0, 0, 0, False), (0.9, 0, 0, False), (0.9, 0.1, 0.01, False), (0.9, 0, 0.01, True),
                          (0, 0, 0.1, False)])
def test_sgd(momentum, dampening, weight_decay, nesterov):
    got, grads, _ = _run(lambda ps: gt.optim.SGD(ps, lr=0.1, momentum=momentum, dampening=dampening,
                                                 weight_decay=weight_decay, nesterov=nesterov))
    w0 = np.random.default_rng(0).standard_normal(6)
    np.testing.assert_allclose(got, _sgd_reference(w0, grads, 0.1, momentum, dampening, weight_decay, nesterov),
                               rtol=1e-12)


def _adam_reference(w, grads, lr, b1, b2, eps, wd, decoupled):
    m = v = 0
    for t, g in enumerate(grads, 1):
        if decoupled:
            w = w * (1 - lr * wd)
        else:
            g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr / (1 - b1 ** t) * m / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return w


@pytest.mark.parametrize("cls, wd", [(gt.optim.Adam, 0.0), (gt.optim.Adam, 0.1), (gt.optim.AdamW, 0.1)])
def test_adam_and_adamw(cls, wd):
    got, grads, _ = _run(lambda ps: cls(ps, lr=0.01, weight_decay=wd))
    w0 = np.random.default_rng(0).standard_normal(6)
    np.testing.assert_allclose(got, _adam_reference(w0, grads, 0.01, 0.9, 0.999, 1e-8, wd, cls is gt.optim.AdamW),
                               rtol=1e-12)


def test_state_dict_round_trip_resumes_exactly():
    a, grads, _ = _run(lambda ps: gt.optim.Adam(ps, lr=0.01), steps=6)
    rng = np.random.default_rng(0)
    p = nn.Parameter(gt.tensor(rng.standard_normal(6)))
    opt = gt.optim.Adam([p], lr=0.01)
    for g in grads[:3]:
        p.grad = gt.tensor(g)
        opt.step()
    saved = opt.state_dict()
    p2 = nn.Parameter(gt.tensor(p.numpy().copy()))
    opt2 = gt.optim.Adam([p2], lr=0.5)
    opt2.load_state_dict(saved)
    for g in grads[3:]:
        p2.grad = gt.tensor(g)
        opt2.step()
    np.testing.assert_allclose(p2.numpy(), a, rtol=1e-12)


def test_schedulers():
    p = nn.Parameter(gt.tensor(np.zeros(2)))
    opt = gt.optim.SGD([p], lr=1.0)
    step = gt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    lrs = []
    for _ in range(5):
        lrs.append(step.get_last_lr()[0])
        step.step()
    assert lrs == [1.0, 1.0, 0.5, 0.5, 0.25]
    opt = gt.optim.SGD([p], lr=1.0)
    warm = gt.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    assert [round(warm.get_last_lr()[0], 4) for _ in range(1)] == [0.25]
    for _ in range(3):
        warm.step()
    assert warm.get_last_lr()[0] == pytest.approx(1.0)
    opt = gt.optim.SGD([p], lr=1.0)
    cos = gt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    for _ in range(4):
        cos.step()
    assert cos.get_last_lr()[0] == pytest.approx(0.0)


def test_clip_grad_norm():
    p = nn.Parameter(gt.tensor(np.zeros(2)))
    p.grad = gt.tensor(np.array([3.0, 4.0]))
    total = gt.nn.utils.clip_grad_norm_([p], 1.0)
    assert total == pytest.approx(5.0) and np.linalg.norm(p.grad.numpy()) == pytest.approx(1.0, rel=1e-5)


def test_sgd_updates_parameters_of_a_deep_copied_module():
    """copy.deepcopy (TransformerEncoder's layers) gives arrays whose dtype objects are equal but not
    the same object: the fused update compared them by identity and refused."""
    import copy
    import numpy as np
    import globaltensor as gt
    layer = copy.deepcopy(gt.nn.Linear(3, 2))
    opt = gt.optim.SGD(layer.parameters(), lr=0.5)
    before = layer.weight.numpy().copy()
    layer(gt.ones(4, 3)).sum().backward()
    opt.step()
    np.testing.assert_allclose(layer.weight.numpy(), before - 0.5 * 4, rtol=1e-6)
