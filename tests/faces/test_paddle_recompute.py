"""paddle.distributed.fleet.utils.recompute: gradients bitwise equal to the plain run, dropout
replayed, Paddle's kwargs rules, on 1 process and on 2 ranks with a sharded weight."""
import numpy as np
import pytest

import globaltensor.paddle as paddle
import globaltensor.paddle.distributed as dist
from conftest import run_ranks
from globaltensor.paddle import nn
from globaltensor.paddle.distributed.fleet.utils import recompute, recompute_sequential


class Block(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(4, 8), nn.Linear(8, 3), nn.Dropout(0.5)

    def forward(self, x):
        return self.fc2(self.drop(nn.functional.relu(self.fc1(x))))


def _grads(block, x, how):
    for t in [*block.parameters(), x]:
        t.grad = None
    paddle.seed(3)
    y = block(x) if how is None else how(block, x)
    (y * y).sum().backward()
    return [p.grad.numpy() for p in block.parameters()] + [x.grad.numpy(), y.numpy()]


@pytest.mark.parametrize("how", [
    lambda b, x: recompute(b, x),
    lambda b, x: recompute(b, x, use_reentrant=False),
    lambda b, x: recompute_sequential({"segments": 2}, [b.fc1, nn.ReLU(), b.drop, b.fc2], x),
])
def test_recompute_gradients_equal_bitwise(how):
    paddle.seed(0)
    block = Block()
    x = paddle.randn([6, 4])
    x.stop_gradient = False
    plain, again = _grads(block, x, None), _grads(block, x, how)
    assert all(np.array_equal(a, b) for a, b in zip(plain, again))


def test_paddle_kwargs_rules():
    block = Block()
    x = paddle.randn([2, 4])
    with pytest.raises(ValueError, match="use_reentrant=False"):
        recompute(lambda a, scale: block(a) * scale, x, scale=2.0)
    out = recompute(lambda a, scale: block(a) * scale, x, scale=2.0, use_reentrant=False)
    assert not out.stop_gradient  # non-reentrant: the parameters inside get gradients
    assert recompute(block, x).stop_gradient  # reentrant, no input needing grad: none


def _sharded_on_two_ranks():
    mesh = dist.ProcessMesh([0, 1], dim_names=["x"])
    paddle.seed(0)
    block = Block()
    block.fc1.weight = dist.shard_tensor(block.fc1.weight, mesh, [dist.Shard(1)])  # column-parallel
    block.fc1.bias = dist.shard_tensor(block.fc1.bias, mesh, [dist.Shard(0)])
    block.fc2.weight = dist.shard_tensor(block.fc2.weight, mesh, [dist.Shard(0)])  # row-parallel
    block.fc2.bias = dist.shard_tensor(block.fc2.bias, mesh, [dist.Replicate()])
    x = dist.shard_tensor(paddle.randn([6, 4]), mesh, [dist.Replicate()])
    x.stop_gradient = False
    plain, again = _grads(block, x, None), _grads(block, x, lambda b, a: recompute(b, a))
    return all(np.array_equal(a, b) for a, b in zip(plain, again)), str(block.fc1.weight.grad.placements)


def test_two_ranks_sharded_weight():
    assert run_ranks(_sharded_on_two_ranks, 2, timeout=120) == [(True, "[Shard(dim=1)]")] * 2
