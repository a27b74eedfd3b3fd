"""Paddle's semi-auto-parallel gradient rule on 2 ranks (as Paddle 3.3.1 gives it): a replicated
leaf whose backward makes a Partial gradient keeps Partial(); a reshard to Replicate() gives the
full gradient (numpy's); a sharded gradient of a replicated leaf is replicated; the optimizer
updates with the reduced value; shard_optimizer keeps states on the parameters' placements."""
import numpy as np
import pytest

import globaltensor.paddle as paddle
import globaltensor.paddle.distributed as dist
from conftest import run_ranks

X = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((6, 8)).astype(np.float32)


def _pair(x_placements, w_placements):
    mesh = dist.ProcessMesh([0, 1], dim_names=["x"])
    x = dist.shard_tensor(X, mesh, x_placements, stop_gradient=False)
    w = dist.shard_tensor(W, mesh, w_placements, stop_gradient=False)
    paddle.matmul(x, w).sum().backward()
    return mesh, x, w


def _full(grad, mesh):
    return dist.reshard(grad, mesh, [dist.Replicate()])._local_value().numpy()


def _grad_rule():
    out = {}
    ones = np.ones((4, 8), np.float32)
    for name, (xp, wp) in {"xR_wS1": ([dist.Replicate()], [dist.Shard(1)]),
                           "xS0_wR": ([dist.Shard(0)], [dist.Replicate()]),
                           "xR_wS0": ([dist.Replicate()], [dist.Shard(0)]),
                           "xR_wR": ([dist.Replicate()], [dist.Replicate()])}.items():
        mesh, x, w = _pair(xp, wp)
        np.testing.assert_allclose(_full(x.grad, mesh), ones @ W.T, rtol=1e-5)
        np.testing.assert_allclose(_full(w.grad, mesh), X.T @ ones, rtol=1e-5)
        out[name] = (str(x.grad.placements), str(w.grad.placements))
    mesh = dist.ProcessMesh([0, 1])
    a = dist.shard_tensor(np.ones((4, 6), np.float32), mesh, [dist.Replicate()], stop_gradient=False)
    b = dist.shard_tensor(X, mesh, [dist.Shard(0)])
    (a * b).sum().backward()  # a Shard(0) gradient of a replicated leaf: replicated, as Paddle's
    out["a_times_S0"] = str(a.grad.placements)
    np.testing.assert_allclose(a.grad._local_value().numpy(), X)
    _, _, w = _pair([dist.Shard(0)], [dist.Replicate()])
    w_param = paddle.create_parameter([6, 8], "float32", default_initializer=paddle.nn.initializer.Assign(W))
    w_param = dist.shard_tensor(w_param, mesh, [dist.Replicate()])
    x = dist.shard_tensor(X, mesh, [dist.Shard(0)])
    paddle.matmul(x, w_param).sum().backward()
    paddle.matmul(x, w_param).sum().backward()  # accumulates, still Partial
    out["accumulated"] = str(w_param.grad.placements)
    opt = dist.shard_optimizer(paddle.optimizer.Momentum(0.1, parameters=[w_param]))
    opt.step()
    np.testing.assert_allclose(w_param._local_value().numpy(), W - 0.1 * 2 * (X.T @ ones), rtol=1e-5)
    state = opt.state[id(w_param)]["momentum_buffer"]
    out["state"] = (str(state.placements), str(w_param.grad.placements))
    return out


def test_partial_gradients_follow_paddles_rule_on_two_ranks():
    for got in run_ranks(_grad_rule, 2):
        assert got == {
            "xR_wS1": ("[Partial(reduce_type=SUM)]", "[Shard(dim=1)]"),  # Paddle 3.3.1's placements
            "xS0_wR": ("[Shard(dim=0)]", "[Partial(reduce_type=SUM)]"),
            "xR_wS0": ("[Replicate()]", "[Shard(dim=0)]"),
            "xR_wR": ("[Replicate()]", "[Replicate()]"),
            "a_times_S0": "[Replicate()]",
            "accumulated": "[Partial(reduce_type=SUM)]",
            "state": ("[Replicate()]", "[Replicate()]"),
        }


def test_shard_optimizer_needs_a_mesh_for_sharding_stages():
    """A stage over dense parameters without a mesh raises (Paddle: ValueError, "mesh ... should be
    set"); the stages themselves are tested on ranks in tests/distributed/test_zero_faces.py."""
    opt = paddle.optimizer.SGD(parameters=[paddle.create_parameter([2], "float32")])
    assert dist.shard_optimizer(opt) is opt
    for stage in (dist.ShardingStage1, dist.ShardingStage2, dist.ShardingStage3):
        with pytest.raises(ValueError, match="mesh"):
            dist.shard_optimizer(opt, stage("x"))
    with pytest.raises(NotImplementedError, match="shard_fn"):
        dist.shard_optimizer(opt, lambda key, param, acc: acc)
