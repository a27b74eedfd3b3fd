"""Gradient merge / accumulation: k micro-batches give the parameters of the k-times-bigger batch
(torch reference, SGD and Adam, eager GradientMerge and nn.Graph's set_gradient_accumulation_steps,
one process and 2 ranks data-parallel), with one gradient reduction per k micro-batches."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from globaltensor.pipeline.microbatch import Cut
from graph_models import ToyModel, TrainGraph

from lazy_torch import torch

ROWS, K, STEPS = 8, 4, 3


def _data():
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((ROWS, 10)).astype(np.float32), rng.standard_normal((ROWS, 16)).astype(np.float32))
            for _ in range(STEPS)]


def _initial():
    gt.manual_seed(0)
    return {k: v.numpy() for k, v in ToyModel().state_dict().items()}


def _torch_reference(optimizer):
    """The parameters after STEPS full-batch steps in torch (float64 kept out: float32 as ours)."""
    init = _initial()
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 16))
    with torch.no_grad():
        for (name, p), key in zip(model.named_parameters(), ["net1.weight", "net1.bias", "net2.weight", "net2.bias"]):
            p.copy_(torch.from_numpy(init[key]))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd" else \
        torch.optim.Adam(model.parameters(), lr=0.01)
    for x, y in _data():
        loss = torch.nn.functional.mse_loss(model(torch.from_numpy(x)), torch.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
    names = ["net1.weight", "net1.bias", "net2.weight", "net2.bias"]
    return {n: p.detach().numpy() for n, p in zip(names, model.parameters())}


def _model(optimizer, distributed):
    gt.manual_seed(0)
    model = ToyModel()
    placement = None
    if distributed:
        placement = gt.placement("cpu", list(range(gt.env.get_world_size())))
        model.to_global(placement, gt.sbp.broadcast)
    opt = gt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd" else \
        gt.optim.Adam(model.parameters(), lr=0.01)
    return model, opt, placement


def _batch(array, placement):
    t = gt.tensor(array)
    return t if placement is None else t.to_global(placement=placement, sbp=gt.sbp.broadcast).to_global(
        sbp=gt.sbp.split(0))


def _eager(optimizer, distributed):
    """GradientMerge over K micro-batches per step; the collectives of each micro-batch counted."""
    model, opt, placement = _model(optimizer, distributed)
    merge = gt.optim.GradientMerge(opt, k_steps=K, avg=True)
    counts = []
    for x, y in _data():
        x, y = _batch(x, placement), _batch(y, placement)
        cut = Cut(x, K) if distributed else None
        for j in range(K):
            xj = cut.take(x, j) if cut else x[j * 2:(j + 1) * 2]
            yj = cut.take(y, j) if cut else y[j * 2:(j + 1) * 2]
            with gt.debug.count_collectives() as c:
                nn.functional.mse_loss(model(xj), yj).backward()
            counts.append(dict(c))
            merge.step()
            merge.zero_grad()
    return {k: v.numpy() for k, v in model.state_dict().items()}, counts


def _plain_step_collectives():
    model, opt, placement = _model("sgd", True)
    x, y = (_batch(a, placement) for a in _data()[0])
    with gt.debug.count_collectives() as c:
        nn.functional.mse_loss(model(x), y).backward()
    return dict(c)


def _graph(optimizer, distributed, k=K):
    """Parameters and losses after STEPS graph calls; the collectives of the last (a replay)."""
    model, opt, placement = _model(optimizer, distributed)
    step = TrainGraph(model, opt)
    step.config.set_gradient_accumulation_steps(k)
    losses = []
    for x, y in _data():
        with gt.debug.count_collectives() as c:
            losses.append(step(_batch(x, placement), _batch(y, placement)).numpy())
    return {k: v.numpy() for k, v in model.state_dict().items()}, losses, dict(c)


def _close(ours, reference):
    for k in reference:
        np.testing.assert_allclose(ours[k], reference[k], rtol=2e-5, atol=2e-6, err_msg=k)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_eager_gradient_merge_equals_the_bigger_batch(optimizer):
    params, counts = _eager(optimizer, False)
    _close(params, _torch_reference(optimizer))


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_graph_accumulation_equals_the_bigger_batch(optimizer):
    params, losses, _ = _graph(optimizer, False)
    _close(params, _torch_reference(optimizer))
    assert all(loss.shape == (K,) for loss in losses)  # OneFlow's: one loss per micro-batch


def _both_distributed(optimizer):
    return _eager(optimizer, True), _graph(optimizer, True), _plain_step_collectives(), _graph(optimizer, True, 1)[2]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_two_ranks_merge_equals_the_bigger_batch_with_one_reduction(optimizer):
    reference = _torch_reference(optimizer)
    for (eager, counts), (graph, losses, replay), plain, replay_k1 in run_ranks(_both_distributed, 2, optimizer,
                                                                                 timeout=240):
        _close(eager, reference)
        _close(graph, reference)
        assert plain.get("all_reduce", 0) >= 1
        for s in range(STEPS):
            group = counts[s * K:(s + 1) * K]
            assert all(c == {} for c in group[:-1]), group  # micro-batches 1..k-1: no collective
            assert group[-1] == plain, (group[-1], plain)  # the k-th: what one plain step reduces
        assert replay == replay_k1 and replay.get("all_reduce", 0) >= 1, (replay, replay_k1)  # one per k


def test_bad_accumulation_settings_raise():
    with pytest.raises(ValueError, match="k_steps"):
        gt.optim.GradientMerge(gt.optim.SGD([nn.Parameter(gt.zeros(2))], lr=0.1), k_steps=0)
    model, opt, _ = _model("sgd", False)
    step = TrainGraph(model, opt)
    step.config.set_gradient_accumulation_steps(16)
    with pytest.raises(ValueError, match="cannot be cut into 16"):
        step(gt.randn(8, 10), gt.randn(8, 16))


def test_oneflow_grad_acc_losses_per_micro_batch_equal_eager():
    """OneFlow's test_graph_grad_acc: the graph's (k,) losses are eager's micro-batch losses, bit
    for bit, and the weights after each call those of eager's update every k micro-batches."""
    def linear_sgd():
        linear = nn.Linear(3, 8)
        nn.init.constant_(linear.weight, 2.068758)
        nn.init.constant_(linear.bias, 1.23)
        return linear, gt.optim.SGD(linear.parameters(), lr=0.01, momentum=0.9)

    x = gt.tensor(np.random.default_rng(3).standard_normal((8, 3)).astype(np.float32))
    eager, opt = linear_sgd()
    eager_losses, eager_weights = [], []
    for i in range(12):
        out = eager(x[(i % 4) * 2:(i % 4) * 2 + 2]).reshape(-1).sum()
        (out * 0.25).backward()
        eager_losses.append(out.numpy())
        if (i + 1) % 4 == 0:
            opt.step()
            opt.zero_grad()
            eager_weights.append(eager.weight.numpy().copy())

    linear, sgd = linear_sgd()

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.linear = linear
            self.add_optimizer(sgd)
            self.config.set_gradient_accumulation_steps(4)

        def build(self, x):
            loss = self.linear(x).reshape(-1).sum()
            loss.backward()
            return loss

    step = Step()
    for i in range(3):
        losses = step(x).numpy()
        assert [v.tobytes() for v in losses] == [v.tobytes() for v in eager_losses[i * 4:(i + 1) * 4]]
        np.testing.assert_allclose(linear.weight.numpy(), eager_weights[i], rtol=1e-6)


def _two_d(k):
    """ToyModel on a 2x2 mesh (data parallel x tensor parallel, test_graph's "2d" layout), 3 graph
    calls with set_gradient_accumulation_steps(k) on batches of 16 rows."""
    from test_graph import _layout
    gt.manual_seed(0)
    model = ToyModel()
    mesh, data_sbp = _layout(model, "2d")
    step = TrainGraph(model, gt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    step.config.set_gradient_accumulation_steps(k)
    rng = np.random.default_rng(1)
    for _ in range(STEPS):
        x, y = (gt.tensor(rng.standard_normal((16, n)).astype(np.float32)).to_global(
            placement=mesh, sbp=(gt.sbp.broadcast,) * 2).to_global(sbp=data_sbp) for n in (10, 16))
        step(x, y)
    return {name: v.numpy().copy() for name, v in model.state_dict().items()}


def _two_d_both():
    return _two_d(1), _two_d(4)


def test_accumulation_on_a_2x2_mesh_equals_the_bigger_batch():
    """Gradients of tensor-parallel parameters come out of a micro-batch's backward already
    reduced on the data axis; they are averaged alike (a regression: they were summed)."""
    for whole, merged in run_ranks(_two_d_both, 4, timeout=300):
        _close(merged, whole)
