"""gt.amp.GradScaler against torch.amp.GradScaler: an MLP under autocast + scaling, the skip on an inf,
the scale's schedule and state_dict; on 2 ranks an inf on one rank skips the step on both, for one
all_reduce a step."""
import numpy as np
import pytest
from lazy_torch import torch, torch_functional

import globaltensor as gt
from conftest import run_ranks

F, TF = gt.nn.functional, torch_functional


def _mlp_pair(seed=0):
    torch.manual_seed(seed)
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    gm = gt.nn.Sequential(gt.nn.Linear(8, 16), gt.nn.ReLU(), gt.nn.Linear(16, 4))
    gm.load_state_dict({k: gt.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return gm, tm


def _batches(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((16, 8)).astype(np.float32), rng.integers(0, 4, 16)) for _ in range(n)]


def _train(lib, model, batches, inf_at=()):
    """Losses and scales of SGD steps under autocast(bfloat16) + GradScaler(growth_interval=2); at the
    steps in inf_at the first weight's gradient gets an inf."""
    f = TF if lib is torch else F
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    scaler = (torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2) if lib is torch
              else gt.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2))
    losses, scales = [], []
    for i, (x, t) in enumerate(batches):
        with lib.autocast("cpu", dtype=lib.bfloat16):
            loss = f.cross_entropy(model(lib.tensor(x)), lib.tensor(t))
        scaler.scale(loss).backward()
        if i in inf_at:
            model[0].weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        losses.append(float(loss.detach().float().numpy()) if lib is torch else float(loss.float().numpy()))
        scales.append(scaler.get_scale())
    return losses, scales, scaler.state_dict()


@pytest.mark.parametrize("inf_at", [(), (2,)])
def test_mlp_under_autocast_and_scaler_as_torch(inf_at):
    gm, tm = _mlp_pair()
    batches = _batches()
    g_losses, g_scales, g_state = _train(gt, gm, batches, inf_at)
    t_losses, t_scales, t_state = _train(torch, tm, batches, inf_at)
    assert g_scales == t_scales and g_state == t_state
    np.testing.assert_allclose(g_losses, t_losses, rtol=2e-2)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(gm.state_dict()[k].numpy(), v.numpy(), rtol=2e-2, atol=2e-2)


def test_scaler_api_errors_and_state_round_trip():
    w = gt.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = gt.optim.SGD([w], lr=0.1)
    scaler = gt.amp.GradScaler(init_scale=8.0, growth_interval=3)
    scaler.scale(w.sum()).backward()
    scaler.unscale_(opt)
    np.testing.assert_array_equal(w.grad.numpy(), np.ones(3))
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    other = gt.amp.GradScaler()
    other.load_state_dict(scaler.state_dict())
    assert other.state_dict() == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
                                  "_growth_tracker": 1}
    with pytest.raises(AssertionError, match="No inf checks"):
        other.update()
    with pytest.raises(ValueError, match="growth factor"):
        gt.amp.GradScaler(growth_factor=1.0)
    off = gt.amp.GradScaler(enabled=False)
    assert off.scale(w) is w and off.state_dict() == {} and off.get_scale() == 1.0


def _inf_on_rank_one():
    rank = gt.env.get_rank()
    pl = gt.placement("cpu", [0, 1])
    w0 = np.arange(8 * 4, dtype=np.float32).reshape(4, 8) / 32
    w = gt.tensor(w0, placement=pl, sbp=gt.sbp.split(0), requires_grad=True)  # each rank holds 2 rows
    x = gt.tensor(np.ones((3, 8), np.float32), placement=pl, sbp=gt.sbp.broadcast)
    opt = gt.optim.SGD([w], lr=0.5)
    scaler = gt.amp.GradScaler("cpu", init_scale=2.0 ** 8)
    out = {}
    for step, poison in enumerate((True, False)):
        with gt.autocast("cpu", dtype=gt.bfloat16):
            loss = F.linear(x, w).float().sum()
        scaler.scale(loss).backward()
        if poison and rank == 1:
            w.grad._local[0, 0] = np.inf  # only rank 1's piece: rank 0 cannot see it without the agreement
        with gt.debug.count_collectives() as counted:
            scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        full = w.to_global(sbp=gt.sbp.broadcast).to_local().numpy()
        out[step] = (dict(counted), scaler.get_scale(), bool(np.array_equal(full, w0)))
    with gt.debug.count_collectives() as plain:  # one step without a scaler, then with: one collective more
        F.linear(x, w).sum().backward()
        opt.step()
    opt.zero_grad()
    with gt.debug.count_collectives() as scaled:
        scaler.scale(F.linear(x, w).sum()).backward()
        scaler.step(opt)
        scaler.update()
    out["extra"] = {k: scaled.get(k, 0) - plain.get(k, 0) for k in set(scaled) | set(plain)}
    return out


def test_inf_on_one_rank_skips_on_every_rank_with_one_collective():
    for got in run_ranks(_inf_on_rank_one, 2, timeout=180):
        assert got[0] == ({"all_reduce": 1}, 2.0 ** 7, True)  # skipped everywhere, scale backed off
        assert got[1] == ({"all_reduce": 1}, 2.0 ** 7, False)  # a clean step updates
        assert {k: v for k, v in got["extra"].items() if v} == {"all_reduce": 1}
