"""Gradients zeroed in place (zero_grad(set_to_none=False), Paddle's clear_grad()) read as zeros,
and the next backward replaces them: the buckets take it in place, bits as with set_to_none."""
import numpy as np
import pytest

import globaltensor as gt
from globaltensor import grad_buckets
from globaltensor.autograd.engine import _root, is_zeroed
from conftest import run_ranks

STEPS = 4


def test_zeroed_grad_reads_zeros_and_the_next_backward_replaces_it():
    m = gt.nn.Linear(3, 2)
    opt = gt.optim.SGD(m.parameters(), lr=0.1)
    x = gt.tensor(np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32))
    m(x).sum().backward()
    first = m.weight.grad.numpy().copy()
    opt.zero_grad(set_to_none=False)
    g = m.weight.grad
    assert is_zeroed(g) and not g.numpy().any() and g.shape == (2, 3)
    with pytest.raises(ValueError, match="read-only"):  # a write through numpy is refused, never missed
        g.numpy()[0, 0] = 1.0
    m(x).sum().backward()
    assert np.array_equal(m.weight.grad.numpy(), first) and np.array_equal(g.numpy(), first)
    m(x).sum().backward()  # a .grad that is not marked accumulates as before
    assert np.array_equal(m.weight.grad.numpy(), 2 * first)
    opt.zero_grad(set_to_none=False)
    m.weight.grad.add_(1.0)  # an in-place op replaces the piece: the mark ends, the value counts
    assert not is_zeroed(m.weight.grad)
    m(x).sum().backward()
    assert np.array_equal(m.weight.grad.numpy(), first + 1)


def _train(clear):
    """DataParallel + Adam on 2 ranks; clear: "none" (set_to_none) or "zero" (in place)."""
    rank = gt.env.get_rank()
    gt.manual_seed(0)
    net = gt.nn.Sequential(gt.nn.Linear(8, 16), gt.nn.ReLU(), gt.nn.Linear(16, 2))
    model = gt.distributed.DataParallel(net)
    opt = gt.optim.Adam(net.parameters(), lr=0.01)
    rng = np.random.default_rng([3, rank])
    copied, in_place = [], []
    for _ in range(STEPS):
        x = gt.tensor(rng.standard_normal((5, 8)).astype(np.float32))
        before = grad_buckets.copies[0]
        ((model(x) - 1.0) ** 2).mean().backward()
        copied.append(grad_buckets.copies[0] - before)
        in_place.append(len({id(_root(p.grad._local)) for p in net.parameters()}) == 1)
        opt.step()
        opt.zero_grad(set_to_none=(clear == "none"))
    return [p.numpy() for p in net.parameters()], copied, in_place


@pytest.mark.parametrize("clear", ["none", "zero"])
def test_data_parallel_after_zeroing_takes_gradients_in_place_with_the_same_bits(clear):
    want, want_copied, _ = run_ranks(_train, 2, "none")[0]
    assert want_copied[1:] == [2] * (STEPS - 1)  # the biases are copied; linear writes its weights' in place
    for got, copied, in_place in run_ranks(_train, 2, clear):
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        assert copied == want_copied  # zeroed or not, backward wrote each weight gradient into its bucket
        assert all(in_place)  # the gradients are views of one reduced buffer
