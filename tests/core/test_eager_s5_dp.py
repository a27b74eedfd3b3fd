"""Issue 35's DP step (s5): the bucket's mean left by the reduction kernel (all_reduce_mean), SGD
on it, Paddle's clear_grad without fresh zeros; against numpy's sum-then-divide and torch."""
import numpy as np
import pytest

import globaltensor as gt
from globaltensor.distributed import collectives
from conftest import rank_data, run_ranks
from lazy_torch import torch

STEPS = 3


def _means():
    """all_reduce_mean beside a sum then `/= 2` (bits), async too; None where the kernel does not apply."""
    rank = gt.env.get_rank()
    got = []
    for dtype, n, now in [(np.float32, 5, True), (np.float32, 300_001, False), (np.float64, 1_000, True)]:
        x = rank_data(7, rank, (n,), dtype)
        want = x.copy()
        collectives.all_reduce(want)
        want /= 2
        work = collectives.all_reduce_mean(x, now=now)
        work.wait()
        got.append(np.array_equal(x.view(np.uint8), want.view(np.uint8)))
    got.append(collectives.all_reduce_mean(np.ones(3, np.int32)) is None)
    return got


def _paddle_mlp(rows, bucket_mb=None):
    """The Paddle face's DP MLP (SGD, clear_grad): parameters after STEPS steps, each .grad after
    clear_grad (zeros, read-only), whether the grads were views of one bucket buffer. bucket_mb:
    both bucket sizes (tiny: a bucket per parameter, all but the last two started mid-backward)."""
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    import globaltensor.paddle.nn as nn
    import globaltensor.paddle.optimizer as opt
    dist.init_parallel_env()
    rank = dist.get_rank()
    paddle.seed(5)
    layer = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    start = [p.numpy().copy() for p in layer.parameters()]
    sizes = {} if bucket_mb is None else {"comm_buffer_size": bucket_mb, "last_comm_buffer_size": bucket_mb}
    model = paddle.DataParallel(layer, **sizes)
    sgd = opt.SGD(learning_rate=0.1, parameters=model.parameters())
    for step in range(STEPS):
        x = paddle.to_tensor(rank_data(step, rank, (rows, 8), np.float32))
        y = paddle.to_tensor(rank_data(100 + step, rank, (rows, 4), np.float32))
        ((model(x) - y) ** 2).mean().backward()
        sgd.step()
        sgd.clear_grad()
    zeros = [p.grad.numpy() for p in layer.parameters()]
    cleared = all(z.shape == tuple(p.shape) and not z.any() for z, p in zip(zeros, layer.parameters()))
    return start, [p.numpy() for p in layer.parameters()], cleared


def _torch_reference(start, rows):
    """The same training in torch on one process: the mean loss over each rank's rows, averaged."""
    ws = [torch.tensor(a, requires_grad=True) for a in start]
    for step in range(STEPS):
        loss = 0
        for rank in range(2):
            x = torch.tensor(rank_data(step, rank, (rows, 8), np.float32))
            y = torch.tensor(rank_data(100 + step, rank, (rows, 4), np.float32))
            h = torch.relu(x @ ws[0] + ws[1])  # Paddle's Linear weight is [in, out]
            loss = loss + ((h @ ws[2] + ws[3] - y) ** 2).mean() / 2
        grads = torch.autograd.grad(loss, ws)
        with torch.no_grad():
            for w, g in zip(ws, grads):
                w -= 0.1 * g
    return [w.detach().numpy() for w in ws]


def _both(rows):
    import os
    threads = []
    for overlap in ("1", "0"):  # buckets on the worker thread beside backward, or on this one: the same bits
        os.environ["GLOBALTENSOR_BUCKET_OVERLAP"] = overlap
        threads.append(_paddle_mlp(rows, bucket_mb=1e-6)[1])
    del os.environ["GLOBALTENSOR_BUCKET_OVERLAP"]
    same = all(np.array_equal(a.view(np.uint8), b.view(np.uint8)) for a, b in zip(*threads))
    return _means(), _paddle_mlp(rows), same


def test_all_reduce_mean_bits_and_paddle_dp_sgd_with_clear_grad_against_torch():
    """One spawn for both (suite time): all_reduce_mean's bits, then the DP MLP against torch."""
    (means0, (start, got0, cleared0), same0), (means1, (_, got1, cleared1), same1) = run_ranks(_both, 2, 6)
    assert all(means0) and all(means1), (means0, means1)
    assert same0 and same1  # GLOBALTENSOR_BUCKET_OVERLAP=1 and 0 give the same parameters
    assert cleared0 and cleared1
    want = _torch_reference(start, 6)
    for a, b, w in zip(got0, got1, want):
        assert np.array_equal(a, b)  # every rank holds the same parameters
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-6)
