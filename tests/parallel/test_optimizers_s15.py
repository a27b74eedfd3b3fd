"""Optimizers against torch.optim: parameters after several steps for every option (RMSprop and
Adagrad new; maximize; PyTorch's foreach/fused/capturable switches accepted), on local tensors, on
2 ranks with parameters split (the states stay split: no collective in a step), and replayed by a
traced step (nn.Graph) as eager mode runs it."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks

CASES = {
    "SGD maximize": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01, maximize=True)),
    "SGD fused foreach": ("SGD", dict(lr=0.1, momentum=0.9, foreach=True, fused=None)),
    "Adam maximize": ("Adam", dict(lr=0.01, maximize=True, amsgrad=True)),
    "Adam decoupled": ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    "AdamW fused": ("AdamW", dict(lr=0.01, fused=True)),
    "AdamW foreach capturable": ("AdamW", dict(lr=0.01, foreach=False, capturable=False)),
    "RMSprop": ("RMSprop", dict(lr=0.01)),
    "RMSprop momentum": ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.8, weight_decay=0.1)),
    "RMSprop centered": ("RMSprop", dict(lr=0.01, centered=True, eps=1e-3, maximize=True)),
    "Adagrad": ("Adagrad", dict(lr=0.1)),
    "Adagrad decay": ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3)),
}
W0 = np.random.default_rng(0).standard_normal((6, 4))
X = np.random.default_rng(1).standard_normal((5, 6))


def _fused_is_cpu_ok(options):
    return {k: v for k, v in options.items() if not (k == "fused" and v)}  # torch's fused needs a device


def _torch_weights(name, steps=5):
    optimizer, options = CASES[name]
    w = torch.nn.Parameter(torch.tensor(W0))
    opt = getattr(torch.optim, optimizer)([w], **_fused_is_cpu_ok(options))
    for i in range(steps):
        opt.zero_grad()
        (torch.tensor(X) @ w).tanh().sum().mul(1 + i).backward()
        opt.step()
    return w.detach().numpy()


def _ours(name, steps=5, placement=None, traced=False):
    optimizer, options = CASES[name]
    kw = {} if placement is None else {"placement": placement, "sbp": gt.sbp.split(0)}
    w = gt.nn.Parameter(gt.tensor(W0, **kw))
    opt = getattr(gt.optim, optimizer)([w], **options)
    x = gt.tensor(X, **({} if placement is None else {"placement": placement, "sbp": gt.sbp.broadcast}))
    counted = []

    def eager(i):
        opt.zero_grad()
        (x @ w).tanh().sum().mul(1 + i).backward()
        with gt.debug.count_collectives() as c:
            opt.step()
        counted.append(dict(c))

    class Step(gt.nn.Graph):
        def __init__(self):
            super().__init__()
            self.add_optimizer(opt)

        def build(self, scale):
            (x @ w).tanh().sum().mul(scale).backward()

    graph = Step() if traced else None
    for i in range(steps):
        if graph is None:
            eager(i)
        else:
            graph(gt.tensor(np.float64(1 + i), **({} if placement is None else
                                                  {"placement": placement, "sbp": gt.sbp.broadcast})))
    return w.numpy(), counted


@pytest.mark.parametrize("name", sorted(CASES))
def test_optimizers_as_torch(name):
    np.testing.assert_allclose(_ours(name)[0], _torch_weights(name), rtol=1e-10, atol=1e-12)


def _on_ranks(names, traced):
    placement = gt.placement("cpu", [0, 1])
    return {n: _ours(n, placement=placement, traced=traced) for n in names}


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
def test_split_parameters_on_two_ranks(traced):
    names = ["RMSprop momentum", "RMSprop centered", "Adagrad decay", "SGD maximize", "Adam maximize"]
    want = {n: _torch_weights(n) for n in names}
    for rank_results in run_ranks(_on_ranks, 2, names, traced, timeout=300):
        for name, (w, counted) in rank_results.items():
            np.testing.assert_allclose(w, want[name], rtol=1e-10, atol=1e-12, err_msg=name)
            assert all(c == {} for c in counted), (name, counted)  # the states split like the parameter


def test_optimizer_switches_and_refusals():
    w = gt.nn.Parameter(gt.tensor(np.ones(3)))
    with pytest.raises(NotImplementedError, match="differentiable"):
        gt.optim.RMSprop([w], differentiable=True)
    with pytest.raises(ValueError, match="non-negative"):
        gt.optim.Adagrad([w], lr=-1.0)
    opt = gt.optim.RMSprop([w], lr=0.1, momentum=0.9, centered=True)
    w.grad = gt.tensor(np.ones(3))
    opt.step()
    state = opt.state_dict()["state"]
    assert sorted(next(iter(state.values()))) == ["grad_avg", "momentum_buffer", "square_avg", "step"]
