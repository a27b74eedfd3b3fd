"""Issue 28's step costs (s6): .grads that clear_grad zeroed read as zeros, each its own read-only
zero of strides 0; a local loss's seed is fresh ones; values as PyTorch's."""
import numpy as np
import pytest

import globaltensor.paddle as paddle
import globaltensor.paddle.nn as nn
import globaltensor.paddle.optimizer as opt
from globaltensor.autograd.engine import is_zeroed

torch = pytest.importorskip("torch")


def _pair():
    """A Paddle-face Linear 4-4, Linear 4-4 (weights of one shape) and the same in torch."""
    paddle.seed(3)
    ours = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)).double()
    with torch.no_grad():
        for mine, ref in zip(ours, theirs):
            ref.weight.copy_(torch.tensor(mine.weight.numpy().T))
            ref.bias.copy_(torch.tensor(mine.bias.numpy()))
    return ours, theirs


def test_cleared_grads_are_zeros_apart_and_match_torch():
    ours, theirs = _pair()
    sgd = opt.SGD(learning_rate=0.1, parameters=ours.parameters())
    ref_sgd = torch.optim.SGD(theirs.parameters(), lr=0.1)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    for step in range(3):
        loss = (ours(paddle.to_tensor(x)) ** 2).mean()
        loss.backward()
        ref = (theirs(torch.tensor(x, dtype=torch.float64)) ** 2).mean()
        ref.backward()
        for mine, r in zip(ours, theirs):
            np.testing.assert_allclose(mine.weight.grad.numpy(), r.weight.grad.numpy().T, rtol=1e-5, atol=1e-6)
        sgd.step()
        ref_sgd.step()
        sgd.clear_grad()
        ref_sgd.zero_grad()
        w0, w1 = ours[0].weight.grad, ours[1].weight.grad
        assert is_zeroed(w0) and is_zeroed(w1) and w0 is not w1
        assert w0._local is not w1._local and w0._local.strides == (0, 0)  # each its own zero, no memory
        with pytest.raises(ValueError, match="read-only"):
            w0.numpy()[0, 0] = 1.0
    w0.add_(2.0)  # an in-place op gives w0 a piece of its own: w1 still reads zeros
    assert not is_zeroed(w0) and is_zeroed(w1)
    assert np.all(w0.numpy() == 2.0) and not w1.numpy().any()


def test_a_local_losss_seed_is_fresh_ones():
    ours, theirs = _pair()
    x = np.ones((2, 4), np.float32)
    loss = ours(paddle.to_tensor(x)).sum()
    loss.backward()
    ref = theirs(torch.tensor(x, dtype=torch.float64)).sum()
    ref.backward()
    np.testing.assert_allclose(ours[0].weight.grad.numpy(), theirs[0].weight.grad.numpy().T, rtol=1e-5)
    g = ours[1].bias.grad.numpy().copy()
    loss2 = ours(paddle.to_tensor(x)).sum()
    loss2.backward()  # accumulates: the first seed was not shared with a .grad
    np.testing.assert_allclose(ours[1].bias.grad.numpy(), 2 * g, rtol=1e-6)
