"""ZeRO stages 1-3 as layouts (globaltensor.zero, fully_shard): each stage trains to plain data
parallelism's losses and parameters (and to torch's, on the full values) on 2 and 4 ranks, 1-D and
2x2 with tensor parallelism on the other axis, SGD and AdamW, uneven sizes; the layouts each
stage keeps and the collectives of one step are checked."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from globaltensor import zero

S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast
STEPS = 4


class ToyModel(nn.Module):
    def __init__(self, sizes=(10, 20, 16)):
        super().__init__()
        self.net1 = nn.Linear(sizes[0], sizes[1])
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(sizes[1], sizes[2])

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


ODD = (7, 3, 1)  # on 4 ranks: a (1, 3) weight and a (1,) bias are smaller than the axis, 7 and 3 odd


def _optimizer(name, params):
    return gt.optim.SGD(params, lr=0.05, momentum=0.9) if name == "sgd" else gt.optim.AdamW(params, lr=0.01)


def _layout(model, mesh):
    """Data parallel over mesh axis 0; on a 2x2 mesh Megatron's tensor parallelism on axis 1."""
    if mesh == "2d":
        pl = gt.placement("cpu", [[0, 1], [2, 3]])
        model.to_global(pl, (B, B))
        model.net1.weight = nn.Parameter(model.net1.weight.to_global(sbp=(B, S0)))  # column parallel
        model.net1.bias = nn.Parameter(model.net1.bias.to_global(sbp=(B, S0)))
        model.net2.weight = nn.Parameter(model.net2.weight.to_global(sbp=(B, S1)))  # row parallel
        return pl, (S0, B)
    pl = gt.placement("cpu", list(range(gt.env.get_world_size())))
    model.to_global(pl, B)
    return pl, (S0,)


def _train(stage, optimizer, mesh, sizes, layouts=None):
    """Losses and full parameters after STEPS steps under ZeRO `stage` (0: plain data parallel)."""
    gt.manual_seed(0)
    model = ToyModel(sizes)
    pl, data_sbp = _layout(model, mesh)
    if stage == 3:
        for m in (model.net1, model.net2, model):
            gt.distributed.fully_shard(m, mesh_dim=0)
    opt = _optimizer(optimizer, model.parameters())
    if stage in (1, 2):
        zero.attach(opt, stage, mesh_dim=0)
    losses = []
    for _ in range(STEPS):
        x = gt.randn(12, sizes[0], placement=pl, sbp=data_sbp)
        y = gt.randn(12, sizes[2], placement=pl, sbp=data_sbp)
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        if layouts is not None:
            layouts["grad"] = {n: p.grad.sbp[0] for n, p in model.named_parameters()}
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    if layouts is not None:
        layouts["param"] = {n: p.sbp[0] for n, p in model.named_parameters()}
        layouts["state"] = {n: opt.state[id(p)]["exp_avg" if optimizer == "adamw" else "momentum_buffer"].sbp[0]
                            for n, p in model.named_parameters()}
    return losses, {k: v.numpy() for k, v in model.state_dict().items()}


def _all_stages(optimizer, mesh, sizes):
    out = {}
    for stage in (0, 1, 2, 3):
        layouts = {}
        out[stage] = _train(stage, optimizer, mesh, sizes, layouts) + (layouts,)
    return out


