"""Paddle's DistTensor surface as Paddle 3.3.1 shows it: placements compare by value and print as
Paddle's, dim maps <-> placements, a dist tensor's accessors, dtensor_from_local,
unshard_dtensor and shard_layer on 2 ranks, against numpy."""
import numpy as np

import globaltensor.paddle as paddle
import globaltensor.paddle.distributed as dist
from conftest import run_ranks
from globaltensor.paddle.distributed.auto_parallel.placement_type import to_dim_map, to_placements


def test_placements_are_values_printed_as_paddle_prints_them():
    assert dist.Shard(0) == dist.Shard(0) and dist.Shard(0) != dist.Shard(1) and dist.Replicate() == dist.Replicate()
    assert dist.Partial() == dist.Partial() and dist.Shard(0) != dist.Replicate()
    assert len({dist.Shard(1), dist.Shard(1), dist.Replicate(), dist.Replicate(), dist.Partial()}) == 3
    assert [repr(p) for p in (dist.Shard(0), dist.Replicate(), dist.Partial())] == \
        ["Shard(dim=0)", "Replicate()", "Partial(reduce_type=SUM)"]  # Paddle 3.3.1's reprs
    assert dist.Shard(2).is_shard() and dist.Shard(2).is_shard(2) and not dist.Shard(2).is_shard(0)
    assert dist.Shard(2).get_dim() == 2 and dist.Replicate().is_replicated() and dist.Partial().is_partial()
    mesh = dist.ProcessMesh([0], dim_names=["x"])
    assert to_placements([0, -1], mesh) == [dist.Shard(0)]
    assert to_placements([-1, -1], mesh, [0]) == [dist.Partial()]
    assert to_dim_map([dist.Shard(0)], 2) == ([0, -1], {})


def _dist_tensors():
    rank = paddle.distributed.get_rank()
    mesh = dist.ProcessMesh([0, 1], dim_names=["x"])
    whole = np.arange(8, dtype=np.float32).reshape(4, 2)
    t = dist.shard_tensor(paddle.to_tensor(whole), mesh, [dist.Shard(0)])
    accessors = (t.placements, t.process_mesh == mesh, t.process_mesh.dim_names, t._local_shape,
                 t._local_value().numpy(), t.is_dist(), t.dist_attr.dims_mapping, t.dist_attr.sharding_specs)
    piece = paddle.to_tensor(np.full((1, 3), rank, np.float32))
    made = dist.dtensor_from_local(piece, mesh, [dist.Shard(0)])
    dense = dist.unshard_dtensor(made)

    def shard_fn(name, layer, process_mesh):
        if name == "0":  # the first Linear: its weight ([in, out]) split by columns
            layer.weight = dist.shard_tensor(layer.weight, process_mesh, [dist.Shard(1)])

    paddle.seed(0)
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 6), paddle.nn.ReLU(), paddle.nn.Linear(6, 2))
    weights = [p.numpy() for p in model.parameters()]
    model = dist.shard_layer(model, mesh, shard_fn)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    out = model(dist.shard_tensor(paddle.to_tensor(x), mesh, [dist.Replicate()]))
    return (accessors, made.shape, made.numpy(), dense.is_dist(), dense.numpy(), str(model[0].weight.placements),
            str(model[2].weight.placements), weights, x, out.numpy())


def test_dist_tensor_accessors_and_helpers_on_two_ranks():
    for rank, got in enumerate(run_ranks(_dist_tensors, 2)):
        (placements, same_mesh, names, local_shape, local, is_dist, dims_mapping, specs), *rest = got
        made_shape, made, dense_is_dist, dense, w0, w2, weights, x, out = rest
        assert placements == [dist.Shard(0)] and same_mesh and names == ["x"] and local_shape == [2, 2]
        np.testing.assert_array_equal(local, np.arange(8, dtype=np.float32).reshape(4, 2)[2 * rank:2 * rank + 2])
        assert is_dist and dims_mapping == [0, -1] and specs == ["x", None]
        assert list(made_shape) == [2, 3] and not dense_is_dist
        np.testing.assert_array_equal(made, [[0, 0, 0], [1, 1, 1]])
        np.testing.assert_array_equal(dense, [[0, 0, 0], [1, 1, 1]])
        assert w0 == "[Shard(dim=1)]" and w2 == "[Replicate()]"  # shard_fn's choice; the rest replicated
        w1, b1, w2_, b2 = weights
        np.testing.assert_allclose(out, np.maximum(x @ w1 + b1, 0) @ w2_ + b2, rtol=1e-5, atol=1e-6)


def test_the_module_paths_paddles_scripts_import_from():
    """Paddle's own scripts import core from paddle.base and from paddle.framework (and create a
    DeviceContext of their place), check parameters against paddle.base.framework.EagerParamBase, and
    take PyLayer from paddle.autograd.py_layer: each path is there and is the same object."""
    from globaltensor.paddle.autograd.py_layer import PyLayer
    from globaltensor.paddle.base import core
    from globaltensor.paddle.framework import core as framework_core

    assert framework_core is core and PyLayer is paddle.autograd.PyLayer
    ctx = core.DeviceContext.create(paddle.CPUPlace())
    assert ctx.get_place() == paddle.CPUPlace()
    layer = paddle.nn.Linear(2, 3)
    assert isinstance(layer.weight, paddle.base.framework.EagerParamBase)
    assert paddle.base.framework.in_dygraph_mode()
