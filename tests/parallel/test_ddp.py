"""nn.parallel.DistributedDataParallel as OneFlow's and PyTorch's: several iterations on 2 ranks
equal one torch process on the whole batch, with a frozen layer, an unused parameter, buckets
smaller than the model, no_sync accumulation and rank 0's buffers broadcast before forward."""
import numpy as np
import pytest

import globaltensor as flow
from conftest import run_ranks

STEPS, LR = 3, 0.1


def _weights():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in [(6, 4), (6,), (6, 6), (6,), (3, 6), (3,), (3, 6)]]


def _batches(rank):
    rng = np.random.default_rng([1, rank])
    return [(rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32))
            for _ in range(STEPS)]


def _net(nn, weights, frozen_grad):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.frozen, self.b = nn.Linear(4, 6), nn.Linear(6, 6), nn.Linear(6, 3)
            self.unused = nn.Linear(6, 3, bias=False)  # never reached: contributes nothing
            self.register_buffer("seen", flow.zeros(1) if nn is flow.nn else __import__("torch").zeros(1))

        def forward(self, x):
            return self.b(self.frozen(self.a(x).relu()).relu())
    net = Net()
    params = [net.a.weight, net.a.bias, net.frozen.weight, net.frozen.bias, net.b.weight, net.b.bias, net.unused.weight]
    for p, w in zip(params, weights):
        p.data = (flow.tensor(w) if nn is flow.nn else __import__("torch").tensor(w))
    net.frozen.weight.requires_grad_(frozen_grad)
    net.frozen.bias.requires_grad_(frozen_grad)
    return net, params


def _ranks_train():
    rank = flow.env.get_rank()
    net, params = _net(flow.nn, _weights(), False)
    model = flow.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.0001, find_unused_parameters=True)
    assert model is net and model.module is net  # OneFlow returns the module; PyTorch's .module
    opt = flow.optim.SGD([p for p in params if p.requires_grad], lr=LR)
    for x, y in _batches(rank):
        opt.zero_grad()
        loss = ((model(flow.tensor(x)) - flow.tensor(y)) ** 2).mean()
        with model.no_sync():  # half the batch without communicating, then the rest reduces both
            (loss * 0.5).backward()
        (loss * 0.5).backward()
        opt.step()
    net.seen.fill_(float(rank) + 7.0)
    model(flow.tensor(_batches(rank)[0][0]))  # forward: rank 0's buffers first
    return [p.numpy() for p in params], net.seen.numpy(), net.frozen.weight.grad is None, net.unused.weight.grad


def test_ddp_several_steps_equal_one_process_on_the_whole_batch():
    torch = pytest.importorskip("torch")
    net, params = _net(torch.nn, _weights(), False)
    opt = torch.optim.SGD([p for p in params if p.requires_grad], lr=LR)
    for (x0, y0), (x1, y1) in zip(_batches(0), _batches(1)):
        opt.zero_grad()
        loss = sum(((net(torch.tensor(x)) - torch.tensor(y)) ** 2).mean() for x, y in ((x0, y0), (x1, y1))) / 2
        loss.backward()
        opt.step()
    want = [p.detach().numpy() for p in params]
    for got, seen, frozen_has_no_grad, unused_grad in run_ranks(_ranks_train, 2):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        assert seen.tolist() == [7.0] and frozen_has_no_grad
        assert unused_grad is None or not unused_grad.numpy().any()
