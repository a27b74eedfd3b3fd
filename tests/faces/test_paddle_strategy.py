"""What dist.Strategy's recompute, gradient_merge and pipeline do in dist.to_static, and OneFlow's
activation_checkpointing: recompute equals no recompute bit for bit (dropout inside), gradient
merge equals the bigger batch, the pipeline on 2 ranks gives the one-process losses (torch)."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from graph_models import ToyModel, TrainGraph

from lazy_torch import torch


def _data(steps=3, rows=8):
    rng = np.random.default_rng(5)
    return [(rng.standard_normal((rows, 10)).astype(np.float32), rng.standard_normal((rows, 16)).astype(np.float32))
            for _ in range(steps)]


def _to_static(strategy, dropout=0.25):
    """Losses and parameters of 3 DistModel train steps of ToyModel (SGD) on one process."""
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    gt.manual_seed(0)
    layer = ToyModel(dropout)
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=layer.parameters())
    model = dist.to_static(layer, None, nn.MSELoss(), opt, strategy)
    losses = [model(paddle.to_tensor(x), paddle.to_tensor(y)).numpy() for x, y in _data()]
    return losses, {k: v.numpy() for k, v in layer.state_dict().items()}, layer


def _bitwise(a, b):
    assert [x.tobytes() for x in a[0]] == [x.tobytes() for x in b[0]]
    assert all(a[1][k].tobytes() == b[1][k].tobytes() for k in a[1])


def test_strategy_recompute_equals_no_recompute_bitwise():
    import globaltensor.paddle.distributed as dist
    plain = _to_static(None)
    strategy = dist.Strategy({"recompute": {"enable": True}})
    recomputed = _to_static(strategy)
    assert "forward" in recomputed[2].net1.__dict__  # the sublayers run through checkpoint
    _bitwise(plain, recomputed)
    named = dist.Strategy({"recompute": {"enable": True, "checkpoints": ["net2"]}})
    only = _to_static(named)
    assert "forward" in only[2].net2.__dict__ and "forward" not in only[2].net1.__dict__
    _bitwise(plain, only)
    with pytest.raises(ValueError, match="no sublayers"):
        _to_static(dist.Strategy({"recompute": {"enable": True, "checkpoints": ["net9"]}}))


def _graph_losses(checkpointing):
    gt.manual_seed(0)
    model = ToyModel(0.25)
    if checkpointing:
        model.net1.to(nn.graph.GraphModule).activation_checkpointing = True
        model.net2.to(nn.graph.GraphModule).activation_checkpointing = True
    step = TrainGraph(model, gt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    losses = [step(gt.tensor(x), gt.tensor(y)).numpy() for x, y in _data()]
    return losses, {k: v.numpy() for k, v in model.state_dict().items()}, step


def test_oneflow_activation_checkpointing_equals_without_bitwise():
    plain, recomputed = _graph_losses(False), _graph_losses(True)
    _bitwise(plain, recomputed)
    gm = recomputed[2].model.net1.to(nn.graph.GraphModule)
    assert gm is recomputed[2].model.net1.to(nn.graph.GraphModule) and gm.activation_checkpointing is True
    with pytest.raises(TypeError, match="bool"):
        gm.activation_checkpointing = 1
    gm.activation_checkpointing = False
    assert "forward" not in recomputed[2].model.net1.__dict__


def test_strategy_gradient_merge_equals_the_bigger_batch():
    import globaltensor.paddle.distributed as dist
    plain = _to_static(None, dropout=0.0)
    merged = _to_static(dist.Strategy({"gradient_merge": {"enable": True, "k_steps": 4, "avg": True}}), dropout=0.0)
    for k in plain[1]:
        np.testing.assert_allclose(merged[1][k], plain[1][k], rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose([float(x) for x in merged[0]], [float(x) for x in plain[0]], rtol=2e-5)


def test_strategy_bad_fields_raise_before_running():
    import globaltensor.paddle.distributed as dist
    s = dist.Strategy()
    s.pipeline.enable, s.pipeline.schedule_mode = True, "ZBH1"
    with pytest.raises(ValueError, match="ZBH1"):
        _to_static(s)
    with pytest.raises(TypeError, match="dist.Strategy"):
        _to_static({"recompute": {"enable": True}})


def _torch_pipeline_losses(init, data):
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 16))
    with torch.no_grad():
        for p, key in zip(model.parameters(), ["0.weight", "0.bias", "2.weight", "2.bias"]):
            p.copy_(torch.from_numpy(init[key]))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in data:
        loss = torch.nn.functional.mse_loss(model(torch.from_numpy(x)), torch.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        x, y = data[0]
        out = model(torch.from_numpy(x))
        losses.append(torch.nn.functional.mse_loss(out, torch.from_numpy(y)).item())  # eval after training
    return losses, out.numpy()


def _pipelined(schedule_mode):
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    gt.manual_seed(0)
    layer = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 16))
    init = {k: v.numpy().copy() for k, v in layer.state_dict().items()}
    mesh0, mesh1 = dist.ProcessMesh([0], dim_names=["x"]), dist.ProcessMesh([1], dim_names=["x"])
    for i, mesh in ((0, mesh0), (2, mesh1)):
        layer[i].weight = dist.shard_tensor(layer[i].weight, mesh, [dist.Replicate()], stop_gradient=False)
        layer[i].bias = dist.shard_tensor(layer[i].bias, mesh, [dist.Replicate()], stop_gradient=False)
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=layer.parameters())
    strategy = dist.Strategy()
    strategy.pipeline.enable, strategy.pipeline.schedule_mode, strategy.pipeline.accumulate_steps = \
        True, schedule_mode, 4
    model = dist.to_static(layer, None, nn.MSELoss(), opt, strategy)
    losses = []
    for x, y in _data():
        xs = dist.shard_tensor(paddle.to_tensor(x), mesh0, [dist.Replicate()])
        ys = dist.shard_tensor(paddle.to_tensor(y), mesh1, [dist.Replicate()])
        if not losses:
            xs0, ys0 = xs, ys
        losses.append(float(model(xs, ys).numpy()))
    model.eval()
    losses.append(float(model(xs0, ys0).numpy()))
    model.predict()
    return losses, init, model(xs0)["out0"].numpy()


@pytest.mark.parametrize("schedule_mode", ["1F1B", "FThenB"])
def test_strategy_pipeline_on_two_ranks_gives_the_one_process_losses(schedule_mode):
    results = run_ranks(_pipelined, 2, schedule_mode, timeout=240)
    want, out = _torch_pipeline_losses(results[0][1], _data())
    for losses, _, predicted in results:  # 3 train steps, then eval and predict on the first batch
        np.testing.assert_allclose(losses, want, rtol=2e-5)
        np.testing.assert_allclose(predicted, out, rtol=2e-5, atol=2e-6)


def _fleet_merge():
    """Fleet collective job: gradient_merge k_steps=2 over rank-local micro-batches of 2 rows."""
    import globaltensor.paddle as paddle
    from globaltensor.paddle.distributed import fleet
    strategy = fleet.DistributedStrategy()
    strategy.gradient_merge, strategy.gradient_merge_configs = True, {"k_steps": 2, "avg": True}
    fleet.init(is_collective=True, strategy=strategy)
    gt.manual_seed(0)
    layer = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 16))
    model = fleet.distributed_model(layer)
    opt = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.1, parameters=layer.parameters()))
    rank, counts = gt.env.get_rank(), []
    for x, y in _data():
        for j in range(2):
            rows = slice(rank * 4 + j * 2, rank * 4 + j * 2 + 2)  # this rank's half, micro-batch j
            with gt.debug.count_collectives() as c:
                nn.functional.mse_loss(model(paddle.to_tensor(x[rows])), paddle.to_tensor(y[rows])).backward()
            counts.append(dict(c))
            opt.step()
            opt.clear_grad()
    return {k: v.numpy().copy() for k, v in layer.state_dict().items()}, counts


def test_fleet_gradient_merge_reduces_once_per_k_and_equals_the_bigger_batch():
    gt.manual_seed(0)
    layer = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 16))
    init = {k: v.numpy().copy() for k, v in layer.state_dict().items()}
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 16))
    with torch.no_grad():
        for p, key in zip(model.parameters(), ["0.weight", "0.bias", "2.weight", "2.bias"]):
            p.copy_(torch.from_numpy(init[key]))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in _data():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        opt.step()
    want = dict(zip(["0.weight", "0.bias", "2.weight", "2.bias"], [p.detach().numpy() for p in model.parameters()]))
    for params, counts in run_ranks(_fleet_merge, 2, timeout=240):
        for k in want:
            np.testing.assert_allclose(params[k], want[k], rtol=2e-5, atol=2e-6, err_msg=k)
        assert counts[0::2] == [{}] * 3 and all(c.get("all_reduce", 0) >= 1 for c in counts[1::2]), counts