def _torch_reference(optimizer, sizes):
    """The same training in torch (one process, full batches), from our initial values and data."""
    gt.manual_seed(0)
    model = ToyModel(sizes)
    init = {k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()}
    batches = [(gt.randn(12, sizes[0]).numpy(), gt.randn(12, sizes[2]).numpy()) for _ in range(STEPS)]
    net = torch.nn.Sequential(torch.nn.Linear(sizes[0], sizes[1]), torch.nn.ReLU(), torch.nn.Linear(sizes[1], sizes[2]))
    net.load_state_dict({"0.weight": init["net1.weight"], "0.bias": init["net1.bias"],
                         "2.weight": init["net2.weight"], "2.bias": init["net2.bias"]})
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd" else \
        torch.optim.AdamW(net.parameters(), lr=0.01)
    losses = []
    for x, y in batches:
        loss = torch.nn.functional.mse_loss(net(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    names = {"0.weight": "net1.weight", "0.bias": "net1.bias", "2.weight": "net2.weight", "2.bias": "net2.bias"}
    return losses, {names[k]: v.detach().numpy() for k, v in net.state_dict().items()}


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("nprocs, mesh, sizes", [(2, "1d", (10, 20, 16)), (4, "1d", ODD), (4, "2d", (10, 20, 16))],
                         ids=["2ranks", "4ranks-uneven", "2x2-tp"])
def test_each_stage_gives_data_parallel_values(optimizer, nprocs, mesh, sizes):
    runs = run_ranks(_all_stages, nprocs, optimizer, mesh, sizes, timeout=240)
    want_losses, want_params = _torch_reference(optimizer, sizes)
    dp_losses, dp_params, _ = runs[0][0]
    np.testing.assert_allclose(dp_losses, want_losses, rtol=1e-5)
    for rank, run in enumerate(runs):
        for stage in (1, 2, 3):
            losses, params, _ = run[stage]
            np.testing.assert_allclose(losses, dp_losses, rtol=1e-5, err_msg=f"stage {stage} rank {rank}")
            for name, value in params.items():
                np.testing.assert_allclose(value, dp_params[name], rtol=1e-5, atol=1e-7,
                                           err_msg=f"stage {stage} rank {rank} {name}")
                np.testing.assert_allclose(value, want_params[name], rtol=1e-4, atol=1e-6, err_msg=f"torch {name}")
    if optimizer == "adamw" and mesh == "1d":
        layouts = {stage: runs[0][stage][2] for stage in (0, 1, 2, 3)}
        assert set(layouts[0]["state"].values()) == {B} and set(layouts[0]["grad"].values()) == {B}
        assert set(layouts[1]["state"].values()) == {S0} and set(layouts[1]["grad"].values()) == {B}
        assert set(layouts[2]["grad"].values()) == {S0} and set(layouts[2]["param"].values()) == {B}
        assert set(layouts[3]["param"].values()) == {S0} and set(layouts[3]["grad"].values()) == {S0}
        assert set(layouts[3]["state"].values()) == {S0}


def _toy_under_stage(model, stage):
    """ToyModel data parallel on a 1-D mesh under ZeRO stage 0-3 (3: net1, net2 and the root fully
    sharded), and its AdamW: (placement, data sbp, optimizer)."""
    pl, data_sbp = _layout(model, "1d")
    if stage == 3:
        for m in (model.net1, model.net2, model):
            gt.distributed.fully_shard(m)
    opt = gt.optim.AdamW(model.parameters(), lr=0.01)
    if stage in (1, 2):
        zero.attach(opt, stage)
    return pl, data_sbp, opt


def _counted_step(stage):
    gt.manual_seed(0)
    model = ToyModel()
    pl, data_sbp, opt = _toy_under_stage(model, stage)
    counts = []
    for _ in range(2):  # the second step: states exist, buffers planned
        x = gt.randn(12, 10, placement=pl, sbp=data_sbp)
        y = gt.randn(12, 16, placement=pl, sbp=data_sbp)
        with gt.debug.count_collectives() as forward:
            loss = nn.MSELoss()(model(x), y)
        freed = _gathered_pieces(loss)
        with gt.debug.count_collectives() as backward:
            loss.backward()
        with gt.debug.count_collectives() as step:
            opt.step()
        opt.zero_grad()
        counts = [dict(forward), dict(backward), dict(step), freed]
    return counts


def _gathered_pieces(loss):
    """The sizes of the pieces of the gathered parameter copies the autograd graph holds: the copies'
    own, and those their contexts keep to rebuild them (memory held all the same)."""
    sizes, stack, seen = [], [loss], set()
    while stack:
        node = stack.pop()._node
        if node is None or id(node.ctx) in seen:
            continue
        seen.add(id(node.ctx))
        if node.name in ("_Gather", "GatherGroup"):  # the unit's inputs pass through them first: not counted
            skip = sum(not isinstance(t, nn.Parameter) for t in node.ctx.inputs)
            copies = list(range(skip, len(node.ctx._outs))) if node.name == "GatherGroup" else [0]
            sizes += [node.ctx.outputs[i]._local.size for i in copies]
            sizes += [e[1].size for e in (node.ctx._outs[i] for i in copies) if type(e) is tuple and e[1] is not None]
        stack.extend(t for t in node.ctx.inputs if t.requires_grad)
    return sorted(sizes)


def test_collectives_of_one_step_per_stage():
    """Four parameters in two fully_shard units (net1, net2; the root owns none). DP: one bucketed
    all_reduce. Stage 1: the gradients all-reduced, the updated shards all-gathered in one flat
    bucket. Stage 2: the gradients reduce-scattered into their shards in one bucket (zero_buckets).
    Stage 3: one all_gather per unit before forward, again
    before its backward, one reduce_scatter of the unit's gradients; the update is local; after
    forward the graph holds no gathered piece (freed, gathered again in backward)."""
    got = {stage: run_ranks(_counted_step, 2, stage)[0] for stage in (0, 1, 2, 3)}
    assert got[0][:3] == [{}, {"all_reduce": 1}, {}]
    assert got[1][:3] == [{}, {"all_reduce": 1}, {"all_gather": 1}]  # the updated shards in one flat bucket
    assert got[2][:3] == [{}, {"reduce_scatter": 1}, {"all_gather": 1}]  # the gradients in one bucket
    assert got[3][:3] == [{"all_gather": 2}, {"all_gather": 2, "reduce_scatter": 2}, {}]
    assert got[3][3] == [0, 0, 0, 0]


def _bad_mesh_dim():
    model = ToyModel()
    _layout(model, "1d")
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    errors = []
    for call in (lambda: zero.attach(opt, 1, mesh_dim=1), lambda: zero.attach(opt, 4),
                 lambda: gt.distributed.fully_shard(model, mesh_dim=2)):
        try:
            call()
        except ValueError as exc:
            errors.append(str(exc))
    return errors


def test_bad_arguments_raise_on_every_rank_before_any_collective():
    for errors in run_ranks(_bad_mesh_dim, 2):
        assert len(errors) == 3
        assert "mesh_dim 1 is outside [0, 1)" in errors[0] and "stage must be 1, 2 or 3" in errors[1]
    with pytest.raises(ValueError, match="is local"):
        zero.attach(gt.optim.SGD(ToyModel().parameters(), lr=0.1), 1)


def _accumulated(set_to_none):
    """Each stage with two backward calls per step (gradients accumulate), zero_grad either way."""
    out = {}
    for stage in (0, 1, 2, 3):
        gt.manual_seed(0)
        model = ToyModel()
        pl, data_sbp, opt = _toy_under_stage(model, stage)
        for _ in range(2):
            for _ in range(2):
                x = gt.randn(12, 10, placement=pl, sbp=data_sbp)
                nn.MSELoss()(model(x), gt.randn(12, 16, placement=pl, sbp=data_sbp)).backward()
            opt.step()
            opt.zero_grad(set_to_none=set_to_none)
        out[stage] = {k: v.numpy() for k, v in model.state_dict().items()}
    return out


@pytest.mark.parametrize("set_to_none", [True, False])
def test_gradients_accumulate_under_each_stage(set_to_none):
    got = run_ranks(_accumulated, 2, set_to_none)[0]
    for stage in (1, 2, 3):
        for k, v in got[0].items():
            np.testing.assert_allclose(got[stage][k], v, rtol=1e-5, atol=1e-7, err_msg=f"stage {stage} {k}")


def test_fully_shard_recovers_from_a_forward_that_raised():
    """One rank: a forward that raises leaves its gathered copies; the next forward puts the shards
    back first, and backward gives the shard its gradient."""
    pl = gt.placement("cpu", [0])
    model = nn.Linear(4, 3).to_global(pl, B)
    gt.distributed.fully_shard(model)
    weight = model.weight
    with pytest.raises(ValueError):
        model(gt.randn(2, 5, placement=pl, sbp=B))
    model(gt.randn(2, 4, placement=pl, sbp=B)).sum().backward()
    assert model.weight is weight and weight.sbp == (S0,) and weight.grad.sbp == (S0,)
    with pytest.raises(ValueError, match="already fully sharded"):
        gt.distributed.fully_shard(model)
