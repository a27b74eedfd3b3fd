"""ZeRO's faces on 2 ranks, each against plain data parallelism: PyTorch's fully_shard (nested,
reshard_after_forward either way, local parameters put on `mesh`), OneFlow's
nn.Graph.config.enable_zero(stage=1|2|3) (and fully_shard inside a graph), Paddle's shard_optimizer(opt, ShardingStage1/2/3(dim,
mesh)) and dist.to_static with Strategy.sharding."""
import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from test_zero_stages import ToyModel, _layout

S0, B = gt.sbp.split(0), gt.sbp.broadcast
STEPS = 3


def _batches(pl, rows=12):
    """The same values whatever the layout (the sharding-invariant generator); pl None: whole, local."""
    kw = {} if pl is None else {"placement": pl, "sbp": S0}
    return [(gt.randn(rows, 10, **kw), gt.randn(rows, 16, **kw)) for _ in range(STEPS)]


def _result(losses, model, opt):
    states = sorted({str(v.sbp) for st in opt.state.values() for k, v in st.items() if k != "step"})
    return [float(v) for v in losses], {k: v.numpy() for k, v in model.state_dict().items()}, states


def _torch_face(how):
    gt.manual_seed(0)
    model = ToyModel()
    pl = gt.placement("cpu", [0, 1])
    if how == "dp":
        model.to_global(pl, B)
    elif how == "mesh":  # local parameters, put on the mesh by fully_shard
        for m in (model.net1, model.net2, model):
            gt.distributed.fully_shard(m, mesh=pl)
    else:
        model.to_global(pl, B)
        for m in (model.net1, model.net2, model):
            gt.distributed.fully_shard(m, reshard_after_forward=how == "reshard")
    opt = gt.optim.AdamW(model.parameters(), lr=0.01)
    losses = []
    for x, y in _batches(pl):
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return _result(losses, model, opt)


def _oneflow_graph(stage):
    gt.manual_seed(0)
    model = ToyModel()
    pl, _ = _layout(model, "1d")
    if stage == "fully_shard":  # inside a capture the units' parameters stay S(0); ops box them
        for m in (model.net1, model.net2, model):
            gt.distributed.fully_shard(m)
    opt = gt.optim.AdamW(model.parameters(), lr=0.01)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = nn.MSELoss()(self.model(x), y)
            loss.backward()
            return loss

    step = Step()
    if stage in (1, 2, 3):
        step.config.enable_zero(True, stage=stage, shard_min_size=1)
    losses = [step(x, y).item() for x, y in _batches(pl)]
    return _result(losses, model, opt)


def _paddle_layer():
    import globaltensor.paddle as paddle

    class Layer(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.net1, self.net2 = paddle.nn.Linear(10, 20), paddle.nn.Linear(20, 16)

        def forward(self, x):
            return self.net2(paddle.nn.functional.relu(self.net1(x)))
    return Layer()


def _paddle_face(stage, static):
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    paddle.seed(0)
    gt.manual_seed(0)
    mesh = dist.ProcessMesh([0, 1], dim_names=["dp"])
    layer = _paddle_layer()
    opt = paddle.optimizer.AdamW(learning_rate=0.01, parameters=layer.parameters())
    data = [(dist.shard_tensor(x.numpy(), mesh, [dist.Shard(0)]), dist.shard_tensor(y.numpy(), mesh, [dist.Shard(0)]))
            for x, y in _batches(None)]
    if static:
        dist.shard_layer(layer, mesh)
        strategy = dist.Strategy({"sharding": {"enable": bool(stage), "stage": stage or 1, "degree": 2}})
        model = dist.to_static(layer, None, paddle.nn.MSELoss(), opt, strategy)
        losses = [model(x, y).item() for x, y in data]
        return _result(losses, layer, opt)
    if stage:
        stages = {1: dist.ShardingStage1, 2: dist.ShardingStage2, 3: dist.ShardingStage3}
        opt = dist.shard_optimizer(opt, stages[stage]("dp", mesh))
    else:
        dist.shard_layer(layer, mesh)
    losses = []
    for x, y in data:
        loss = paddle.nn.functional.mse_loss(layer(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(loss.item())
    return _result(losses, layer, opt)


def _all_faces():
    out = {f"torch-{how}": _torch_face(how) for how in ("dp", "reshard", "keep", "mesh")}
    out.update({f"graph-{stage}": _oneflow_graph(stage) for stage in (0, 1, 2, 3, "fully_shard")})
    out.update({f"paddle-{stage}": _paddle_face(stage, False) for stage in (0, 1, 2, 3)})
    out.update({f"to_static-{stage}": _paddle_face(stage, True) for stage in (0, 1, 2, 3)})
    return out


def _same(got, want, what):
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, err_msg=what)
    for k in want[1]:
        np.testing.assert_allclose(got[1][k], want[1][k], rtol=1e-5, atol=1e-7, err_msg=f"{what} {k}")


def test_faces_give_data_parallel_values():
    runs = run_ranks(_all_faces, 2, timeout=300)
    for rank, run in enumerate(runs):
        for face in ("torch", "graph", "paddle", "to_static"):
            base = run[f"{face}-dp" if face == "torch" else f"{face}-0"]
            assert base[2] == ["(gt.sbp.broadcast,)"], face
            for key in (k for k in run if k.startswith(face + "-") and run[k] is not base):
                _same(run[key], base, f"{key} rank {rank}")
                assert run[key][2] == ["(gt.sbp.split(dim=0),)"], key  # the optimizer's states: halves
    want = runs[0]["torch-dp"]
    _same(runs[0]["graph-0"], want, "graph vs eager")


def _fleet(sharding, stage=1):
    """Fleet collective job: distributed_model (local parameters) and distributed_optimizer(AdamW),
    with or without strategy.sharding; each rank trains on its half of every batch."""
    import globaltensor.paddle as paddle
    from globaltensor.paddle.distributed import fleet
    strategy = fleet.DistributedStrategy()
    strategy.sharding, strategy.sharding_configs = sharding, {"stage": stage, "sharding_degree": 2}
    fleet.init(is_collective=True, strategy=strategy)
    gt.manual_seed(0)
    layer = ToyModel()
    model = fleet.distributed_model(layer)
    try:
        opt = fleet.distributed_optimizer(paddle.optimizer.AdamW(learning_rate=0.01, parameters=layer.parameters()))
    except NotImplementedError as exc:
        return str(exc)
    rows = slice(gt.env.get_rank() * 6, gt.env.get_rank() * 6 + 6)
    losses = []
    for x, y in _batches(None):
        loss = nn.functional.mse_loss(model(paddle.to_tensor(x.numpy()[rows])), paddle.to_tensor(y.numpy()[rows]))
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(loss.item())
    states = sorted({str(v.sbp) for st in opt.state.values() for k, v in st.items() if k != "step"})
    return losses, {k: v.numpy() for k, v in layer.state_dict().items()}, states


def _fleet_both():
    return _fleet(False), _fleet(True), _fleet(True, stage=2)


def test_fleet_sharding_stage1_splits_the_states_and_keeps_the_values():
    for plain, sharded, refused in run_ranks(_fleet_both, 2, timeout=240):
        _same(sharded, plain, "fleet sharding")
        assert plain[2] == ["None"] and sharded[2] == ["(gt.sbp.split(dim=0),)"]
        assert "only stage 1" in refused
